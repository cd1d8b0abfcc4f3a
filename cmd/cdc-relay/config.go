package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"gopkg.in/yaml.v3"

	"github.com/cdc-relay/cdc-relay/decoder"
	recordpkg "github.com/cdc-relay/cdc-relay/record"
	"github.com/cdc-relay/cdc-relay/replication"
	"github.com/cdc-relay/cdc-relay/router"
	"github.com/cdc-relay/cdc-relay/schemaregistry"
)

// Config is everything `cdc-relay run` needs. Every field is a flag, an env
// var CDC_RELAY_<FLAG_IN_UPPER_SNAKE> and a key of the --config YAML file;
// precedence is flag > env > YAML > default.
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
	StatusInterval    time.Duration
	ReadTimeout       time.Duration
	ShutdownTimeout   time.Duration
	HaltLinger        time.Duration
	KafkaLinger       time.Duration
	RecreateLostSlot  bool
	// AllowExtraTables accepts a publication that publishes tables besides
	// the outbox tables (FOR ALL TABLES, TABLES IN SCHEMA, or more listed);
	// their rows are skipped and counted. Default false: exit 2.
	AllowExtraTables  bool
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
	// CheckpointTopic is the compacted topic the relay keeps its checkpoint in.
	CheckpointTopic string
	// RelayID keys the checkpoint; "" means <system identifier>/<database>/<slot>.
	RelayID string
}

// setting is one configuration key: its flag name, default and help.
type setting struct {
	name     string
	def      string
	help     string
	required bool
}

