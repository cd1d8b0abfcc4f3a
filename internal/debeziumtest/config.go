package debeziumtest

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Converter is a Kafka Connect converter setting for keys or values, named
// like the relay's --key-format and --value-format.
type Converter string

const (
	// DefaultConverter keeps what the worker (for a connector) or Connect
	// (for a worker: JsonConverter with schemas) sets.
	DefaultConverter Converter = ""
	// StringConverter is org.apache.kafka.connect.storage.StringConverter:
	// a string's UTF-8 bytes.
	StringConverter Converter = "string"
	// JSONConverter is org.apache.kafka.connect.json.JsonConverter with
	// schemas.enable=false: the bare JSON of the value.
	JSONConverter Converter = "json"
	// JSONSchemaConverter is JsonConverter with schemas.enable=true: a
	// {"schema":...,"payload":...} envelope.
	JSONSchemaConverter Converter = "json-schema"
)

// properties are the settings selecting c under prefix ("key.converter" or
// "value.converter"); none for DefaultConverter.
func (c Converter) properties(prefix string) ([][2]string, error) {
	switch c {
	case DefaultConverter:
		return nil, nil
	case StringConverter:
		return [][2]string{{prefix, "org.apache.kafka.connect.storage.StringConverter"}}, nil
	case JSONConverter, JSONSchemaConverter:
		return [][2]string{
			{prefix, "org.apache.kafka.connect.json.JsonConverter"},
			{prefix + ".schemas.enable", strconv.FormatBool(c == JSONSchemaConverter)},
		}, nil
	}
	return nil, fmt.Errorf("debeziumtest: unknown converter %q (want string, json or json-schema)", string(c))
}

// Outbox column names the Event Router is told, as in docs/outbox.sql.
const (
	ColumnID            = "id"
	ColumnAggregateID   = "aggregate_id"
	ColumnAggregateType = "aggregate_type"
	ColumnEventType     = "event_type"
	ColumnPayload       = "payload"
)

// Connector is one Debezium PostgreSQL connector with the Outbox Event
// Router. The zero value of each field keeps the default its comment gives.
type Connector struct {
	// Name is the connector's name in Connect, which also keys its offsets
	// in the offsets file. Required.
	Name string
	// PGPort and Database locate PostgreSQL on 127.0.0.1, as user postgres
	// with trust authentication. Both required.
	PGPort   int
	Database string
	// Table is the outbox table, schema-qualified (default public.outbox).
	Table string
	// TopicPrefix is Debezium's topic.prefix, which names its internal
	// topics and its JMX metrics; the Event Router's routing does not use
	// it (default: Name). Connectors of one worker need distinct prefixes,
	// or each waits a minute for the other's metrics name.
	TopicPrefix string
	// Slot is slot.name (Debezium's default: debezium). The connector
	// creates it when missing.
	Slot string
	// Publication is publication.name (Debezium's default:
	// dbz_publication).
	Publication string
	// PublicationAutocreate is publication.autocreate.mode: disabled,
	// all_tables or filtered (default filtered: a publication of Table
	// alone, created when missing; Debezium's own default is all_tables).
	PublicationAutocreate string
	// SnapshotMode is snapshot.mode (default no_data: stream only what is
	// committed after the slot exists).
	SnapshotMode string
	// KeyConverter and ValueConverter override the worker's converters for
	// this connector (default: the worker's).
	KeyConverter, ValueConverter Converter
	// ExpandJSONPayload sets the router's table.expand.json.payload=true:
	// a jsonb payload becomes a structure instead of a JSON string.
	ExpandJSONPayload bool
	// TopicReplacement is route.topic.replacement (Debezium's default:
	// outbox.event.${routedByValue}).
	TopicReplacement string
	// AdditionalPlacement is table.fields.additional.placement, a comma
	// list of column:header[:alias] or column:envelope[:alias] (default
	// none).
	AdditionalPlacement string
	// EventTimestampField is table.field.event.timestamp: the column whose
	// value becomes the record timestamp (default none: the time Debezium
	// processed the change).
	EventTimestampField string
	// TombstoneOnEmptyPayload is route.tombstone.on.empty.payload: a NULL
	// payload becomes a record with a null value.
	TombstoneOnEmptyPayload bool
	// Extra are further connector properties; each replaces a property of
	// the same key or is added at the end.
	Extra [][2]string
}

