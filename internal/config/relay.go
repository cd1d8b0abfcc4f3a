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

// Relay declares every setting of cdc-relay, in the order --help prints
// them. A new setting is one entry here, one line in a Command's Settings
// (RelaySettings for all of run's), and a row of docs/CONFIGURATION.md's
// settings table.
var Relay = NewRegistry([]Setting{
	{Name: "config", Arg: "FILE", NoYAML: true, Help: "YAML file with the same keys as the flags (and columns:)"},
	{Name: "pg-url", Arg: "URL", Help: "libpq URL or DSN of the database; the relay adds replication=database for the stream"},
	{Name: "slot", Arg: "NAME", Default: "cdc_relay", Help: "logical replication slot (pgoutput), created if missing",
		Check: match(slotName, "is not a valid slot name: use 1-63 of a-z, 0-9 and _")},
	{Name: "recreate-lost-slot", Kind: Bool, Default: "false", Help: "true: standing consent to every future gap: drop and recreate an invalidated slot (wal_status lost, or conflicting) instead of halting, record the gap in the checkpoint topic and log it at ERROR; prefer cdc-relay slot recreate --accept-gap, which asks each time"},
	{Name: "checkpoint-topic", Arg: "TOPIC", Default: "cdc-relay.checkpoints", Help: "compacted Kafka topic where the relay remembers the LSN it confirmed, so that a lost slot is never taken for a first start; created (cleanup.policy=compact) when missing",
		Check: match(topicName, "is not a valid Kafka topic name: use 1-249 of a-z, A-Z, 0-9, '.', '_' and '-'")},
	{Name: "relay-id", Arg: "ID", Help: "key of this relay's checkpoint; default <system identifier>/<database>/<slot>, unique across clusters sharing one Kafka and unchanged by a failover"},
	{Name: "slot-failover", Default: "auto", Choices: []string{"auto", "true", "false"}, Help: "make the slot a failover slot, which a standby with sync_replication_slots = on keeps, so that it survives a promotion: auto (on for PostgreSQL 17+), true (needs 17+) or false"},
	{Name: "slot-poll-interval", Kind: Duration, Default: "15s", Min: sec / 10, Max: hour, Help: "how often pg_replication_slots is read for the cdc_relay_slot_* metrics (safe WAL size, wal_status, time to exhaustion, spill statistics)"},
	{Name: "publication", Arg: "NAME", Default: "cdc_relay", Help: "publication, created if missing",
		Check: match(identName, "is not a valid publication name: use letters, digits and _")},
	{Name: "initial-replay", Kind: Bool, Default: "false", Help: "true: on a first start (no checkpoint, the slot created now), publish through the replay path the outbox rows created before the slot existed (created_at up to the database clock read right after its creation), then stream; a crashed or taken-over initial replay runs again. false: the relay never reads the outbox tables, and warns when they seem to hold rows"},
	{Name: "allow-extra-tables", Kind: Bool, Default: "false", Help: "true: accept a publication that publishes other tables besides the outbox tables (FOR ALL TABLES, TABLES IN SCHEMA, or more tables listed, as Debezium's); their rows are skipped and counted in cdc_relay_skipped_rows_total. false: such a publication is exit 2"},
	{Name: "table", Kind: List, Arg: "SCHEMA.TABLE", Default: "public.outbox", Entry: tableEntry, NameKey: "name", Help: "the outbox table; repeat the flag for several (env and YAML: a list), all in one publication; --table '' for a table-less outbox (logical messages only)"},
	{Name: "message-prefix", Arg: "PREFIX", Default: "outbox", Help: "logical decoding messages (pg_logical_emit_message, PostgreSQL 14+) with this prefix are outbox events too; empty: none"},
	{Name: "kafka-brokers", Arg: "HOST:PORT,...", Help: "comma-separated Kafka bootstrap list", Check: brokers},
	{Name: "kafka-tls", Kind: Bool, Default: "false", Help: "true: connect to the brokers over TLS"},
	{Name: "kafka-tls-ca-file", Arg: "FILE", Help: "PEM CA bundle that signs the brokers' certificates (default: the system roots)"},
	{Name: "kafka-tls-cert-file", Arg: "FILE", Help: "PEM client certificate, for brokers that require mutual TLS"},
	{Name: "kafka-tls-key-file", Arg: "FILE", Help: "PEM key of the client certificate"},
	{Name: "kafka-sasl-mechanism", Default: "none", Help: "SASL mechanism: none, plain, scram-sha-256 or scram-sha-512", Arg: "MECHANISM"},
	{Name: "kafka-sasl-username", Arg: "USER", Help: "SASL user name"},
	{Name: "kafka-sasl-password", Arg: "PASSWORD", Help: "SASL password; prefer CDC_RELAY_KAFKA_SASL_PASSWORD or CDC_RELAY_KAFKA_SASL_PASSWORD_FILE"},
	{Name: "schema-registry-ca-file", Arg: "FILE", Help: "PEM CA bundle for an https registry (default: the system roots); basic auth goes in the URL, http://user:pass@host"},
	{Name: "topic-template", Arg: "TEMPLATE", Default: router.DefaultTemplate, Help: "topic name; placeholders {aggregate_type} and {event_type}"},
	{Name: "schema-registry-url", Arg: "URL", Help: "Confluent-compatible schema registry (required with --value-format avro or --key-format avro)", Check: httpURL},
	{Name: "schemas-dir", Arg: "DIR", Help: "directory of .avsc files, one per event_type (required with --value-format avro)"},
	{Name: "subject-strategy", Default: "topic_record", Choices: []string{"topic", "record", "topic_record"}, Help: "subject name strategy: topic, record or topic_record"},
	{Name: "aggregate-types", Kind: List, Arg: "A,B", Help: "schemas check only: comma-separated aggregate types whose topics to check even before their subjects exist"},
	{Name: "dlq-topic", Arg: "TOPIC", Default: "outbox.dlq", Help: "dead-letter topic"},
	{Name: "on-invalid", Default: "dlq", Choices: []string{"dlq", "halt"}, Help: "what to do with an invalid event: dlq or halt"},
	{Name: "unknown-fields", Default: "ignore", Choices: []string{"ignore", "dlq"}, Help: "a payload member the event type's Avro schema lacks: ignore (Avro's writer semantics: published without it) or dlq (an invalid event, kind unknown_field, kept until cdc-relay dlq redrive sends it with the new schema); counted and logged either way"},
	{Name: "group", Arg: "GROUP", Default: "cdc-relay-redrive", Help: "dlq redrive, dlq stats and dlq retire: the Kafka consumer group whose committed offsets say which dead letters were redriven (dlq stats counts those after them as pending, unless retired; dlq retire retires only those)",
		Check: func(v string) error {
			if strings.TrimSpace(v) == "" {
				return errors.New("is empty: name the consumer group, e.g. cdc-relay-redrive")
			}
			return nil
		}},
	{Name: "dlq-retired-topic", Arg: "TOPIC", Default: "outbox.dlq.retired", Help: "dlq retire, dlq stats and dlq redrive: the compacted Kafka topic that keeps the retirements (dlq retire: a dead letter marked handled, with its reason), one record per letter keyed by its --dlq-topic, topic id, partition and offset",
		Check: func(v string) error {
			if strings.TrimSpace(v) == "" {
				return errors.New("is empty: name the topic of the retirements, e.g. outbox.dlq.retired")
			}
			return nil
		}},
	{Name: "metrics-addr", Arg: "[HOST]:PORT", Default: ":9187", Help: "serves /metrics, /healthz and /readyz", Check: listenAddr},
	{Name: "log-format", Default: "text", Choices: []string{"text", "json"}, Help: "log format: text or json"},
	{Name: "log-level", Default: "info", Choices: []string{"debug", "info", "warn", "error"}, Help: "log level: debug, info, warn or error"},
	{Name: "max-in-flight-events", Kind: Int, Default: "50000", Min: 1, Help: "events read from the slot and not yet acknowledged by Kafka"},
	{Name: "max-in-flight-bytes", Kind: Int, Default: "67108864", Min: 1024, Help: "bytes of those events"},
	{Name: "max-record-bytes", Kind: Int, Default: "1000000", Min: 1024, Help: "largest Kafka record (key+value+headers); larger events are invalid"},
	{Name: "kafka-batch-bytes", Kind: Int, Default: "1048576", Min: 1024, Help: "largest produce request per partition; keep it at most the broker's message.max.bytes"},
	{Name: "kafka-linger", Kind: Duration, Default: "2ms", Min: 0, Max: sec, Help: "how long a produce request waits for more events when they trickle in one at a time (Java linger.ms); events that arrive during a request always go in the next one"},
	{Name: "kafka-compression", Default: "none", Choices: []string{"none", "gzip", "snappy", "lz4", "zstd"}, Help: "record batch compression: none, gzip, snappy, lz4 or zstd"},
	{Name: "delivery", Default: "at-least-once", Choices: []string{"at-least-once", "exactly-once"}, Help: "at-least-once: a crash may publish events again (consumers drop them by id); exactly-once: each PostgreSQL transaction goes out inside a Kafka transaction with the checkpoint, so a read_committed consumer sees every event once"},
	{Name: "transactional-id", Arg: "ID", Help: "exactly-once: the Kafka transactional id; default cdc-relay- plus the relay id. Every replica of one relay shares it: the one that takes the slot fences the others"},
	{Name: "txn-interval", Kind: Duration, Default: "100ms", Min: sec / 1000, Max: 10 * sec, Help: "exactly-once: under load a Kafka transaction commits at the first PostgreSQL transaction boundary after this long (when idle it commits at once)"},
	{Name: "txn-max-events", Kind: Int, Default: "10000", Min: 1, Help: "exactly-once: a Kafka transaction commits at the first PostgreSQL transaction boundary after this many events"},
	{Name: "txn-timeout", Kind: Duration, Default: "60s", Min: sec, Max: hour, Help: "exactly-once: the producer's transaction.timeout.ms, at most the broker's transaction.max.timeout.ms (15 min by default); a PostgreSQL transaction that cannot be delivered within it halts the relay"},
	{Name: "status-interval", Kind: Duration, Default: "1s", Min: sec / 100, Max: 10 * sec, Help: "how often the confirmed LSN is reported to PostgreSQL (at most 10s)"},
	{Name: "read-timeout", Kind: Duration, Default: "60s", Min: sec, Max: hour, Help: "a stream silent this long is treated as dead and reconnected (raised to wal_sender_timeout/2 + 5s if that is longer)"},
	{Name: "shutdown-timeout", Kind: Duration, Default: "30s", Min: sec, Max: hour, Help: "how long shutdown waits for Kafka to acknowledge in-flight events"},
	{Name: "key-format", Default: "string", Arg: "FORMAT", Help: "Kafka key bytes, as Kafka Connect's key converter writes them: string (StringConverter), json (JsonConverter), json-schema (JsonConverter with schemas) or avro (AvroConverter, subject <topic>-key)"},
	{Name: "value-format", Default: "avro", Arg: "FORMAT", Help: "Kafka value: avro (Confluent wire format, the event type's schema) or json (the payload's compact JSON, as Debezium's outbox router with table.expand.json.payload=true)"},
	{Name: "builtin-headers", Arg: "LIST", Default: "id,event_type,aggregate_type", Help: "which of the headers id, event_type and aggregate_type are written (Debezium writes id alone); empty for none"},
	{Name: "header-columns", Arg: "COL[:HEADER],...", Help: "more outbox columns copied into headers as text, col[:header],... (uuid lowercase, integers decimal, timestamptz RFC 3339, timestamp epoch microseconds: Debezium's forms)"},
	{Name: "timestamp-column", Arg: "COLUMN", Help: "outbox column the Kafka record timestamp comes from (timestamptz, timestamp as UTC, or bigint epoch milliseconds; NULL falls back); default the transaction's commit time"},
	{Name: "tombstone-on-null-payload", Kind: Bool, Default: "false", Help: "true: a NULL payload becomes a record with a null value and the aggregate key (a tombstone, for compacted topics) instead of an invalid event"},
	{Name: "cloudevents", Kind: Bool, Default: "false", Help: "true: add the CloudEvents Kafka binary-mode headers ce_specversion, ce_id, ce_source, ce_type, ce_subject, ce_time and content-type"},
	{Name: "cloudevents-source", Arg: "URI", Help: "the CloudEvents source attribute, a URI-reference such as /orders or https://shop.example/orders; required with --cloudevents"},
	{Name: "tracing", Kind: Bool, Default: "false", Help: "true: give each published event an OpenTelemetry span, a child of its traceparent header, exported over OTLP as the standard OTEL_* environment says (OTEL_TRACES_EXPORTER=otlp turns it on too; OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none keeps it off)"},
	{Name: "halt-linger", Kind: Duration, Default: "20s", Min: 0, Max: 8760 * hour, Help: "after a halt, keep serving /readyz (503, with the cause) and /metrics this long before exiting 1; 0s exits at once, SIGTERM ends it early"},
}, map[string]*Shape{"columns": Columns})

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