// settings lists every key, in the order `cdc-relay run -h` prints them.
var settings = []setting{
	{"config", "", "YAML file with the same keys as the flags (and columns:)", false},
	{"pg-url", "", "libpq URL or DSN of the database; the relay adds replication=database for the stream", true},
	{"slot", "cdc_relay", "logical replication slot (pgoutput), created if missing", false},
	{"recreate-lost-slot", "false", "true: standing consent to every future gap: drop and recreate an invalidated slot (wal_status lost, or conflicting) instead of halting, record the gap in the checkpoint topic and log it at ERROR; prefer cdc-relay slot recreate --accept-gap, which asks each time", false},
	{"checkpoint-topic", "cdc-relay.checkpoints", "compacted Kafka topic where the relay remembers the LSN it confirmed, so that a lost slot is never taken for a first start; created (cleanup.policy=compact) when missing", false},
	{"relay-id", "", "key of this relay's checkpoint; default <system identifier>/<database>/<slot>, unique across clusters sharing one Kafka and unchanged by a failover", false},
	{"slot-failover", "auto", "make the slot a failover slot, which a standby with sync_replication_slots = on keeps, so that it survives a promotion: auto (on for PostgreSQL 17+), true (needs 17+) or false", false},
	{"slot-poll-interval", "15s", "how often pg_replication_slots is read for the cdc_relay_slot_* metrics (safe WAL size, wal_status, time to exhaustion, spill statistics)", false},
	{"publication", "cdc_relay", "publication, created if missing", false},
	{"allow-extra-tables", "false", "true: accept a publication that publishes other tables besides the outbox tables (FOR ALL TABLES, TABLES IN SCHEMA, or more tables listed, as Debezium's); their rows are skipped and counted in cdc_relay_skipped_rows_total. false: such a publication is exit 2", false},
	{"table", "public.outbox", "the outbox table; repeat the flag for several (env and YAML: a list), all in one publication; --table '' for a table-less outbox (logical messages only)", false},
	{"message-prefix", "outbox", "logical decoding messages (pg_logical_emit_message, PostgreSQL 14+) with this prefix are outbox events too; empty: none", false},
	{"kafka-brokers", "", "comma-separated Kafka bootstrap list", true},
	{"kafka-tls", "false", "true: connect to the brokers over TLS", false},
	{"kafka-tls-ca-file", "", "PEM CA bundle that signs the brokers' certificates (default: the system roots)", false},
	{"kafka-tls-cert-file", "", "PEM client certificate, for brokers that require mutual TLS", false},
	{"kafka-tls-key-file", "", "PEM key of the client certificate", false},
	{"kafka-sasl-mechanism", "none", "SASL mechanism: none, plain, scram-sha-256 or scram-sha-512", false},
	{"kafka-sasl-username", "", "SASL user name", false},
	{"kafka-sasl-password", "", "SASL password; prefer CDC_RELAY_KAFKA_SASL_PASSWORD or CDC_RELAY_KAFKA_SASL_PASSWORD_FILE", false},
	{"schema-registry-ca-file", "", "PEM CA bundle for an https registry (default: the system roots); basic auth goes in the URL, http://user:pass@host", false},
	{"topic-template", router.DefaultTemplate, "topic name; placeholders {aggregate_type} and {event_type}", false},
	{"schema-registry-url", "", "Confluent-compatible schema registry (required with --value-format avro or --key-format avro)", false},
	{"schemas-dir", "", "directory of .avsc files, one per event_type (required with --value-format avro)", false},
	{"subject-strategy", "topic_record", "subject name strategy: topic, record or topic_record", false},
	{"dlq-topic", "outbox.dlq", "dead-letter topic", false},
	{"on-invalid", "dlq", "what to do with an invalid event: dlq or halt", false},
	{"metrics-addr", ":9187", "serves /metrics, /healthz and /readyz", false},
	{"log-format", "text", "log format: text or json", false},
	{"log-level", "info", "log level: debug, info, warn or error", false},
	{"max-in-flight-events", "50000", "events read from the slot and not yet acknowledged by Kafka", false},
	{"max-in-flight-bytes", "67108864", "bytes of those events", false},
	{"max-record-bytes", "1000000", "largest Kafka record (key+value+headers); larger events are invalid", false},
	{"kafka-batch-bytes", "1048576", "largest produce request per partition; keep it at most the broker's message.max.bytes", false},
	{"kafka-linger", "2ms", "how long a produce request waits for more events when they trickle in one at a time (Java linger.ms); events that arrive during a request always go in the next one", false},
	{"kafka-compression", "none", "record batch compression: none, gzip, snappy, lz4 or zstd", false},
	{"status-interval", "1s", "how often the confirmed LSN is reported to PostgreSQL (at most 10s)", false},
	{"read-timeout", "60s", "a stream silent this long is treated as dead and reconnected (raised to wal_sender_timeout/2 + 5s if that is longer)", false},
	{"shutdown-timeout", "30s", "how long shutdown waits for Kafka to acknowledge in-flight events", false},
	{"key-format", "string", "Kafka key bytes, as Kafka Connect's key converter writes them: string (StringConverter), json (JsonConverter), json-schema (JsonConverter with schemas) or avro (AvroConverter, subject <topic>-key)", false},
	{"value-format", "avro", "Kafka value: avro (Confluent wire format, the event type's schema) or json (the payload's compact JSON, as Debezium's outbox router with table.expand.json.payload=true)", false},
	{"builtin-headers", "id,event_type,aggregate_type", "which of the headers id, event_type and aggregate_type are written (Debezium writes id alone); empty for none", false},
	{"header-columns", "", "more outbox columns copied into headers as text, col[:header],... (uuid lowercase, integers decimal, timestamptz RFC 3339, timestamp epoch microseconds: Debezium's forms)", false},
	{"timestamp-column", "", "outbox column the Kafka record timestamp comes from (timestamptz, timestamp as UTC, or bigint epoch milliseconds; NULL falls back); default the transaction's commit time", false},
	{"tombstone-on-null-payload", "false", "true: a NULL payload becomes a record with a null value and the aggregate key (a tombstone, for compacted topics) instead of an invalid event", false},
	{"cloudevents", "false", "true: add the CloudEvents Kafka binary-mode headers ce_specversion, ce_id, ce_source, ce_type, ce_subject, ce_time and content-type", false},
	{"cloudevents-source", "", "the CloudEvents source attribute, a URI-reference such as /orders or https://shop.example/orders; required with --cloudevents", false},
	{"halt-linger", "20s", "after a halt, keep serving /readyz (503, with the cause) and /metrics this long before exiting 1; 0s exits at once, SIGTERM ends it early", false},
}

