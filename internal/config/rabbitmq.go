package config

import (
	"errors"
	"fmt"
	"strings"
)

// The settings of the RabbitMQ path (docs/CONFIGURATION.md#rabbitmq).
var (
	RabbitMQURL      = newString(Setting{Name: "rabbitmq-url", Arg: "URL", Help: "amqp://user:pass@host:5672/vhost or amqps://...: publish to RabbitMQ instead of Kafka; exactly one of --rabbitmq-url and --kafka-brokers is required; prefer CDC_RELAY_RABBITMQ_URL or CDC_RELAY_RABBITMQ_URL_FILE for the password", Doc: "`amqp://user:pass@host:5672/vhost` or `amqps://…`: publish to RabbitMQ instead of Kafka (see [RabbitMQ](#rabbitmq)). Exactly one of `--rabbitmq-url` and `--kafka-brokers` is required: both, or neither, is exit 2. The password is redacted in logs; prefer `CDC_RELAY_RABBITMQ_URL_FILE`", DocDefault: "one of the two", Check: amqpURL})
	RabbitMQExchange = newString(Setting{Name: "rabbitmq-exchange", Arg: "EXCHANGE", Default: "outbox", Help: "RabbitMQ: the durable topic exchange every event is published to; with --value-format avro its name stands for the topic in the schema-registry subjects", Doc: "RabbitMQ: the durable `topic` exchange every event is published to (declared at each connect unless `--rabbitmq-declare=false`; an existing exchange of another type or durability is exit 2 naming it). With Avro its name stands for the Kafka topic in the subject names: `<exchange>-value` (`topic`), `<exchange>-<record>` (`topic_record`)",
		Check: match(topicName, "is not an exchange name the relay takes: use 1-249 of a-z, A-Z, 0-9, '.', '_' and '-' (it also names the schema-registry subjects)")})
	RabbitMQDeclare   = newBool(Setting{Name: "rabbitmq-declare", Default: "true", Help: "RabbitMQ: declare the exchange and the dead-letter stream at each connect; false for a role without configure permission (they must exist then)", Doc: "RabbitMQ: declare the exchange (durable `topic`) and the dead-letter stream at each connect; `false` for a role without configure permission: nothing is declared, and both must exist"})
	RoutingKey        = newString(Setting{Name: "routing-key", Arg: "TEMPLATE", Default: "{event_type}", Help: "RabbitMQ: the routing key, a template over {event_type}, {aggregate_type} and {aggregate_id}; a key over 255 bytes makes the event a dead letter (invalid_routing_key)", Doc: "RabbitMQ: the routing key, a template over `{event_type}`, `{aggregate_type}` and `{aggregate_id}` (another placeholder is exit 2). An event whose key is over 255 bytes is a dead letter of kind `invalid_routing_key`; one no queue is bound for is a dead letter of kind `unroutable`"})
	RabbitMQDLQStream = newString(Setting{Name: "rabbitmq-dlq-stream", Arg: "QUEUE", Default: "outbox.dlq", Help: "RabbitMQ: the stream queue (x-queue-type stream) dead letters go to, through the default exchange, with error_kind and error headers as on Kafka", Doc: "RabbitMQ: the durable stream queue (`x-queue-type: stream`) dead letters go to through the default exchange, with the `error_kind` and `error` headers of Kafka's dead letters; declared unless `--rabbitmq-declare=false`. A stream is read without being consumed",
		Check: queueName})
	RabbitMQCheckpointStream = newString(Setting{Name: "rabbitmq-checkpoint-stream", Arg: "PREFIX", Default: "cdc-relay.checkpoints", Help: "RabbitMQ: the prefix of the streams that keep the checkpoint: <prefix>.relay.<hash of the relay id> (one per relay), <prefix>.gaps and <prefix>.relays", Doc: "RabbitMQ: the prefix of the streams that keep the checkpoint (the RabbitMQ counterpart of `--checkpoint-topic`): `<prefix>.relay.<hash>` holds one relay's checkpoints (size retention never reaches another relay's), `<prefix>.gaps` the accepted gaps and `<prefix>.relays` the directory, both without retention",
		Check: queueName})
	RabbitMQTLSCAFile   = newString(Setting{Name: "rabbitmq-tls-ca-file", Arg: "FILE", Help: "amqps: PEM CA bundle that signs the broker's certificate (default: the system roots)", Doc: "`amqps://`: PEM CA bundle for the broker (default: system roots); with an `amqp://` URL it is exit 2"})
	RabbitMQTLSCertFile = newString(Setting{Name: "rabbitmq-tls-cert-file", Arg: "FILE", Help: "amqps: PEM client certificate, for a broker that requires mutual TLS (ssl_options.fail_if_no_peer_cert)", Doc: "`amqps://`: client certificate for mutual TLS"})
	RabbitMQTLSKeyFile  = newString(Setting{Name: "rabbitmq-tls-key-file", Arg: "FILE", Help: "amqps: PEM key of the client certificate", DocJoin: true})
)

// RabbitMQTLSSettings are the amqps settings, which every command that
// reaches RabbitMQ takes.
var RabbitMQTLSSettings = names(RabbitMQTLSCAFile, RabbitMQTLSCertFile, RabbitMQTLSKeyFile)

// KafkaOnly names the settings of run that only the Kafka path reads. With
// --rabbitmq-url, one given explicitly (flag, env or YAML) is exit 2 naming
// it: it would be ignored without a word otherwise.
var KafkaOnly = names(KafkaTLS, KafkaTLSCAFile, KafkaTLSCertFile, KafkaTLSKeyFile, KafkaSASLMechanism, KafkaSASLUsername, KafkaSASLPassword,
	KafkaBatchBytes, KafkaLinger, KafkaCompression, CheckpointTopic, DLQTopic, TopicTemplate, KeyFormat, TombstoneOnNullPayload,
	TransactionalID, TxnInterval, TxnMaxEvents, TxnTimeout)

// RabbitMQOnly names the settings of run that only the RabbitMQ path reads;
// with --kafka-brokers, one given explicitly is exit 2 naming it.
var RabbitMQOnly = names(RabbitMQExchange, RabbitMQDeclare, RoutingKey, RabbitMQDLQStream, RabbitMQCheckpointStream, RabbitMQTLSCAFile, RabbitMQTLSCertFile, RabbitMQTLSKeyFile)

// amqpURL checks an amqp:// or amqps:// URL ("" is unset).
func amqpURL(v string) error {
	if v != "" && !strings.HasPrefix(v, "amqp://") && !strings.HasPrefix(v, "amqps://") {
		return errors.New("must start with amqp:// or amqps://, e.g. amqp://user:pass@host:5672/vhost")
	}
	return nil
}

// queueName checks a RabbitMQ queue name the relay declares: not empty,
// at most 255 bytes (a shortstr, with room for the checkpoint streams'
// suffixes), and not in the broker's reserved amq. namespace.
func queueName(v string) error {
	switch {
	case strings.TrimSpace(v) == "":
		return errors.New("is empty: name the stream, e.g. outbox.dlq")
	case len(v) > 200:
		return fmt.Errorf("is %d bytes: a queue name takes at most 255, and the relay adds suffixes; use at most 200", len(v))
	case strings.HasPrefix(v, "amq."):
		return fmt.Errorf("%q starts with amq., which RabbitMQ reserves", v)
	}
	return nil
}