// Properties returns the connector's configuration in order.
func (c Connector) Properties() ([][2]string, error) {
	if c.Name == "" || c.PGPort == 0 || c.Database == "" {
		return nil, fmt.Errorf("debeziumtest: a connector needs Name, PGPort and Database")
	}
	or := func(v, def string) string {
		if v == "" {
			return def
		}
		return v
	}
	props := [][2]string{
		{"name", c.Name},
		{"connector.class", "io.debezium.connector.postgresql.PostgresConnector"},
		{"tasks.max", "1"},
		{"database.hostname", "127.0.0.1"},
		{"database.port", strconv.Itoa(c.PGPort)},
		{"database.user", "postgres"},
		{"database.password", "postgres"}, // trust authentication: not checked
		{"database.dbname", c.Database},
		{"topic.prefix", or(c.TopicPrefix, c.Name)},
		{"plugin.name", "pgoutput"},
		{"slot.name", or(c.Slot, "debezium")},
		{"publication.name", or(c.Publication, "dbz_publication")},
		{"publication.autocreate.mode", or(c.PublicationAutocreate, "filtered")},
		{"snapshot.mode", or(c.SnapshotMode, "no_data")},
		{"table.include.list", or(c.Table, "public.outbox")},
		{"transforms", "outbox"},
		{"transforms.outbox.type", "io.debezium.transforms.outbox.EventRouter"},
		{"transforms.outbox.table.field.event.id", ColumnID},
		{"transforms.outbox.table.field.event.key", ColumnAggregateID},
		{"transforms.outbox.table.field.event.type", ColumnEventType},
		{"transforms.outbox.table.field.event.payload", ColumnPayload},
		{"transforms.outbox.route.by.field", ColumnAggregateType},
	}
	for _, conv := range []struct {
		c      Converter
		prefix string
	}{{c.KeyConverter, "key.converter"}, {c.ValueConverter, "value.converter"}} {
		kvs, err := conv.c.properties(conv.prefix)
		if err != nil {
			return nil, err
		}
		props = append(props, kvs...)
	}
	opt := func(key, value string) {
		if value != "" {
			props = append(props, [2]string{"transforms.outbox." + key, value})
		}
	}
	if c.ExpandJSONPayload {
		opt("table.expand.json.payload", "true")
	}
	opt("route.topic.replacement", c.TopicReplacement)
	opt("table.fields.additional.placement", c.AdditionalPlacement)
	opt("table.field.event.timestamp", c.EventTimestampField)
	if c.TombstoneOnEmptyPayload {
		opt("route.tombstone.on.empty.payload", "true")
	}
	return merge(props, c.Extra), nil
}

// merge replaces the properties of props that extra names and appends the
// rest of extra.
func merge(props, extra [][2]string) [][2]string {
next:
	for _, kv := range extra {
		for i := range props {
			if props[i][0] == kv[0] {
				props[i][1] = kv[1]
				continue next
			}
		}
		props = append(props, kv)
	}
	return props
}

// WorkerOptions configure a Connect standalone worker.
type WorkerOptions struct {
	// Libs is the jar directory (default: LibsDir("")).
	Libs string
	// ExtraLibs are further jar directories put on the class path after
	// Libs, e.g. ApicurioConverterDir's (default none).
	ExtraLibs []string
	// Broker is Kafka's bootstrap address. Required.
	Broker string
	// Dir holds the worker's configuration, log and offsets file; it is
	// created if missing and kept by Close, so a worker started again on
	// it resumes. "" uses a new temporary directory that Close removes.
	Dir string
	// KeyConverter and ValueConverter are the worker's converters, which
	// connectors may override (default: JSONConverter for both).
	KeyConverter, ValueConverter Converter
	// OffsetFlushInterval is offset.flush.interval.ms: how often Connect
	// commits source offsets, which is when Debezium confirms LSNs to
	// PostgreSQL (default 1 s; Connect's own default is 60 s).
	OffsetFlushInterval time.Duration
	// JVMOptions come before Kafka's default JVM flags (default
	// -Xms128M -Xmx512M: the machine is shared).
	JVMOptions []string
	// LogLevel is log4j's root level (default warn).
	LogLevel string
	// Connectors are started with the worker, given on its command line
	// (default none: add them with AddConnector).
	Connectors []Connector
}

// workerProperties renders worker.properties for a REST API on restPort.
func (o WorkerOptions) workerProperties(dir string, restPort int) ([][2]string, error) {
	if o.Broker == "" {
		return nil, fmt.Errorf("debeziumtest: WorkerOptions.Broker is required")
	}
	flush := o.OffsetFlushInterval
	if flush == 0 {
		flush = time.Second
	}
	props := [][2]string{{"bootstrap.servers", o.Broker}}
	for _, conv := range []struct {
		c      Converter
		prefix string
	}{{o.KeyConverter, "key.converter"}, {o.ValueConverter, "value.converter"}} {
		c := conv.c
		if c == DefaultConverter {
			c = JSONConverter
		}
		kvs, err := c.properties(conv.prefix)
		if err != nil {
			return nil, err
		}
		props = append(props, kvs...)
	}
	return append(props,
		[2]string{"offset.storage.file.filename", dir + "/offsets.dat"},
		[2]string{"offset.flush.interval.ms", strconv.FormatInt(flush.Milliseconds(), 10)},
		[2]string{"listeners", "http://127.0.0.1:" + strconv.Itoa(restPort)},
	), nil
}

// log4jProperties renders log4j2.properties: the console at level.
func log4jProperties(level string) [][2]string {
	if level == "" {
		level = "warn"
	}
	return [][2]string{
		{"status", "warn"},
		{"appender.out.type", "Console"},
		{"appender.out.name", "out"},
		{"appender.out.layout.type", "PatternLayout"},
		{"appender.out.layout.pattern", "[%d] %p %m (%c)%n"},
		{"rootLogger.level", level},
		{"rootLogger.appenderRef.out.ref", "out"},
	}
}

// render writes properties as key=value lines.
func render(kvs [][2]string) string {
	var b strings.Builder
	for _, kv := range kvs {
		fmt.Fprintf(&b, "%s=%s\n", kv[0], kv[1])
	}
	return b.String()
}