// EnvName is the environment variable for a flag.
func EnvName(flagName string) string {
	return "CDC_RELAY_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// ConfigError is a bad or missing setting; the process exits with code 2.
type ConfigError struct {
	Key string
	Msg string
}

func (e *ConfigError) Error() string {
	if e.Key == "" {
		return e.Msg
	}
	return fmt.Sprintf("--%s: %s", e.Key, e.Msg)
}

func cfgErr(key, format string, args ...any) error {
	return &ConfigError{Key: key, Msg: fmt.Sprintf(format, args...)}
}

// yamlFile is the --config file: the flag keys, plus columns.
type yamlFile struct {
	values  map[string]string
	columns map[string]string
	// tableColumns maps a table (as written) to its own column names,
	// from a table list entry {name: ..., columns: {...}}.
	tableColumns map[string]map[string]string
}

// readTables reads the YAML table key: a name, a list of names, or a list
// whose entries may be {name: schema.table, columns: {...}}.
func (y *yamlFile) readTables(path string, node yaml.Node) error {
	if node.Kind == yaml.ScalarNode {
		y.values["table"] = node.Value
		return nil
	}
	if node.Kind != yaml.SequenceNode {
		return cfgErr("table", "in %s: want a table name or a list of them", path)
	}
	var names []string
	for _, item := range node.Content {
		switch item.Kind {
		case yaml.ScalarNode:
			names = append(names, item.Value)
		case yaml.MappingNode:
			var t struct {
				Name    string            `yaml:"name"`
				Columns map[string]string `yaml:"columns"`
			}
			if err := item.Decode(&t); err != nil || t.Name == "" {
				return cfgErr("table", "in %s: a table entry is a name or {name: schema.table, columns: {...}}", path)
			}
			names = append(names, t.Name)
			if y.tableColumns == nil {
				y.tableColumns = map[string]map[string]string{}
			}
			y.tableColumns[t.Name] = t.Columns
		default:
			return cfgErr("table", "in %s: a table entry is a name or {name: schema.table, columns: {...}}", path)
		}
	}
	y.values["table"] = strings.Join(names, ",")
	return nil
}

func readYAML(path string) (*yamlFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, cfgErr("config", "cannot read %s: %v", path, err)
	}
	var raw map[string]yaml.Node
	if err := yaml.Unmarshal(b, &raw); err != nil {
		return nil, cfgErr("config", "%s is not valid YAML: %v", path, err)
	}
	known := map[string]bool{}
	for _, s := range settings {
		known[s.name] = true
	}
	y := &yamlFile{values: map[string]string{}}
	for k, node := range raw {
		key := strings.ReplaceAll(k, "_", "-")
		switch {
		case key == "columns":
			if err := node.Decode(&y.columns); err != nil {
				return nil, cfgErr("config", "%s: columns must map names to column names: %v", path, err)
			}
		case key == "table":
			if err := y.readTables(path, node); err != nil {
				return nil, err
			}
		case key == "config" || !known[key]:
			return nil, cfgErr("config", "%s: unknown key %q; keys are the flag names (see cdc-relay run -h) and columns", path, k)
		case node.Kind == yaml.SequenceNode:
			var list []string
			if err := node.Decode(&list); err != nil {
				return nil, cfgErr(key, "in %s: %v", path, err)
			}
			y.values[key] = strings.Join(list, ",")
		case node.Kind == yaml.ScalarNode:
			y.values[key] = node.Value
		default:
			return nil, cfgErr(key, "in %s: want a scalar value", path)
		}
	}
	return y, nil
}

