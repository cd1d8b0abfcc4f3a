package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cdc-relay/cdc-relay/decoder"
	"github.com/cdc-relay/cdc-relay/internal/config"
	recordpkg "github.com/cdc-relay/cdc-relay/record"
	relaypkg "github.com/cdc-relay/cdc-relay/relay"
	"github.com/cdc-relay/cdc-relay/replication"
	"github.com/cdc-relay/cdc-relay/router"
	"github.com/cdc-relay/cdc-relay/schemaregistry"
)

// Config is the relay's configuration (relaypkg.Config); buildConfig makes it.
type Config = relaypkg.Config

// ConfigError is a bad or missing setting; the process exits with code 2.
type ConfigError = relaypkg.ConfigError

// EnvName is the environment variable for a flag.
func EnvName(flagName string) string { return config.EnvName(flagName) }

func cfgErr(key, format string, args ...any) error { return relaypkg.ConfigErr(key, format, args...) }

// readYAML reads and checks a --config file against the settings.
func readYAML(path string) (*config.File, error) { return config.Relay.ReadFile(path) }

// loadValues resolves cmd's settings and action flags. When it cannot go
// on, ok is false and code is the exit code: 0 after --help (printed to
// stdout), 2 after a bad setting, which it reports in one line with
// secrets redacted. Warnings go to stderr.
func loadValues(cmd *config.Command, args []string, getenv func(string) string, stdout, stderr io.Writer) (v *config.Values, code int, ok bool) {
	log := slog.New(slog.NewTextHandler(stderr, nil))
	warnUnknownEnv(cmd.Name, getenv, log)
	v, err := config.Load(cmd, args, getenv, stdout, log)
	if errors.Is(err, config.ErrHelp) {
		return nil, exitOK, false
	}
	if err != nil {
		fmt.Fprintf(stderr, "cdc-relay: %s\n", Redact(err.Error()))
		return nil, exitConfig, false
	}
	return v, 0, true
}

// environ lists the process environment (os.Environ); getenv decides which
// of its names are set.
var environ = os.Environ

// warnUnknownEnv warns of each CDC_RELAY_* variable set in the environment
// that no setting reads (config.Registry.UnknownEnv): a typo would
// otherwise be ignored without a word. Every command that resolves
// settings calls it, before a bad setting can end the command.
func warnUnknownEnv(command string, getenv func(string) string, log *slog.Logger) {
	var names []string
	for _, kv := range environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "CDC_RELAY_") && getenv(name) != "" {
			names = append(names, name)
		}
	}
	config.Relay.WarnUnknownEnv(names, command, log)
}

// commandConfig loads the configuration of run, check, replay or slot
// recreate: cmd takes every setting of run. ok and code are loadValues'.
func commandConfig(cmd *config.Command, args []string, getenv func(string) string, stdout, stderr io.Writer) (cfg *Config, v *config.Values, code int, ok bool) {
	v, code, ok = loadValues(cmd, args, getenv, stdout, stderr)
	if !ok {
		return nil, nil, code, false
	}
	cfg, err := buildConfig(v)
	if err != nil {
		fmt.Fprintf(stderr, "cdc-relay: %s\n", Redact(err.Error()))
		return nil, nil, exitConfig, false
	}
	return cfg, v, 0, true
}

// LoadConfig resolves the configuration of cdc-relay run from args, the
// environment and the YAML file. --help and warnings go to out.
func LoadConfig(args []string, getenv func(string) string, out io.Writer) (*Config, error) {
	v, err := config.Load(config.Run, args, getenv, out, slog.New(slog.NewTextHandler(out, nil)))
	if err != nil {
		return nil, err
	}
	return buildConfig(v)
}

