package relay

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/kafkasec"
	"github.com/cdc-relay/cdc-relay/publisher"
	recordpkg "github.com/cdc-relay/cdc-relay/record"
	"github.com/cdc-relay/cdc-relay/replication"
	"github.com/cdc-relay/cdc-relay/router"
	"github.com/cdc-relay/cdc-relay/schemaregistry"
)

// Setup is what run, replay and dlq redrive build alike from a Config
// before they touch PostgreSQL or Kafka: the schemas, the router, the
// registry client, the metrics and the Kafka security.
type Setup struct {
	Config   *Config
	Schemas  map[string]*schemaregistry.Schema // --schemas-dir; nil without it
	Router   *router.Router
	Registry *schemaregistry.Registry // nil without --schema-registry-url
	Stats    *replication.Stats       // the stream's statistics, which the metrics read
	Lag      *LagRate                 // the slot lag's growth; its Run is the caller's to start
	Metrics  *Metrics
	Kafka    kafkasec.Client // the checked TLS and SASL (CheckedKafkaSecurity)
	log      *slog.Logger
}

// NewSetup builds the shared set-up. lookupOnly makes a registry client
// that registers nothing (a dry run). Every error is a setting the
// command exits 2 on; its text is what follows "cdc-relay: ".
func NewSetup(cfg *Config, log *slog.Logger, lookupOnly bool) (*Setup, error) {
	s := &Setup{Config: cfg, log: log}
	var err error
	if cfg.SchemasDir != "" {
		if s.Schemas, err = schemaregistry.LoadDir(cfg.SchemasDir); err != nil {
			return nil, err
		}
	}
	if s.Router, err = router.New(cfg.topicTemplate()); err != nil {
		return nil, err
	}
	httpClient, err := RegistryHTTPClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("--schema-registry-ca-file: %w", err)
	}
	if s.Kafka, err = CheckedKafkaSecurity(cfg); err != nil {
		return nil, fmt.Errorf("--kafka-tls: %w", err)
	}
	s.Stats = new(replication.Stats)
	s.Lag = NewLagRate(s.Stats.LagBytes)
	s.Metrics = newMetrics(s.Stats, s.Lag, brokerOf(cfg))
	s.Metrics.logUnknownFields(log, cfg.UnknownFieldsName)
	if cfg.SchemaRegistryURL != "" {
		s.Registry, err = schemaregistry.New(schemaregistry.Config{URL: cfg.SchemaRegistryURL, Strategy: cfg.SubjectStrategy, Schemas: s.Schemas, Logger: log,
			HTTPClient: s.Metrics.countRegistryRequests(httpClient), LookupOnly: lookupOnly})
		if err != nil {
			return nil, fmt.Errorf("--schema-registry-url: %w", err)
		}
	}
	return s, nil
}

// NewBuilder makes the row → record step for the inspected tables.
func (s *Setup) NewBuilder(in *Inspection) (*recordpkg.Builder, error) {
	cfg := s.Config
	rc := recordpkg.Config{Router: s.Router, Registry: s.Registry, KeyFormat: cfg.KeyFormat, ValueFormat: cfg.ValueFormat,
		Builtin: cfg.BuiltinHeaders, HeaderColumns: cfg.HeaderColumns, TimestampColumn: cfg.TimestampColumn,
		Tombstones: cfg.Tombstones, CloudEvents: cfg.CloudEvents, CloudEventsSource: cfg.CloudEventsSource, CloudEventsMode: cfg.CloudEventsMode,
		MaxRecordBytes: cfg.MaxRecordBytes, DLQTopic: cfg.DeadLetters(), Observer: s.Metrics, UnknownFields: cfg.UnknownFields}
	for i, t := range in.Tables {
		rc.Tables = append(rc.Tables, recordpkg.Table{Name: t.Name, OID: t.OID, AggregateID: cfg.Tables[i].Columns.AggregateID, Columns: t.Columns})
	}
	return recordpkg.New(rc)
}

// Preflight registers the schemas known at startup (see
// schemaregistry.Registry.Preflight); nothing to do without a registry.
func (s *Setup) Preflight(ctx context.Context) error {
	if s.Registry == nil {
		return nil
	}
	return s.Registry.Preflight(ctx, s.Router.Matcher())
}

// NewPublisher makes the Kafka publisher of run, replay and dlq redrive.
// reject handles a record the broker refused; checkpoint makes the record
// a Kafka transaction ends with (exactly-once; nil for replay and redrive,
// which are at-least-once). gathered reports whether the stream's records
// now come gathered for the linger (replication.Stats.Gathering; nil for
// replay and redrive).
func (s *Setup) NewPublisher(reject func(*publisher.Record, error) (*publisher.Record, error), checkpoint func(uint64, uint64, time.Time) (*publisher.Record, error), gathered func() bool) (*publisher.Publisher, error) {
	cfg := s.Config
	return publisher.New(publisher.Config{
		Brokers:            cfg.KafkaBrokers,
		Compression:        cfg.KafkaCompression,
		BatchBytes:         cfg.KafkaBatchBytes,
		Linger:             cfg.KafkaLinger,
		Gathered:           gathered,
		MaxRecordBytes:     cfg.MaxRecordBytes,
		TLS:                s.Kafka.TLS,
		Dial:               s.Kafka.Dial,
		SASL:               s.Kafka.SASL,
		Reject:             reject,
		Observer:           s.Metrics,
		Logger:             s.log,
		ExactlyOnce:        cfg.ExactlyOnce && checkpoint != nil,
		TransactionalID:    cfg.TransactionalID,
		TransactionTimeout: cfg.TxnTimeout,
		TxnInterval:        cfg.TxnInterval,
		TxnMaxEvents:       cfg.TxnMaxEvents,
		Checkpoint:         checkpoint,
	})
}

// NewLogger is the log/slog logger of --log-format and --log-level,
// writing to w.
func NewLogger(cfg *Config, w io.Writer) *slog.Logger {
	var level slog.Level
	level.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