// commandConfig loads the configuration of run or check. When it cannot go
// on, ok is false and code is the exit code: 0 after -h, 2 after a bad
// setting, which it reports in one line with secrets redacted.
func commandConfig(args []string, getenv func(string) string, stderr io.Writer) (cfg *Config, code int, ok bool) {
	cfg, err := LoadConfig(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil, exitOK, false
	}
	if err != nil {
		fmt.Fprintf(stderr, "cdc-relay: %s\n", Redact(err.Error()))
		return nil, exitConfig, false
	}
	return cfg, 0, true
}

// LoadConfig resolves the configuration from args, the environment and the
// YAML file. Usage output for -h goes to out.
func LoadConfig(args []string, getenv func(string) string, out io.Writer) (*Config, error) {
	fs := flag.NewFlagSet("cdc-relay run", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported in one line by the caller
	fs.Usage = func() {}
	vals := map[string]*string{}
	for _, s := range settings {
		help := s.help + " (env " + EnvName(s.name) + ")"
		if s.required {
			help += " (required)"
		}
		if s.name == "table" {
			// --table may be given several times.
			tables := &listValue{def: s.def}
			fs.Var(tables, s.name, help)
			vals[s.name] = &tables.joined
			continue
		}
		if isBoolSetting(s) {
			b := &boolValue{v: s.def}
			fs.Var(b, s.name, help)
			vals[s.name] = &b.v
			continue
		}
		vals[s.name] = fs.String(s.name, s.def, help)
	}
	if err := fs.Parse(joinBoolArgs(args)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(out, "Usage: cdc-relay run [flags]\n\nEvery flag also reads CDC_RELAY_<FLAG_IN_UPPER_SNAKE>; precedence is flag > env > --config YAML > default.")
			fs.SetOutput(out)
			fs.PrintDefaults()
			return nil, err
		}
		return nil, &ConfigError{Msg: err.Error()}
	}
	if fs.NArg() > 0 {
		return nil, &ConfigError{Msg: fmt.Sprintf("unexpected argument %q: settings are flags, e.g. --pg-url", fs.Arg(0))}
	}
	setByFlag := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { setByFlag[f.Name] = true })

	resolved := map[string]string{}
	source := map[string]string{}
	var fileErr error
	get := func(name string) string {
		if setByFlag[name] {
			source[name] = "flag"
			return *vals[name]
		}
		if v, ok := lookupEnv(getenv, EnvName(name)); ok {
			source[name] = "env"
			return v
		}
		// Secrets from files (Docker and Kubernetes secrets): CDC_RELAY_<NAME>_FILE.
		if path, ok := lookupEnv(getenv, EnvName(name)+"_FILE"); ok {
			source[name] = "env"
			b, err := os.ReadFile(path)
			if err != nil {
				fileErr = cfgErr(name, "cannot read %s_FILE %s: %v", EnvName(name), path, err)
				return ""
			}
			return strings.TrimRight(string(b), "\r\n")
		}
		return ""
	}
	configPath := get("config")
	var y *yamlFile
	if configPath != "" {
		var err error
		if y, err = readYAML(configPath); err != nil {
			return nil, err
		}
	}
	for _, s := range settings {
		v := get(s.name)
		if source[s.name] == "" {
			if yv, ok := y.get(s.name); ok {
				v = yv
			} else {
				v = s.def
			}
		}
		resolved[s.name] = strings.TrimSpace(v)
	}
	if fileErr != nil {
		return nil, fileErr
	}
	c, err := buildConfig(resolved, y)
	if err != nil {
		return nil, err
	}
	_, inYAML := y.get("message-prefix")
	c.MessagePrefixSet = source["message-prefix"] != "" || inYAML
	return c, nil
}

// isBoolSetting reports whether a setting is true or false.
func isBoolSetting(s setting) bool { return s.def == "true" || s.def == "false" }

