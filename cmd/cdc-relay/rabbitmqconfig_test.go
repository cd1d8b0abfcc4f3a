package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cdc-relay/cdc-relay/internal/config"
)

// rabbitRequired are the settings of a RabbitMQ relay with JSON values (no
// registry needed).
var rabbitRequired = []string{"--pg-url", "postgres://u@h/db", "--rabbitmq-url", "amqp://guest:secret@r:5672/", "--value-format", "json"}

// rabbit is rabbitRequired and extra.
func rabbit(extra ...string) []string { return append(append([]string{}, rabbitRequired...), extra...) }

// TestRabbitMQSettings: the broker is exactly one of --kafka-brokers and
// --rabbitmq-url; a setting of the other broker given explicitly, from the
// flag, env or YAML, is exit 2 naming it; exactly-once and an unknown
// routing-key placeholder are exit 2 with the reason.
func TestRabbitMQSettings(t *testing.T) {
	yaml := filepath.Join(t.TempDir(), "relay.yaml")
	if err := os.WriteFile(yaml, []byte("kafka-linger: 5ms\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	kafka := []string{"--pg-url", "postgres://u@h/db", "--kafka-brokers", "k:9092", "--value-format", "json"}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string // the error's start; "" means accepted
	}{
		{"neither", []string{"--pg-url", "postgres://u@h/db", "--value-format", "json"}, nil, "--kafka-brokers: is required: set the flag, CDC_RELAY_KAFKA_BROKERS"},
		{"both", rabbit("--kafka-brokers", "k:9092"), nil, "--rabbitmq-url: is set and so is --kafka-brokers"},
		{"both, one from env", kafka, map[string]string{"CDC_RELAY_RABBITMQ_URL": "amqp://r/"}, "--rabbitmq-url: is set and so is --kafka-brokers"},
		{"rabbitmq alone", rabbitRequired, nil, ""},
		{"rabbitmq from env", []string{"--pg-url", "postgres://u@h/db", "--value-format", "json"}, map[string]string{"CDC_RELAY_RABBITMQ_URL": "amqps://r/vh"}, ""},
		{"not amqp", []string{"--pg-url", "postgres://u@h/db", "--rabbitmq-url", "http://r/", "--value-format", "json"}, nil, "--rabbitmq-url: must start with amqp:// or amqps://"},
		{"kafka flag with rabbitmq", rabbit("--kafka-compression", "lz4"), nil, "--kafka-compression: is a Kafka setting"},
		{"kafka flag at its default, given", rabbit("--dlq-topic", "outbox.dlq"), nil, "--dlq-topic: is a Kafka setting"},
		{"kafka env with rabbitmq", rabbitRequired, map[string]string{"CDC_RELAY_CHECKPOINT_TOPIC": "c"}, "--checkpoint-topic: is a Kafka setting"},
		{"kafka yaml with rabbitmq", rabbit("--config", yaml), nil, "--kafka-linger: is a Kafka setting"},
		{"topic template with rabbitmq", rabbit("--topic-template", "x.{event_type}"), nil, "--topic-template: is a Kafka setting"},
		{"rabbitmq flag with kafka", append(kafka[:len(kafka):len(kafka)], "--routing-key", "{aggregate_type}"), nil, "--routing-key: is a RabbitMQ setting"},
		{"rabbitmq env with kafka", kafka, map[string]string{"CDC_RELAY_RABBITMQ_EXCHANGE": "events"}, "--rabbitmq-exchange: is a RabbitMQ setting"},
		{"exactly-once", rabbit("--delivery", "exactly-once"), nil, "--delivery: exactly-once needs Kafka: AMQP 0-9-1 has no transaction"},
		{"unknown placeholder", rabbit("--routing-key", "{event_type}.{tenant}"), nil, "--routing-key: \"{event_type}.{tenant}\": unknown placeholder {tenant}"},
		{"unclosed placeholder", rabbit("--routing-key", "{event_type"), nil, "--routing-key: \"{event_type\": unclosed '{'"},
		{"every placeholder", rabbit("--routing-key", "{aggregate_type}.{event_type}.{aggregate_id}"), nil, ""},
		{"bad exchange", rabbit("--rabbitmq-exchange", "a b"), nil, "--rabbitmq-exchange: \"a b\" is not an exchange name"},
		{"dlq stream reserved", rabbit("--rabbitmq-dlq-stream", "amq.dlq"), nil, "--rabbitmq-dlq-stream: \"amq.dlq\" starts with amq."},
		{"dlq stream is the exchange", rabbit("--rabbitmq-dlq-stream", "outbox"), nil, "--rabbitmq-dlq-stream: \"outbox\" is the name of --rabbitmq-exchange too"},
		{"avro needs the registry", rabbitRequired[:4], nil, "--schema-registry-url: is required with --value-format avro"},
		{"max-record-bytes beyond kafka's batch", rabbit("--max-record-bytes", "4000000"), nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadConfig(tt.args, env(tt.env), &bytes.Buffer{})
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want == "":
				return
			case err == nil:
				t.Fatalf("accepted; want %q", tt.want)
			case !strings.HasPrefix(err.Error(), tt.want):
				t.Fatalf("got  %v\nwant %s…", err, tt.want)
			}
			var cerr *ConfigError
			if !errors.As(err, &cerr) {
				t.Fatalf("%v (%T) is not a configuration error (exit 2)", err, err)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Fatalf("the password is in the message: %v", err)
			}
		})
	}
}

// TestRabbitMQDefaults: the RabbitMQ settings' defaults, and the URL from
// CDC_RELAY_RABBITMQ_URL_FILE.
func TestRabbitMQDefaults(t *testing.T) {
	file := filepath.Join(t.TempDir(), "url")
	if err := os.WriteFile(file, []byte("amqp://u:p@r:5672/vh\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig([]string{"--pg-url", "postgres://u@h/db", "--value-format", "json"}, env(map[string]string{"CDC_RELAY_RABBITMQ_URL_FILE": file}), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	got := []string{c.RabbitMQURL, c.RabbitMQExchange, c.RoutingKey, c.RabbitMQDLQStream, c.RabbitMQCheckpointStream, c.DeadLetters()}
	want := []string{"amqp://u:p@r:5672/vh", "outbox", "{event_type}", "outbox.dlq", "cdc-relay.checkpoints", "outbox.dlq"}
	if strings.Join(got, " ") != strings.Join(want, " ") || !c.RabbitMQDeclare || !c.RabbitMQ() || len(c.KafkaBrokers) != 0 {
		t.Fatalf("got %q (declare %v), want %q (declare true)", got, c.RabbitMQDeclare, want)
	}
	if red := Redact(c.RabbitMQURL); strings.Contains(red, ":p@") {
		t.Fatalf("Redact left the password: %s", red)
	}
}

// TestBrokerOnlyListsAreSettings: every name in the Kafka-only and
// RabbitMQ-only lists is a setting of run, and none is in both.
func TestBrokerOnlyListsAreSettings(t *testing.T) {
	run := map[string]bool{}
	for _, name := range config.Run.Settings {
		run[name] = true
	}
	seen := map[string]bool{}
	for _, name := range append(append([]string{}, config.KafkaOnly...), config.RabbitMQOnly...) {
		if !run[name] || seen[name] {
			t.Errorf("%s: a setting of run %v, listed twice %v", name, run[name], seen[name])
		}
		seen[name] = true
	}
}
