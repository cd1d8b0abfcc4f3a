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
		PGURL:             config.PGURL.From(v),
		Slot:              config.Slot.From(v),
		Publication:       config.Publication.From(v),
		TopicTemplate:     config.TopicTemplate.From(v),
		SchemaRegistryURL: config.SchemaRegistryURL.From(v),
		SchemasDir:        config.SchemasDir.From(v),
		DLQTopic:          config.DLQTopic.From(v),
		OnInvalid:         config.OnInvalid.From(v),
		MetricsAddr:       config.MetricsAddr.From(v),
		LogFormat:         config.LogFormat.From(v),
		LogLevel:          config.LogLevel.From(v),
		KafkaCompression:  config.KafkaCompression.From(v),
		CheckpointTopic:   config.CheckpointTopic.From(v),
		RelayID:           config.RelayID.From(v),
		KafkaBrokers:      config.KafkaBrokers.Items(v),
		MessagePrefix:     config.MessagePrefix.From(v),
		MessagePrefixSet:  config.MessagePrefix.SourceIn(v) != config.FromDefault,
		MaxInFlightEvents: int(config.MaxInFlightEvents.From(v)),
		MaxInFlightBytes:  config.MaxInFlightBytes.From(v),
		MaxRecordBytes:    int(config.MaxRecordBytes.From(v)),
		KafkaBatchBytes:   int(config.KafkaBatchBytes.From(v)),
		StatusInterval:    config.StatusInterval.From(v),
		ReadTimeout:       config.ReadTimeout.From(v),
		ShutdownTimeout:   config.ShutdownTimeout.From(v),
		HaltLinger:        config.HaltLinger.From(v),
		KafkaLinger:       config.KafkaLinger.From(v),
		SlotPollInterval:  config.SlotPollInterval.From(v),
		RecreateLostSlot:  config.RecreateLostSlot.From(v),
		AllowExtraTables:  config.AllowExtraTables.From(v),
		InitialReplay:     config.InitialReplay.From(v),
		Tracing:           config.Tracing.From(v),
		ExactlyOnce:       config.Delivery.From(v) == "exactly-once",
		TransactionalID:   config.TransactionalID.From(v),
		TxnInterval:       config.TxnInterval.From(v),
		TxnMaxEvents:      int(config.TxnMaxEvents.From(v)),
		TxnTimeout:        config.TxnTimeout.From(v),
		SlotFailover:      replication.FailoverMode(config.SlotFailover.From(v)),
		RegistryCAFile:    config.SchemaRegistryCAFile.From(v),
	}
	if _, err := pgconn.ParseConfig(c.PGURL); err != nil {
		return nil, cfgErr("pg-url", "not a valid libpq URL or DSN (%s): use e.g. postgres://user:pass@host:5432/db", redactErr(err))
	}
	if err := relaypkg.ChooseBroker(c, v); err != nil {
		return nil, err
	}
	if err := outboxTables(c, config.Table.Text(v), v.File()); err != nil {
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
	st, err := schemaregistry.ParseStrategy(config.SubjectStrategy.From(v))
	if err != nil {
		return nil, cfgErr("subject-strategy", "%q is not a strategy: use topic, record or topic_record", config.SubjectStrategy.From(v))
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
	if c.MaxRecordBytes > c.KafkaBatchBytes && !c.RabbitMQ() {
		return nil, cfgErr("max-record-bytes", "%d is larger than --kafka-batch-bytes %d: a record must fit in one produce request", c.MaxRecordBytes, c.KafkaBatchBytes)
	}
	return c, nil
}

// recordFormats resolves the settings of the row → record step: key and
// value formats, headers, timestamps and tombstones, and which of the
// registry settings they require.
func recordFormats(c *Config, v *config.Values) error {
	var err error
	if c.KeyFormat, err = recordpkg.ParseKeyFormat(config.KeyFormat.From(v)); err != nil {
		return cfgErr("key-format", "%v", err)
	}
	if c.ValueFormat, err = recordpkg.ParseValueFormat(config.ValueFormat.From(v)); err != nil {
		return cfgErr("value-format", "%v", err)
	}
	required := func(s config.StringSetting, why string) error {
		if s.From(v) == "" {
			return cfgErr(s.Name, "is required with %s: set the flag, %s, or %s in --config", why, s.Env(), s.Name)
		}
		return nil
	}
	if c.ValueFormat == recordpkg.ValueAvro {
		for _, s := range []config.StringSetting{config.SchemaRegistryURL, config.SchemasDir} {
			if err := required(s, "--value-format avro (the default)"); err != nil {
				return err
			}
		}
	}
	if c.KeyFormat == recordpkg.KeyAvro {
		if err := required(config.SchemaRegistryURL, "--key-format avro"); err != nil {
			return err
		}
	}
	if c.BuiltinHeaders, err = router.ParseBuiltin(config.BuiltinHeaders.From(v)); err != nil {
		return cfgErr("builtin-headers", "%v", err)
	}
	if c.HeaderColumns, err = recordpkg.ParseHeaderColumns(config.HeaderColumns.From(v), c.BuiltinHeaders); err != nil {
		return cfgErr("header-columns", "%v", err)
	}
	c.TimestampColumn = config.TimestampColumn.From(v)
	c.Tombstones = config.TombstoneOnNullPayload.From(v)
	c.UnknownFieldsName = config.UnknownFields.From(v)
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

// cloudEvents resolves --cloudevents, --cloudevents-source and
// --cloudevents-mode.
func cloudEvents(c *Config, v *config.Values) error {
	c.CloudEvents = config.CloudEvents.From(v)
	c.CloudEventsSource = config.CloudEventsSource.From(v)
	mode, err := recordpkg.ParseCloudEventsMode(config.CloudEventsMode.From(v))
	if err != nil {
		return cfgErr("cloudevents-mode", "%v", err)
	}
	c.CloudEventsMode = mode
	if !c.CloudEvents {
		if mode != recordpkg.CloudEventsBinary {
			return cfgErr("cloudevents-mode", "%s needs --cloudevents: set --cloudevents true (and --cloudevents-source), or leave --cloudevents-mode unset", mode)
		}
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