// boolValue is a true/false flag: a bare --flag means true; --flag=false,
// and --flag true or --flag false (joinBoolArgs), work too. Any other value
// is kept for buildConfig to refuse, naming the flag.
type boolValue struct{ v string }

func (b *boolValue) String() string     { return b.v }
func (b *boolValue) Set(v string) error { b.v = v; return nil }
func (b *boolValue) IsBoolFlag() bool   { return true }

// joinBoolArgs turns "--flag value" of a true/false setting into
// "--flag=value": the flag package would take a bare boolean flag and leave
// the value as an argument. (The command takes no arguments, so a word
// after such a flag is its value; a wrong one is refused naming the flag.)
func joinBoolArgs(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		name := strings.TrimLeft(a, "-")
		if a != name && !strings.Contains(name, "=") && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			for _, s := range settings {
				if s.name == name && isBoolSetting(s) {
					a = a + "=" + args[i+1]
					i++
					break
				}
			}
		}
		out = append(out, a)
	}
	return out
}

// listValue is a flag that may be repeated; joined holds the values
// separated by commas, or the default until the flag is set.
type listValue struct {
	def    string
	joined string
	set    bool
}

func (l *listValue) String() string {
	if !l.set {
		return l.def
	}
	return l.joined
}

func (l *listValue) Set(v string) error {
	if l.set {
		l.joined += ","
	}
	l.joined += v
	l.set = true
	return nil
}

func lookupEnv(getenv func(string) string, name string) (string, bool) {
	v := getenv(name)
	return v, v != ""
}

func (y *yamlFile) get(name string) (string, bool) {
	if y == nil {
		return "", false
	}
	v, ok := y.values[name]
	return v, ok
}

var (
	slotName  = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)
	identName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]{0,62}$`)
	topicName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,249}$`)
)

