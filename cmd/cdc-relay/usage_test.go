package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestUsageNamesBothBrokers: cdc-relay help says the relay publishes to
// Kafka or RabbitMQ, which flag picks each, and that check looks at either;
// the commands it lists are the ones it listed before RabbitMQ.
func TestUsageNamesBothBrokers(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"help"}, env(nil), &stdout, &stderr); code != exitOK {
		t.Fatalf("help: exit %d, want 0; stderr %s", code, stderr.String())
	}
	got := stdout.String()
	if first, _, _ := strings.Cut(got, "\n"); first != "cdc-relay publishes outbox rows from a PostgreSQL logical replication slot to Kafka or RabbitMQ." {
		t.Errorf("first line %q, want it to name Kafka and RabbitMQ", first)
	}
	for _, want := range []string{"--kafka-brokers or --rabbitmq-url names the broker.", "check PostgreSQL, the slot, the table, Kafka or RabbitMQ, the registry"} {
		if !strings.Contains(got, want) {
			t.Errorf("usage does not say %q:\n%s", want, got)
		}
	}
	var commands []string
	for _, line := range strings.Split(got, "\n") {
		if strings.HasPrefix(line, "  cdc-relay ") {
			commands = append(commands, line)
		}
	}
	want := []string{
		"  cdc-relay run [flags]   stream until SIGTERM or SIGINT",
		"  cdc-relay check [flags] preflight: check PostgreSQL, the slot, the table, Kafka or RabbitMQ, the registry and the schemas",
		"  cdc-relay schemas check test local .avsc files against the registry's compatibility, registering nothing",
		"  cdc-relay slot recreate --accept-gap",
		"  cdc-relay replay        re-publish outbox rows chosen by --since or --from-id, to repair a gap (cdc-relay replay -h)",
		"  cdc-relay dlq stats     count the dead letters by error kind, event type and age",
		"  cdc-relay dlq redrive   send dead letters on once their cause is fixed (cdc-relay dlq redrive -h)",
		"  cdc-relay status        print the slot's state and lag from pg_replication_slots (--json)",
		"  cdc-relay tail [TOPIC...]",
		"  cdc-relay version       print the version",
		"  cdc-relay healthcheck   exit 0 when the relay on --metrics-addr answers /healthz (for Docker HEALTHCHECK)",
	}
	if strings.Join(commands, "\n") != strings.Join(want, "\n") {
		t.Errorf("command lines:\n%s\nwant:\n%s", strings.Join(commands, "\n"), strings.Join(want, "\n"))
	}
}

// TestHelpNamesRabbitMQLines: replay --help gives the lines replay prints
// under --rabbitmq-url beside Kafka's, and slot --help where the gap is
// recorded under it.
func TestHelpNamesRabbitMQLines(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"replay", "--help"}, []string{`("published id=... topic=... key=..."`, `"published id=... exchange=... routing_key=..."`, "dlq_stream=... reason=..."}},
		{[]string{"slot", "--help"}, []string{"gap in the checkpoint topic, or under --rabbitmq-url the\n             checkpoint streams"}},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(tc.args, env(nil), &stdout, &stderr); code != exitOK {
			t.Fatalf("%v: exit %d; stderr %s", tc.args, code, stderr.String())
		}
		for _, w := range tc.want {
			if !strings.Contains(stdout.String(), w) {
				t.Errorf("%v does not say %q:\n%s", tc.args, w, stdout.String())
			}
		}
	}
}
