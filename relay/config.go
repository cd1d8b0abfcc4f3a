package relay

import (
	"crypto/tls"
	"time"

	"github.com/cdc-relay/cdc-relay/decoder"
	recordpkg "github.com/cdc-relay/cdc-relay/record"
	"github.com/cdc-relay/cdc-relay/replication"
	"github.com/cdc-relay/cdc-relay/router"
	"github.com/cdc-relay/cdc-relay/schemaregistry"
)

// Config is everything `cdc-relay run` needs; its tools (replay, dlq, tail,
// check) read the parts they share with it. Every field is a setting
// declared in internal/config (config.Relay): a flag, an env var
// CDC_RELAY_<FLAG_IN_UPPER_SNAKE> (or its _FILE) and a key of the --config
// YAML file; precedence is flag > env > YAML > default. The command line
// parses and checks it (cmd/cdc-relay); this package only reads it.
type Config struct {
	PGURL             string
	Slot              string
	Publication       string
	Tables            []decoder.Table
	KafkaBrokers      []string
	TopicTemplate     string
	SchemaRegistryURL string
	SchemasDir        string
	SubjectStrategy   schemaregistry.Strategy
	DLQTopic          string
	OnInvalid         string
	MetricsAddr       string
	LogFormat         string
	LogLevel          string
	MaxInFlightEvents int
	MaxInFlightBytes  int64
	MaxRecordBytes    int
	KafkaBatchBytes   int
	KafkaCompression  string
	// ExactlyOnce is --delivery exactly-once, with --transactional-id
	// ("" until the relay id is known: cdc-relay-<relay id>), and the
	// transaction bounds --txn-interval, --txn-max-events and --txn-timeout.
	ExactlyOnce      bool
	TransactionalID  string
	TxnInterval      time.Duration
	TxnMaxEvents     int
	TxnTimeout       time.Duration
	StatusInterval   time.Duration
	ReadTimeout      time.Duration
	ShutdownTimeout  time.Duration
	HaltLinger       time.Duration
	KafkaLinger      time.Duration
	RecreateLostSlot bool
	// AllowExtraTables accepts a publication that publishes tables besides
	// the outbox tables (FOR ALL TABLES, TABLES IN SCHEMA, or more listed);
	// their rows are skipped and counted. Default false: exit 2.
	AllowExtraTables  bool
	InitialReplay     bool // --initial-replay: on a first start, replay the rows created before the slot, then stream
	SlotFailover      replication.FailoverMode
	SlotPollInterval  time.Duration
	KafkaTLS          bool
	KafkaTLSCAFile    string
	KafkaTLSCertFile  string
	KafkaTLSKeyFile   string
	KafkaSASL         string
	KafkaSASLUser     string
	KafkaSASLPassword string
	RegistryCAFile    string
	KeyFormat         recordpkg.KeyFormat
	ValueFormat       recordpkg.ValueFormat
	BuiltinHeaders    router.Builtin
	HeaderColumns     []recordpkg.HeaderColumn
	TimestampColumn   string
	Tombstones        bool
	MessagePrefix     string
	// MessagePrefixSet is true when --message-prefix was set (flag, env or
	// YAML): an older server is then a configuration error, not a quiet
	// absence of messages.
	MessagePrefixSet  bool
	CloudEvents       bool
	CloudEventsSource string
	// CloudEventsMode is --cloudevents-mode; default binary.
	CloudEventsMode recordpkg.CloudEventsMode
	// UnknownFields is --unknown-fields: what becomes of a payload member
	// the schema lacks; UnknownFieldsName is its text (ignore or dlq).
	UnknownFields     recordpkg.UnknownFields
	UnknownFieldsName string
	// Tracing is --tracing: each event gets an OpenTelemetry span (see
	// tracing.go for the OTEL_* environment that also decides). Default false.
	Tracing bool
	// CheckpointTopic is the compacted topic the relay keeps its checkpoint in.
	CheckpointTopic string
	// RelayID keys the checkpoint; "" means <system identifier>/<database>/<slot>.
	RelayID string
	// RabbitMQURL, when set (--rabbitmq-url), makes the relay publish to
	// RabbitMQ instead of Kafka (KafkaBrokers is then empty): to the
	// durable topic exchange RabbitMQExchange (default outbox), declared
	// unless RabbitMQDeclare is false (default true), with the routing key
	// of the RoutingKey template (default {event_type}); dead letters go
	// to the stream RabbitMQDLQStream (default outbox.dlq), the checkpoint
	// to the streams named after RabbitMQCheckpointStream (default
	// cdc-relay.checkpoints).
	RabbitMQURL              string
	RabbitMQExchange         string
	RabbitMQDeclare          bool
	RoutingKey               string
	RabbitMQDLQStream        string
	RabbitMQCheckpointStream string
	// RabbitMQTLSCAFile, RabbitMQTLSCertFile and RabbitMQTLSKeyFile are the
	// amqps:// settings (--rabbitmq-tls-ca-file, -cert-file, -key-file;
	// default none: the system roots, no client certificate).
	// RabbitMQTLS is the TLS config the command line built of them; nil:
	// the system roots.
	RabbitMQTLSCAFile, RabbitMQTLSCertFile, RabbitMQTLSKeyFile string
	RabbitMQTLS                                                *tls.Config
}

// RabbitMQTLSConfig is a copy of RabbitMQTLS, for one client (the AMQP
// client writes the server name into the config it is given); nil when
// RabbitMQTLS is.
func (c *Config) RabbitMQTLSConfig() *tls.Config {
	if c.RabbitMQTLS == nil {
		return nil
	}
	return c.RabbitMQTLS.Clone()
}

// RabbitMQ reports whether the relay publishes to RabbitMQ.
func (c *Config) RabbitMQ() bool { return c.RabbitMQURL != "" }

// topicTemplate is the router's template: --topic-template, or under
// RabbitMQ the exchange's name, which stands for the topic wherever a
// topic names something (the schema-registry subjects).
func (c *Config) topicTemplate() string {
	if c.RabbitMQ() {
		return c.RabbitMQExchange
	}
	return c.TopicTemplate
}

// DeadLetters names where dead letters go: --dlq-topic, or under RabbitMQ
// the --rabbitmq-dlq-stream.
func (c *Config) DeadLetters() string {
	if c.RabbitMQ() {
		return c.RabbitMQDLQStream
	}
	return c.DLQTopic
}