func buildConfig(v map[string]string, y *yamlFile) (*Config, error) {
	for _, s := range settings {
		if s.required && v[s.name] == "" {
			return nil, cfgErr(s.name, "is required: set the flag, %s, or %s in --config", EnvName(s.name), s.name)
		}
	}
	c := &Config{
		PGURL:             v["pg-url"],
		Slot:              v["slot"],
		Publication:       v["publication"],
		TopicTemplate:     v["topic-template"],
		SchemaRegistryURL: v["schema-registry-url"],
		SchemasDir:        v["schemas-dir"],
		DLQTopic:          v["dlq-topic"],
		OnInvalid:         v["on-invalid"],
		MetricsAddr:       v["metrics-addr"],
		LogFormat:         v["log-format"],
		LogLevel:          v["log-level"],
		KafkaCompression:  v["kafka-compression"],
		CheckpointTopic:   v["checkpoint-topic"],
		RelayID:           v["relay-id"],
	}
	if c.CheckpointTopic == "" || !topicName.MatchString(c.CheckpointTopic) {
		return nil, cfgErr("checkpoint-topic", "%q is not a valid Kafka topic name: use 1-249 of a-z, A-Z, 0-9, '.', '_' and '-'", c.CheckpointTopic)
	}
	if _, err := pgconn.ParseConfig(c.PGURL); err != nil {
		return nil, cfgErr("pg-url", "not a valid libpq URL or DSN (%s): use e.g. postgres://user:pass@host:5432/db", redactErr(err))
	}
	if !slotName.MatchString(c.Slot) {
		return nil, cfgErr("slot", "%q is not a valid slot name: use 1-63 of a-z, 0-9 and _", c.Slot)
	}
	if !identName.MatchString(c.Publication) {
		return nil, cfgErr("publication", "%q is not a valid publication name: use letters, digits and _", c.Publication)
	}
	if err := outboxTables(c, v["table"], y); err != nil {
		return nil, err
	}
	c.MessagePrefix = v["message-prefix"]
	if len(c.Tables) == 0 && c.MessagePrefix == "" {
		return nil, cfgErr("table", "is empty and so is --message-prefix: nothing would be published; set --table, or keep --message-prefix (default outbox) for a table-less outbox")
	}
	for _, b := range strings.Split(v["kafka-brokers"], ",") {
		b = strings.TrimSpace(b)
		if b == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(b); err != nil {
			return nil, cfgErr("kafka-brokers", "%q is not host:port", b)
		}
		c.KafkaBrokers = append(c.KafkaBrokers, b)
	}
	if len(c.KafkaBrokers) == 0 {
		return nil, cfgErr("kafka-brokers", "is required: set host:port[,host:port]")
	}
	if _, err := router.New(c.TopicTemplate); err != nil {
		return nil, &ConfigError{Msg: err.Error()}
	}
	if err := recordFormats(c, v); err != nil {
		return nil, err
	}
	if err := cloudEvents(c, v); err != nil {
		return nil, err
	}
	if c.SchemaRegistryURL != "" && !strings.HasPrefix(c.SchemaRegistryURL, "http://") && !strings.HasPrefix(c.SchemaRegistryURL, "https://") {
		return nil, cfgErr("schema-registry-url", "%q must start with http:// or https://", c.SchemaRegistryURL)
	}
	st, err := schemaregistry.ParseStrategy(v["subject-strategy"])
	if err != nil {
		return nil, cfgErr("subject-strategy", "%q is not a strategy: use topic, record or topic_record", v["subject-strategy"])
	}
	c.SubjectStrategy = st
	if err := router.ValidTopic(c.DLQTopic); err != nil {
		return nil, cfgErr("dlq-topic", "%v", err)
	}
	if c.OnInvalid != "dlq" && c.OnInvalid != "halt" {
		return nil, cfgErr("on-invalid", "%q is not dlq or halt", c.OnInvalid)
	}
	if _, port, err := net.SplitHostPort(c.MetricsAddr); err != nil || port == "" {
		return nil, cfgErr("metrics-addr", "%q is not [host]:port, e.g. :9187", c.MetricsAddr)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		return nil, cfgErr("log-format", "%q is not text or json", c.LogFormat)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return nil, cfgErr("log-level", "%q is not debug, info, warn or error", c.LogLevel)
	}
	switch c.KafkaCompression {
	case "none", "gzip", "snappy", "lz4", "zstd":
	default:
		return nil, cfgErr("kafka-compression", "%q is not none, gzip, snappy, lz4 or zstd", c.KafkaCompression)
	}
	ints := []struct {
		key string
		dst *int
		min int
	}{
		{"max-in-flight-events", &c.MaxInFlightEvents, 1},
		{"max-record-bytes", &c.MaxRecordBytes, 1024},
		{"kafka-batch-bytes", &c.KafkaBatchBytes, 1024},
	}
	for _, it := range ints {
		n, err := strconv.Atoi(v[it.key])
		if err != nil || n < it.min {
			return nil, cfgErr(it.key, "%q is not a whole number of at least %d", v[it.key], it.min)
		}
		*it.dst = n
	}
	n, err := strconv.ParseInt(v["max-in-flight-bytes"], 10, 64)
	if err != nil || n < 1024 {
		return nil, cfgErr("max-in-flight-bytes", "%q is not a whole number of at least 1024", v["max-in-flight-bytes"])
	}
	c.MaxInFlightBytes = n
	durs := []struct {
		key      string
		dst      *time.Duration
		min, max time.Duration
	}{
		{"status-interval", &c.StatusInterval, 10 * time.Millisecond, 10 * time.Second},
		{"read-timeout", &c.ReadTimeout, time.Second, time.Hour},
		{"shutdown-timeout", &c.ShutdownTimeout, time.Second, time.Hour},
		{"halt-linger", &c.HaltLinger, 0, 8760 * time.Hour},
		{"kafka-linger", &c.KafkaLinger, 0, time.Second},
		{"slot-poll-interval", &c.SlotPollInterval, 100 * time.Millisecond, time.Hour},
	}
	for _, d := range durs {
		x, err := time.ParseDuration(v[d.key])
		if err != nil || x < d.min || x > d.max {
			return nil, cfgErr(d.key, "%q is not a duration between %s and %s, e.g. 1s", v[d.key], d.min, d.max)
		}
		*d.dst = x
	}
	if err := kafkaSecurity(c, v); err != nil {
		return nil, err
	}
	c.RegistryCAFile = v["schema-registry-ca-file"]
	if c.RegistryCAFile != "" {
		if _, err := os.Stat(c.RegistryCAFile); err != nil {
			return nil, cfgErr("schema-registry-ca-file", "%v", err)
		}
	}
	switch v["recreate-lost-slot"] {
	case "true":
		c.RecreateLostSlot = true
	case "false":
	default:
		return nil, cfgErr("recreate-lost-slot", "%q is not true or false", v["recreate-lost-slot"])
	}
	switch v["allow-extra-tables"] {
	case "true":
		c.AllowExtraTables = true
	case "false":
	default:
		return nil, cfgErr("allow-extra-tables", "%q is not true or false", v["allow-extra-tables"])
	}
	switch m := replication.FailoverMode(v["slot-failover"]); m {
	case replication.FailoverAuto, replication.FailoverOn, replication.FailoverOff:
		c.SlotFailover = m
	default:
		return nil, cfgErr("slot-failover", "%q is not auto, true or false", v["slot-failover"])
	}
	if c.ReadTimeout < 3*c.StatusInterval {
		return nil, cfgErr("read-timeout", "%s must be at least 3 × --status-interval (%s): the server answers every status update", c.ReadTimeout, c.StatusInterval)
	}
	if c.MaxRecordBytes > c.KafkaBatchBytes {
		return nil, cfgErr("max-record-bytes", "%d is larger than --kafka-batch-bytes %d: a record must fit in one produce request", c.MaxRecordBytes, c.KafkaBatchBytes)
	}
	return c, nil
}