// identName is a PostgreSQL identifier, as --table's schema and table.
var identName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]{0,62}$`)

// buildConfig turns validated values into a Config, with the checks that
// need another package (pgconn, router, record) or several settings.
func buildConfig(v *config.Values) (*Config, error) {
	c := &Config{
		PGURL:             v.String("pg-url"),
		Slot:              v.String("slot"),
		Publication:       v.String("publication"),
		TopicTemplate:     v.String("topic-template"),
		SchemaRegistryURL: v.String("schema-registry-url"),
		SchemasDir:        v.String("schemas-dir"),
		DLQTopic:          v.String("dlq-topic"),
		OnInvalid:         v.String("on-invalid"),
		MetricsAddr:       v.String("metrics-addr"),
		LogFormat:         v.String("log-format"),
		LogLevel:          v.String("log-level"),
		KafkaCompression:  v.String("kafka-compression"),
		CheckpointTopic:   v.String("checkpoint-topic"),
		RelayID:           v.String("relay-id"),
		KafkaBrokers:      v.List("kafka-brokers"),
		MessagePrefix:     v.String("message-prefix"),
		MessagePrefixSet:  v.Source("message-prefix") != config.FromDefault,
		MaxInFlightEvents: int(v.Int("max-in-flight-events")),
		MaxInFlightBytes:  v.Int("max-in-flight-bytes"),
		MaxRecordBytes:    int(v.Int("max-record-bytes")),
		KafkaBatchBytes:   int(v.Int("kafka-batch-bytes")),
		StatusInterval:    v.Duration("status-interval"),
		ReadTimeout:       v.Duration("read-timeout"),
		ShutdownTimeout:   v.Duration("shutdown-timeout"),
		HaltLinger:        v.Duration("halt-linger"),
		KafkaLinger:       v.Duration("kafka-linger"),
		SlotPollInterval:  v.Duration("slot-poll-interval"),
		RecreateLostSlot:  v.Bool("recreate-lost-slot"),
		AllowExtraTables:  v.Bool("allow-extra-tables"),
		InitialReplay:     v.Bool("initial-replay"),
		Tracing:           v.Bool("tracing"),
		ExactlyOnce:       v.String("delivery") == "exactly-once",
		TransactionalID:   v.String("transactional-id"),
		TxnInterval:       v.Duration("txn-interval"),
		TxnMaxEvents:      int(v.Int("txn-max-events")),
		TxnTimeout:        v.Duration("txn-timeout"),
		SlotFailover:      replication.FailoverMode(v.String("slot-failover")),
		RegistryCAFile:    v.String("schema-registry-ca-file"),
	}
	if _, err := pgconn.ParseConfig(c.PGURL); err != nil {
		return nil, cfgErr("pg-url", "not a valid libpq URL or DSN (%s): use e.g. postgres://user:pass@host:5432/db", redactErr(err))
	}
	if err := outboxTables(c, v.String("table"), v.File()); err != nil {
		return nil, err
	}
	if len(c.Tables) == 0 && c.MessagePrefix == "" {
		return nil, cfgErr("table", "is empty and so is --message-prefix: nothing would be published; set --table, or keep --message-prefix (default outbox) for a table-less outbox")
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
	st, err := schemaregistry.ParseStrategy(v.String("subject-strategy"))
	if err != nil {
		return nil, cfgErr("subject-strategy", "%q is not a strategy: use topic, record or topic_record", v.String("subject-strategy"))
	}
	c.SubjectStrategy = st
	if err := router.ValidTopic(c.DLQTopic); err != nil {
		return nil, cfgErr("dlq-topic", "%v", err)
	}
	if err := kafkaSecurity(c, v); err != nil {
		return nil, err
	}
	if c.RegistryCAFile != "" {
		if _, err := os.Stat(c.RegistryCAFile); err != nil {
			return nil, cfgErr("schema-registry-ca-file", "%v", err)
		}
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
func recordFormats(c *Config, v *config.Values) error {
	var err error
	if c.KeyFormat, err = recordpkg.ParseKeyFormat(v.String("key-format")); err != nil {
		return cfgErr("key-format", "%v", err)
	}
	if c.ValueFormat, err = recordpkg.ParseValueFormat(v.String("value-format")); err != nil {
		return cfgErr("value-format", "%v", err)
	}
	required := func(name, why string) error {
		if v.String(name) == "" {
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
	if c.BuiltinHeaders, err = router.ParseBuiltin(v.String("builtin-headers")); err != nil {
		return cfgErr("builtin-headers", "%v", err)
	}
	if c.HeaderColumns, err = recordpkg.ParseHeaderColumns(v.String("header-columns"), c.BuiltinHeaders); err != nil {
		return cfgErr("header-columns", "%v", err)
	}
	c.TimestampColumn = v.String("timestamp-column")
	c.Tombstones = v.Bool("tombstone-on-null-payload")
	c.UnknownFieldsName = v.String("unknown-fields")
	if c.UnknownFields, err = recordpkg.ParseUnknownFields(c.UnknownFieldsName); err != nil {
		return cfgErr("unknown-fields", "%v", err)
	}
	return nil
}

// outboxTables resolves --table (a comma-separated list) and the column
// names of each table: the defaults, then YAML columns:, then the table's
// own columns: in a YAML table entry.
func outboxTables(c *Config, list string, y *config.File) error {
	base := decoder.DefaultColumns()
	if err := mapColumns(&base, y.Section("columns"), "columns"); err != nil {
		return err
	}
	perTable := map[string]map[string]string{}
	for _, e := range y.Entries("table") {
		perTable[e.Name] = e.Maps["columns"]
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
func cloudEvents(c *Config, v *config.Values) error {
	c.CloudEvents = v.Bool("cloudevents")
	c.CloudEventsSource = v.String("cloudevents-source")
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

// Redact hides passwords in URLs and DSNs before they are logged.
func Redact(s string) string { return relaypkg.Redact(s) }

func redactErr(err error) string { return relaypkg.RedactErr(err) }
