package config

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"
	"time"

	"github.com/cdc-relay/cdc-relay/router"
)

var (
	slotName  = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)
	identName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]{0,62}$`)
	topicName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,249}$`)
)

// Columns is the shape of a columns: mapping (the outbox column names).
var Columns = &Shape{
	Keys: map[string]*Shape{"id": nil, "aggregate_type": nil, "aggregate_id": nil, "event_type": nil, "payload": nil, "headers": nil, "created_at": nil},
	Help: "columns: maps id, aggregate_type, aggregate_id, event_type, payload, headers and created_at to column names",
}

// tableEntry is the shape of a YAML table list entry.
var tableEntry = &Shape{
	Keys: map[string]*Shape{"name": nil, "columns": Columns},
	Help: "a table entry is a name or {name: schema.table, columns: {...}}",
}

const (
	hour = int64(time.Hour)
	sec  = int64(time.Second)
)

// The settings of cdc-relay, each declared once: its name (the flag; the
// env name and YAML key follow), default, --help text and validation, and
// its row of docs/CONFIGURATION.md's settings table (Doc, DocDefault,
// DocJoin; go generate writes the table). A new setting is one variable
// here, one entry in Relay, and one in the Settings of each Command that
// takes it (RelaySettings for all of run's).
var (
	ConfigFile = newString(Setting{Name: "config", Arg: "FILE", NoYAML: true, Help: "YAML file with the same keys as the flags (and columns:)", Doc: "the YAML file (keys below, and `columns:`); `CDC_RELAY_CONFIG` works too, a `config:` key does not"})
	PGURL      = newString(Setting{Name: "pg-url", Arg: "URL", Help: "libpq URL or DSN of the database; the relay adds replication=database for the stream", Doc: "libpq URL/DSN; the relay adds `replication=database` for the stream; several hosts (`postgres://h1:5432,h2:5432/app?target_session_attrs=read-write`) for failover"})
	Slot       = newString(Setting{Name: "slot", Arg: "NAME", Default: "cdc_relay", Help: "logical replication slot (pgoutput), created if missing", Doc: "logical slot (pgoutput), created if missing",
		Check: match(slotName, "is not a valid slot name: use 1-63 of a-z, 0-9 and _")})
	RecreateLostSlot = newBool(Setting{Name: "recreate-lost-slot", Default: "false", Help: "true: standing consent to every future gap: drop and recreate an invalidated slot (wal_status lost, or conflicting) instead of halting, record the gap in the checkpoint topic and log it at ERROR; prefer cdc-relay slot recreate --accept-gap, which asks each time", Doc: "`true`: **standing consent to every future gap**: drop and recreate an invalidated slot (`wal_status = lost`, or `conflicting`) instead of exiting 3, record the gap in the checkpoint topic and log it at ERROR. Prefer `cdc-relay slot recreate --accept-gap`, which asks each time"})
	CheckpointTopic  = newString(Setting{Name: "checkpoint-topic", Arg: "TOPIC", Default: "cdc-relay.checkpoints", Help: "compacted Kafka topic where the relay remembers the LSN it confirmed, so that a lost slot is never taken for a first start; created (cleanup.policy=compact) when missing", Doc: "compacted Kafka topic where the relay remembers the LSN it confirmed (see [The checkpoint](RELIABILITY.md#the-checkpoint-a-lost-slot-is-never-a-silent-gap)); created with `cleanup.policy=compact` when missing; a topic with any other policy is exit 2",
		Check: match(topicName, "is not a valid Kafka topic name: use 1-249 of a-z, A-Z, 0-9, '.', '_' and '-'")})
	RelayID          = newString(Setting{Name: "relay-id", Arg: "ID", Help: "key of this relay's checkpoint; default <system identifier>/<database>/<slot>, unique across clusters sharing one Kafka and unchanged by a failover", Doc: "the key of this relay's checkpoint: unique across clusters that share one Kafka, unchanged by a failover or a host change; set it when two clusters use the same database and slot names", DocDefault: "`<system identifier>/<database>/<slot>`"})
	SlotFailover     = newString(Setting{Name: "slot-failover", Default: "auto", Choices: []string{"auto", "true", "false"}, Help: "make the slot a failover slot, which a standby with sync_replication_slots = on keeps, so that it survives a promotion: auto (on for PostgreSQL 17+), true (needs 17+) or false", Doc: "make the slot a failover slot (created with `FAILOVER`, or an existing slot converted with `ALTER_REPLICATION_SLOT`), which standbys with `sync_replication_slots = on` keep through a promotion: `auto` (on for PostgreSQL 17+), `true` (17+ only: an older server exits 2 naming its version) or `false`"})
	SlotPollInterval = newDuration(Setting{Name: "slot-poll-interval", Default: "15s", Min: sec / 10, Max: hour, Help: "how often pg_replication_slots is read for the cdc_relay_slot_* metrics (safe WAL size, wal_status, time to exhaustion, spill statistics)", Doc: "how often `pg_replication_slots` is read (a catalog query) for `cdc_relay_slot_safe_wal_size_bytes`, `cdc_relay_slot_wal_status`, `cdc_relay_slot_exhaustion_seconds` and the spill counters"})
	Publication      = newString(Setting{Name: "publication", Arg: "NAME", Default: "cdc_relay", Help: "publication, created if missing", Doc: "publication, created if missing. An existing one must publish exactly the `--table` tables (see [OPERATIONS.md](OPERATIONS.md#publication-drift)): one listing another table exits 2 with the `ALTER PUBLICATION … DROP TABLE …` that fixes it; a configured table it lacks is added (`ALTER PUBLICATION … ADD TABLE`, logged at WARN) when the relay's role owns the publication and the table, and exits 2 with that statement otherwise. Rows written to a table before it joined the publication are never decoded: `cdc-relay replay --table T --since TIME` publishes them",
		Check: match(identName, "is not a valid publication name: use letters, digits and _")})
	InitialReplay        = newBool(Setting{Name: "initial-replay", Default: "false", Help: "true: on a first start (no checkpoint, the slot created now), publish through the replay path the outbox rows created before the slot existed (created_at up to the database clock read right after its creation), then stream; a crashed or taken-over initial replay runs again. false: the relay never reads the outbox tables, and warns when they seem to hold rows", Doc: "`true`: the outbox's answer to Debezium's `snapshot.mode=initial`. On a first start (no checkpoint, the slot created now), once the relay holds the slot and before it streams, publish through the replay path the rows created before the slot existed (`created_at` up to the database clock read right after the slot's creation; a row at that boundary may come twice, never zero times), then stream; a pending marker in the checkpoint makes a crashed or taken-over initial replay run again, by whichever replica holds the slot. Each table needs a `created_at` column (timestamptz or timestamp), else exit 2. `false`: the relay never reads the outbox tables; a first start only warns when they seem to hold rows (see [Rows written before the first start](RELIABILITY.md#rows-written-before-the-first-start))"})
	AllowExtraTables     = newBool(Setting{Name: "allow-extra-tables", Default: "false", Help: "true: accept a publication that publishes other tables besides the outbox tables (FOR ALL TABLES, TABLES IN SCHEMA, or more tables listed, as Debezium's); their rows are skipped and counted in cdc_relay_skipped_rows_total. false: such a publication is exit 2", Doc: "`true`: accept a publication that also publishes other tables (`FOR ALL TABLES`, `FOR TABLES IN SCHEMA`, or more tables listed, as Debezium's `dbz_publication`); their rows are skipped and counted in `cdc_relay_skipped_rows_total{table}`, the first of each table logged at INFO. `false`: such a publication exits 2 naming this flag"})
	Table                = newList(Setting{Name: "table", Arg: "SCHEMA.TABLE", Default: "public.outbox", Entry: tableEntry, NameKey: "name", Help: "the outbox table; repeat the flag for several (env and YAML: a list), all in one publication; --table '' for a table-less outbox (logical messages only)", Doc: "the outbox table; repeat the flag for several (env: comma-separated; YAML: a list, each entry may map its own `columns:`), all in one publication; `--table ''` (YAML `table: []`) for a table-less outbox of logical messages only. A table that does not exist, or one given twice, exits 2"})
	MessagePrefix        = newString(Setting{Name: "message-prefix", Arg: "PREFIX", Default: "outbox", Help: "logical decoding messages (pg_logical_emit_message, PostgreSQL 14+) with this prefix are outbox events too; empty: none", Doc: "on PostgreSQL 14+, transactional logical decoding messages with this prefix are outbox events too (the table-less outbox, below); empty: none. Set explicitly against PostgreSQL 13, it exits 2"})
	KafkaBrokers         = newString(Setting{Name: "kafka-brokers", Arg: "HOST:PORT,...", Help: "comma-separated Kafka bootstrap list", Doc: "comma-separated bootstrap list; exactly one of `--kafka-brokers` and `--rabbitmq-url` is required", DocDefault: "one of the two", Check: brokers})
	KafkaTLS             = newBool(Setting{Name: "kafka-tls", Default: "false", Help: "true: connect to the brokers over TLS", Doc: "connect to the brokers over TLS"})
	KafkaTLSCAFile       = newString(Setting{Name: "kafka-tls-ca-file", Arg: "FILE", Help: "PEM CA bundle that signs the brokers' certificates (default: the system roots)", Doc: "PEM CA bundle for the brokers (default: system roots)"})
	KafkaTLSCertFile     = newString(Setting{Name: "kafka-tls-cert-file", Arg: "FILE", Help: "PEM client certificate, for brokers that require mutual TLS", Doc: "client certificate for mutual TLS"})
	KafkaTLSKeyFile      = newString(Setting{Name: "kafka-tls-key-file", Arg: "FILE", Help: "PEM key of the client certificate", DocJoin: true})
	KafkaSASLMechanism   = newString(Setting{Name: "kafka-sasl-mechanism", Default: "none", Help: "SASL mechanism: none, plain, scram-sha-256 or scram-sha-512", Doc: "`none`, `plain`, `scram-sha-256`, `scram-sha-512`", Arg: "MECHANISM"})
	KafkaSASLUsername    = newString(Setting{Name: "kafka-sasl-username", Arg: "USER", Help: "SASL user name", Doc: "SASL credentials (prefer `CDC_RELAY_KAFKA_SASL_PASSWORD_FILE`)"})
	KafkaSASLPassword    = newString(Setting{Name: "kafka-sasl-password", Arg: "PASSWORD", Help: "SASL password; prefer CDC_RELAY_KAFKA_SASL_PASSWORD or CDC_RELAY_KAFKA_SASL_PASSWORD_FILE", DocJoin: true})
	SchemaRegistryCAFile = newString(Setting{Name: "schema-registry-ca-file", Arg: "FILE", Help: "PEM CA bundle for an https registry (default: the system roots); basic auth goes in the URL, http://user:pass@host", Doc: "PEM CA bundle for an https registry"})
	TopicTemplate        = newString(Setting{Name: "topic-template", Arg: "TEMPLATE", Default: router.DefaultTemplate, Help: "topic name; placeholders {aggregate_type} and {event_type}", Doc: "topic name; `{aggregate_type}` and `{event_type}`"})
	SchemaRegistryURL    = newString(Setting{Name: "schema-registry-url", Arg: "URL", Help: "Confluent-compatible schema registry (required with --value-format avro or --key-format avro)", Doc: "Confluent-compatible registry (`http://user:pass@host` for basic auth); required with `--value-format avro` (the default) or `--key-format avro`", DocDefault: "required for Avro", Check: httpURL})
	SchemasDir           = newString(Setting{Name: "schemas-dir", Arg: "DIR", Help: "directory of .avsc files, one per event_type (required with --value-format avro)", Doc: "directory of `.avsc` files; a file's base name is the event_type; required with `--value-format avro`", DocDefault: "required for Avro"})
	SubjectStrategy      = newString(Setting{Name: "subject-strategy", Default: "topic_record", Choices: []string{"topic", "record", "topic_record"}, Help: "subject name strategy: topic, record or topic_record", Doc: "`topic` (`<topic>-value`), `record` (`<record>`), `topic_record` (`<topic>-<record>`)"})
	AggregateTypes       = newList(Setting{Name: "aggregate-types", Arg: "A,B", Help: "schemas check only: comma-separated aggregate types whose topics to check even before their subjects exist", Doc: "`schemas check` only: comma-separated aggregate types whose topics to check even before their subjects exist. Not a setting of `run`"})
	DLQTopic             = newString(Setting{Name: "dlq-topic", Arg: "TOPIC", Default: "outbox.dlq", Help: "dead-letter topic"})
	OnInvalid            = newString(Setting{Name: "on-invalid", Default: "dlq", Choices: []string{"dlq", "halt"}, Help: "what to do with an invalid event: dlq or halt", Doc: "`dlq` or `halt`"})
	UnknownFields        = newString(Setting{Name: "unknown-fields", Default: "ignore", Choices: []string{"ignore", "dlq"}, Help: "a payload member the event type's Avro schema lacks: ignore (Avro's writer semantics: published without it) or dlq (an invalid event, kind unknown_field, kept until cdc-relay dlq redrive sends it with the new schema); counted and logged either way", Doc: "a payload member the event type's Avro schema has no field for (`\"extra_field\": \"surprise\"`): `ignore` publishes the event without it (Avro's writer semantics), `dlq` makes the event a dead letter of kind `unknown_field`, kept until `cdc-relay dlq redrive` sends it on with the schema that has the field. Either way each such member is counted in `cdc_relay_unknown_fields_total{event_type}` and logged at WARN once per event type and field (`address.zip` for a nested one). Not used with `--value-format json`"})
	Group                = newString(Setting{Name: "group", Arg: "GROUP", Default: "cdc-relay-redrive", Help: "dlq redrive, dlq stats and dlq retire: the Kafka consumer group whose committed offsets say which dead letters were redriven (dlq stats counts those after them as pending, unless retired; dlq retire retires only those)", Doc: "`dlq redrive` and `dlq stats`: the Kafka consumer group whose committed offsets on `--dlq-topic` say which dead letters were dealt with (`dlq stats` counts those after them as pending, unless `dlq retire` retired them)",
		Check: func(v string) error {
			if strings.TrimSpace(v) == "" {
				return errors.New("is empty: name the consumer group, e.g. cdc-relay-redrive")
			}
			return nil
		}})
	DLQRetiredTopic = newString(Setting{Name: "dlq-retired-topic", Arg: "TOPIC", Default: "outbox.dlq.retired", Help: "dlq retire, dlq stats and dlq redrive: the compacted Kafka topic that keeps the retirements (dlq retire: a dead letter marked handled, with its reason), one record per letter keyed by its --dlq-topic, topic id, partition and offset", Doc: "`dlq retire`, `dlq stats` and `dlq redrive`: the Kafka topic that keeps the retirements (`dlq retire`: a dead letter marked handled, with its reason), one record per letter keyed `DLQ_TOPIC/TOPIC_ID/PARTITION/OFFSET`, its value a JSON object with the letter's id, event type, error kind, table, the reason, when and by whom; `dlq retire` creates it compacted (`cleanup.policy=compact`, `retention.ms=-1`) when missing. One topic may serve several dead-letter topics. Not a setting of `run`",
		Check: func(v string) error {
			if strings.TrimSpace(v) == "" {
				return errors.New("is empty: name the topic of the retirements, e.g. outbox.dlq.retired")
			}
			return nil
		}})
	MetricsAddr            = newString(Setting{Name: "metrics-addr", Arg: "[HOST]:PORT", Default: ":9187", Help: "serves /metrics, /healthz and /readyz", Doc: "serves `/metrics`, `/healthz`, `/readyz`", Check: listenAddr})
	LogFormat              = newString(Setting{Name: "log-format", Default: "text", Choices: []string{"text", "json"}, Help: "log format: text or json", Doc: "`text` or `json`"})
	LogLevel               = newString(Setting{Name: "log-level", Default: "info", Choices: []string{"debug", "info", "warn", "error"}, Help: "log level: debug, info, warn or error", Doc: "`debug`, `info`, `warn`, `error`"})
	MaxInFlightEvents      = newInt(Setting{Name: "max-in-flight-events", Default: "50000", Min: 1, Help: "events read from the slot and not yet acknowledged by Kafka", Doc: "events read and not yet acknowledged; when full the relay stops reading and PostgreSQL holds the WAL"})
	MaxInFlightBytes       = newInt(Setting{Name: "max-in-flight-bytes", Default: "67108864", Min: 1024, Help: "bytes of those events", Doc: "the same bound in bytes; unless `GOMEMLIMIT` is set, the relay also sets Go's soft memory limit to 1.25 × this + 48 MiB (128 MiB by default)"})
	MaxRecordBytes         = newInt(Setting{Name: "max-record-bytes", Default: "1000000", Min: 1024, Help: "largest Kafka record (key+value+headers); larger events are invalid", Doc: "larger records are invalid events (Kafka's default `message.max.bytes` is 1048588)"})
	KafkaBatchBytes        = newInt(Setting{Name: "kafka-batch-bytes", Default: "1048576", Min: 1024, Help: "largest produce request per partition; keep it at most the broker's message.max.bytes", Doc: "largest produce request per partition"})
	KafkaLinger            = newDuration(Setting{Name: "kafka-linger", Default: "2ms", Min: 0, Max: sec, Help: "how long a produce request waits for more events when they trickle in one at a time (Java linger.ms); events that arrive during a request always go in the next one", Doc: "how long events that trickle in wait for company before they are sent (Java `linger.ms`). When transactions come faster than about one a linger, the relay reads the replication stream only once those that come within a linger of the first are there (at the rate it measured), or after two lingers when the rate falls, and sends what it read together at once. Slower, and in a backlog, at-least-once events go as soon as another comes once the first has waited half of it, when more are queued, when they fill a batch (`--kafka-batch-bytes`), or when it ends. Exactly-once, it is also franz-go's per-partition linger, cut short when the transaction commits (which sends at once). `0s` sends at once"})
	KafkaCompression       = newString(Setting{Name: "kafka-compression", Default: "none", Choices: []string{"none", "gzip", "snappy", "lz4", "zstd"}, Help: "record batch compression: none, gzip, snappy, lz4 or zstd", Doc: "`none`, `gzip`, `snappy`, `lz4`, `zstd`; `lz4` roughly halves the broker's CPU for large payloads (lz4 frames as the Java producer writes them), if every consumer has an lz4 codec"})
	Delivery               = newString(Setting{Name: "delivery", Default: "at-least-once", Choices: []string{"at-least-once", "exactly-once"}, Help: "at-least-once: a crash may publish events again (consumers drop them by id); exactly-once: each PostgreSQL transaction goes out inside a Kafka transaction with the checkpoint, so a read_committed consumer sees every event once", Doc: "`at-least-once`, or `exactly-once`: each PostgreSQL transaction goes out inside a Kafka transaction with the checkpoint, and a `read_committed` consumer sees every event exactly once through any crash (see [Delivery guarantees](RELIABILITY.md#delivery-guarantees))"})
	TransactionalID        = newString(Setting{Name: "transactional-id", Arg: "ID", Help: "exactly-once: the Kafka transactional id; default cdc-relay- plus the relay id. Every replica of one relay shares it: the one that takes the slot fences the others", Doc: "exactly-once: the Kafka transactional id, shared by every replica of one relay; the replica that takes the slot fences the others", DocDefault: "`cdc-relay-<relay id>`"})
	TxnInterval            = newDuration(Setting{Name: "txn-interval", Default: "100ms", Min: sec / 1000, Max: 10 * sec, Help: "exactly-once: under load a Kafka transaction commits at the first PostgreSQL transaction boundary after this long (when idle it commits at once)", Doc: "exactly-once: under load a Kafka transaction commits at the first PostgreSQL transaction boundary after this long; when the relay is idle it commits at once"})
	TxnMaxEvents           = newInt(Setting{Name: "txn-max-events", Default: "10000", Min: 1, Help: "exactly-once: a Kafka transaction commits at the first PostgreSQL transaction boundary after this many events", Doc: "exactly-once: a Kafka transaction commits at the first boundary after this many events"})
	TxnTimeout             = newDuration(Setting{Name: "txn-timeout", Default: "60s", Min: sec, Max: hour, Help: "exactly-once: the producer's transaction.timeout.ms, at most the broker's transaction.max.timeout.ms (15 min by default); a PostgreSQL transaction that cannot be delivered within it halts the relay", Doc: "exactly-once: the producer's `transaction.timeout.ms`, at most the broker's `transaction.max.timeout.ms` (15 min by default); a PostgreSQL transaction that cannot be delivered within it halts the relay, naming its size"})
	StatusInterval         = newDuration(Setting{Name: "status-interval", Default: "1s", Min: sec / 100, Max: 10 * sec, Help: "how often the confirmed LSN is reported to PostgreSQL (at most 10s)", Doc: "how often the confirmed LSN is reported (with a reply request); at most 10 s"})
	ReadTimeout            = newDuration(Setting{Name: "read-timeout", Default: "60s", Min: sec, Max: hour, Help: "a stream silent this long is treated as dead and reconnected (raised to wal_sender_timeout/2 + 5s if that is longer)", Doc: "a silent stream is treated as dead and reconnected (raised to `wal_sender_timeout`/2 + 5 s when that is longer)"})
	ShutdownTimeout        = newDuration(Setting{Name: "shutdown-timeout", Default: "30s", Min: sec, Max: hour, Help: "how long shutdown waits for Kafka to acknowledge in-flight events", Doc: "how long SIGTERM waits for Kafka to acknowledge in-flight events"})
	KeyFormat              = newString(Setting{Name: "key-format", Default: "string", Arg: "FORMAT", Help: "Kafka key bytes, as Kafka Connect's key converter writes them: string (StringConverter), json (JsonConverter), json-schema (JsonConverter with schemas) or avro (AvroConverter, subject <topic>-key)", Doc: "the key bytes Kafka Connect's key converter would write: `string` (StringConverter), `json` (JsonConverter, a JSON string literal), `json-schema` (JsonConverter with schemas), `avro` (AvroConverter: `0x00`, schema id of `\"string\"` under `<topic>-key`, Avro string); the partition is murmur2 of these bytes"})
	ValueFormat            = newString(Setting{Name: "value-format", Default: "avro", Arg: "FORMAT", Help: "Kafka value: avro (Confluent wire format, the event type's schema) or json (the payload's compact JSON, as Debezium's outbox router with table.expand.json.payload=true)", Doc: "`avro` (the event type's schema, Confluent wire format) or `json` (the payload as compact JSON object bytes, exactly as Debezium's router writes it with `table.expand.json.payload=true` and JsonConverter without schemas: docs/MIGRATING.md; then `--schema-registry-url` and `--schemas-dir` are optional)"})
	BuiltinHeaders         = newString(Setting{Name: "builtin-headers", Arg: "LIST", Default: "id,event_type,aggregate_type", Help: "which of the headers id, event_type and aggregate_type are written (Debezium writes id alone); empty for none", Doc: "which of these headers are written; `id` alone is Debezium's set"})
	HeaderColumns          = newString(Setting{Name: "header-columns", Arg: "COL[:HEADER],...", Help: "more outbox columns copied into headers as text, col[:header],... (uuid lowercase, integers decimal, timestamptz RFC 3339, timestamp epoch microseconds: Debezium's forms)", Doc: "more columns as headers, `col[:header],...`, in Debezium's text forms: uuid lowercase, integers decimal, numeric with its scale (`12.50`), boolean `true`/`false`, timestamptz RFC 3339 in UTC with the column's precision (`2024-03-05T06:07:08.123000Z`), timestamp epoch microseconds (milliseconds for a precision of 0–3), date epoch days, text and json as is; NULL gives a null header. A missing column or another type exits 2"})
	TimestampColumn        = newString(Setting{Name: "timestamp-column", Arg: "COLUMN", Help: "outbox column the Kafka record timestamp comes from (timestamptz, timestamp as UTC, or bigint epoch milliseconds; NULL falls back); default the transaction's commit time", Doc: "the record timestamp from this column (timestamptz, timestamp read as UTC, or bigint epoch milliseconds); NULL falls back to the commit time, an unreadable value is an invalid event (`invalid_timestamp`). Default: the transaction's commit time, the same on every redelivery"})
	TombstoneOnNullPayload = newBool(Setting{Name: "tombstone-on-null-payload", Default: "false", Help: "true: a NULL payload becomes a record with a null value and the aggregate key (a tombstone, for compacted topics) instead of an invalid event", Doc: "`true`: a NULL payload becomes a tombstone (null value, the aggregate's key) for compacted topics; otherwise it is an invalid event"})
	CloudEvents            = newBool(Setting{Name: "cloudevents", Default: "false", Help: "true: add the CloudEvents Kafka binary-mode headers ce_specversion, ce_id, ce_source, ce_type, ce_subject, ce_time and content-type (--cloudevents-mode structured puts the attributes in the value instead)", Doc: "`true`: add the CloudEvents Kafka binary-mode headers `ce_specversion` (`1.0`), `ce_id` (the event id), `ce_source`, `ce_type` (event_type), `ce_subject` (aggregate_id), `ce_time` (commit time, RFC 3339 with milliseconds) and `content-type` (`application/avro` or `application/json`); `--cloudevents-mode structured` puts the attributes in the value instead"})
	CloudEventsSource      = newString(Setting{Name: "cloudevents-source", Arg: "URI", Help: "the CloudEvents source attribute, a URI-reference such as /orders or https://shop.example/orders; required with --cloudevents", Doc: "the `ce_source` attribute, a URI-reference (`/orders`, `https://shop.example/orders`); required with `--cloudevents` (exit 2 without)"})
	CloudEventsMode        = newString(Setting{Name: "cloudevents-mode", Default: "binary", Choices: []string{"binary", "structured"}, Help: "with --cloudevents: binary (the attributes in ce_* headers, the value as it is) or structured (the value is the application/cloudevents+json envelope: the attributes, and the event as data for JSON values or data_base64 for Avro; header content-type application/cloudevents+json)", Doc: "with `--cloudevents`: `binary` (the `ce_*` headers above, the value unchanged) or `structured` (the value is the JSON envelope `application/cloudevents+json` with `specversion`, `id`, `source`, `type`, `subject`, `time`, `datacontenttype` and the event as `data` for `--value-format json` or `data_base64` for Avro, in the Confluent wire format; the `content-type` header is `application/cloudevents+json` and no `ce_*` header is written; see [CloudEvents on the wire](KIT.md#cloudevents-on-the-wire)). Without `--cloudevents`, `structured` exits 2"})
	Tracing                = newBool(Setting{Name: "tracing", Default: "false", Help: "true: give each published event an OpenTelemetry span, a child of its traceparent header, exported over OTLP as the standard OTEL_* environment says (OTEL_TRACES_EXPORTER=otlp turns it on too; OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none keeps it off)", Doc: "`true`: give each published event an OpenTelemetry span, a child of its `traceparent`, exported over OTLP as the standard `OTEL_*` environment says; `OTEL_TRACES_EXPORTER=otlp` turns it on too, `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` keep it off (see [Tracing](OPERATIONS.md#tracing))"})
	HaltLinger             = newDuration(Setting{Name: "halt-linger", Default: "20s", Min: 0, Max: 8760 * hour, Help: "after a halt, keep serving /readyz (503, with the cause) and /metrics this long before exiting 1; 0s exits at once, SIGTERM ends it early", Doc: "after a halt, keep serving `/readyz` (503 with the cause) and `/metrics` (`cdc_relay_halted 1`) this long, then exit 1 (3 when the slot is gone); `0s` exits at once, SIGTERM ends it early"})
)