// recordFormats resolves the settings of the row → record step: key and
// value formats, headers, timestamps and tombstones, and which of the
// registry settings they require.
func recordFormats(c *Config, v map[string]string) error {
	var err error
	if c.KeyFormat, err = recordpkg.ParseKeyFormat(v["key-format"]); err != nil {
		return cfgErr("key-format", "%v", err)
	}
	if c.ValueFormat, err = recordpkg.ParseValueFormat(v["value-format"]); err != nil {
		return cfgErr("value-format", "%v", err)
	}
	required := func(name, why string) error {
		if v[name] == "" {
			return cfgErr(name, "is required with %s: set the flag, %s, or %s in --config", why, EnvName(name), name)
		}
		return nil
	}
	if c.ValueFormat == recordpkg.ValueAvro {
		for _, name := range []string{"schema-registry-url", "schemas-dir"} {
			if err := required(name, "--value-format avro (the default)"); err != nil {
				return err
			}
		}
	}
	if c.KeyFormat == recordpkg.KeyAvro {
		if err := required("schema-registry-url", "--key-format avro"); err != nil {
			return err
		}
	}
	if c.BuiltinHeaders, err = router.ParseBuiltin(v["builtin-headers"]); err != nil {
		return cfgErr("builtin-headers", "%v", err)
	}
	if c.HeaderColumns, err = recordpkg.ParseHeaderColumns(v["header-columns"], c.BuiltinHeaders); err != nil {
		return cfgErr("header-columns", "%v", err)
	}
	c.TimestampColumn = v["timestamp-column"]
	switch v["tombstone-on-null-payload"] {
	case "true":
		c.Tombstones = true
	case "false":
	default:
		return cfgErr("tombstone-on-null-payload", "%q is not true or false", v["tombstone-on-null-payload"])
	}
	return nil
}

// outboxTables resolves --table (a comma-separated list) and the column
// names of each table: the defaults, then YAML columns:, then the table's
// own columns: in a YAML table entry.
func outboxTables(c *Config, list string, y *yamlFile) error {
	base := decoder.DefaultColumns()
	var perTable map[string]map[string]string
	if y != nil {
		if err := mapColumns(&base, y.columns, "columns"); err != nil {
			return err
		}
		perTable = y.tableColumns
	}
	seen := map[string]string{}
	for _, raw := range strings.Split(list, ",") {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		schema, table := splitTable(raw)
		if !identName.MatchString(schema) || !identName.MatchString(table) {
			return cfgErr("table", "%q is not schema.table: use e.g. public.outbox", raw)
		}
		name := schema + "." + table
		if first, dup := seen[name]; dup {
			return cfgErr("table", "%q and %q are the same table %s: give each outbox table once", first, raw, name)
		}
		seen[name] = raw
		cols := base
		if err := mapColumns(&cols, perTable[raw], "table "+raw+" columns"); err != nil {
			return err
		}
		c.Tables = append(c.Tables, decoder.Table{Name: name, Columns: cols})
	}
	if c.Tables == nil {
		c.Tables = []decoder.Table{} // a table-less outbox: logical messages only
	}
	return nil
}

// mapColumns applies a YAML column mapping (field: column name) to cols.
func mapColumns(cols *decoder.Columns, m map[string]string, where string) error {
	for k, name := range m {
		dst := columnField(cols, k)
		if dst == nil {
			return cfgErr("config", "%s: unknown column %q: use id, aggregate_type, aggregate_id, event_type, payload, headers or created_at", where, k)
		}
		if name == "" {
			return cfgErr("config", "%s.%s is empty", where, k)
		}
		*dst = name
	}
	return nil
}

// cloudEvents resolves --cloudevents and --cloudevents-source.
func cloudEvents(c *Config, v map[string]string) error {
	switch v["cloudevents"] {
	case "true":
		c.CloudEvents = true
	case "false":
	default:
		return cfgErr("cloudevents", "%q is not true or false", v["cloudevents"])
	}
	c.CloudEventsSource = v["cloudevents-source"]
	if !c.CloudEvents {
		return nil
	}
	src := c.CloudEventsSource
	if src == "" {
		return cfgErr("cloudevents-source", "is required with --cloudevents: set the source attribute, a URI-reference such as /orders or https://shop.example/orders")
	}
	if strings.ContainsFunc(src, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return cfgErr("cloudevents-source", "%q is not a URI-reference: it contains a space or control character; use e.g. /orders or https://shop.example/orders", src)
	}
	if _, err := url.Parse(src); err != nil {
		return cfgErr("cloudevents-source", "%q is not a URI-reference (%v): use e.g. /orders or https://shop.example/orders", src, err)
	}
	return nil
}

func columnField(c *decoder.Columns, key string) *string {
	switch key {
	case "id":
		return &c.ID
	case "aggregate_type":
		return &c.AggregateType
	case "aggregate_id":
		return &c.AggregateID
	case "event_type":
		return &c.EventType
	case "payload":
		return &c.Payload
	case "headers":
		return &c.Headers
	case "created_at":
		return &c.CreatedAt
	}
	return nil
}

func splitTable(t string) (schema, table string) {
	if i := strings.IndexByte(t, '.'); i >= 0 {
		return t[:i], t[i+1:]
	}
	return "public", t
}

// passwordInURL matches the password part of a URL's userinfo.
var passwordInURL = regexp.MustCompile(`(://[^:/@\s]*:)[^@\s]*@`)

// passwordInDSN matches password=... in a keyword/value DSN.
var passwordInDSN = regexp.MustCompile(`(password\s*=\s*)('[^']*'|\S+)`)

// Redact hides passwords in URLs and DSNs before they are logged.
func Redact(s string) string {
	s = passwordInURL.ReplaceAllString(s, "${1}xxxxx@")
	return passwordInDSN.ReplaceAllString(s, "${1}xxxxx")
}

func redactErr(err error) string { return Redact(err.Error()) }