// Relay is every setting of cdc-relay, in the order --help prints them
// and the settings table lists them.
var Relay = NewRegistry(map[string]*Shape{"columns": Columns},
	ConfigFile,
	PGURL,
	Slot,
	RecreateLostSlot,
	CheckpointTopic,
	RelayID,
	SlotFailover,
	SlotPollInterval,
	Publication,
	InitialReplay,
	AllowExtraTables,
	Table,
	MessagePrefix,
	KafkaBrokers,
	KafkaTLS,
	KafkaTLSCAFile,
	KafkaTLSCertFile,
	KafkaTLSKeyFile,
	KafkaSASLMechanism,
	KafkaSASLUsername,
	KafkaSASLPassword,
	RabbitMQURL,
	RabbitMQExchange,
	RabbitMQDeclare,
	RoutingKey,
	RabbitMQDLQStream,
	RabbitMQCheckpointStream,
	RabbitMQTLSCAFile,
	RabbitMQTLSCertFile,
	RabbitMQTLSKeyFile,
	SchemaRegistryCAFile,
	TopicTemplate,
	SchemaRegistryURL,
	SchemasDir,
	SubjectStrategy,
	AggregateTypes,
	DLQTopic,
	OnInvalid,
	UnknownFields,
	Group,
	DLQRetiredTopic,
	MetricsAddr,
	LogFormat,
	LogLevel,
	MaxInFlightEvents,
	MaxInFlightBytes,
	MaxRecordBytes,
	KafkaBatchBytes,
	KafkaLinger,
	KafkaCompression,
	Delivery,
	TransactionalID,
	TxnInterval,
	TxnMaxEvents,
	TxnTimeout,
	StatusInterval,
	ReadTimeout,
	ShutdownTimeout,
	KeyFormat,
	ValueFormat,
	BuiltinHeaders,
	HeaderColumns,
	TimestampColumn,
	TombstoneOnNullPayload,
	CloudEvents,
	CloudEventsSource,
	CloudEventsMode,
	Tracing,
	HaltLinger,
)

// match checks a value against re; msg follows the quoted value.
func match(re *regexp.Regexp, msg string) func(string) error {
	return func(v string) error {
		if !re.MatchString(v) {
			return fmt.Errorf("%q %s", v, msg)
		}
		return nil
	}
}

// brokers checks a comma-separated host:port list with at least one entry.
func brokers(v string) error {
	if v == "" {
		// Unset: a command that needs brokers requires them (Required),
		// and status reads the checkpoint topic only when they are set.
		return nil
	}
	n := 0
	for _, b := range strings.Split(v, ",") {
		if b = strings.TrimSpace(b); b == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(b); err != nil {
			return fmt.Errorf("%q is not host:port", b)
		}
		n++
	}
	if n == 0 {
		return errors.New("is required: set host:port[,host:port]")
	}
	return nil
}

func httpURL(v string) error {
	if v != "" && !strings.HasPrefix(v, "http://") && !strings.HasPrefix(v, "https://") {
		return fmt.Errorf("%q must start with http:// or https://", v)
	}
	return nil
}

func listenAddr(v string) error {
	if _, port, err := net.SplitHostPort(v); err != nil || port == "" {
		return fmt.Errorf("%q is not [host]:port, e.g. :9187", v)
	}
	return nil
}
