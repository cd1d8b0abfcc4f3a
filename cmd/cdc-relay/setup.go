package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/kafkasec"
	"github.com/cdc-relay/cdc-relay/publisher"
	recordpkg "github.com/cdc-relay/cdc-relay/record"
	relaypkg "github.com/cdc-relay/cdc-relay/relay"
	"github.com/cdc-relay/cdc-relay/replication"
	"github.com/cdc-relay/cdc-relay/router"
	"github.com/cdc-relay/cdc-relay/schemaregistry"
)

// setup is what run, replay and dlq redrive build alike from a Config
// before they touch PostgreSQL or Kafka: the schemas, the router, the
// registry client, the metrics and the Kafka security.
type setup struct {
	cfg      *Config
	log      *slog.Logger
	schemas  map[string]*schemaregistry.Schema // --schemas-dir; nil without it
	router   *router.Router
	registry *schemaregistry.Registry // nil without --schema-registry-url
	stats    *replication.Stats
	lag      *lagRate
	metrics  *metrics
	kafka    kafkasec.Client // the checked TLS and SASL (relaypkg.CheckedKafkaSecurity)
}

// newSetup builds the shared set-up. lookupOnly makes a registry client
// that registers nothing (a dry run). Every error is a setting the
// command exits 2 on; its text is what follows "cdc-relay: ".
func newSetup(cfg *Config, log *slog.Logger, lookupOnly bool) (*setup, error) {
	s := &setup{cfg: cfg, log: log}
	var err error
	if cfg.SchemasDir != "" {
		if s.schemas, err = schemaregistry.LoadDir(cfg.SchemasDir); err != nil {
			return nil, err
		}
	}
	if s.router, err = router.New(cfg.TopicTemplate); err != nil {
		return nil, err
	}
	httpClient, err := relaypkg.RegistryHTTPClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("--schema-registry-ca-file: %w", err)
	}
	if s.kafka, err = relaypkg.CheckedKafkaSecurity(cfg); err != nil {
		return nil, fmt.Errorf("--kafka-tls: %w", err)
	}
	s.stats = new(replication.Stats)
	s.lag = newLagRate(s.stats.LagBytes)
	s.metrics = newMetrics(s.stats, s.lag)
	s.metrics.logUnknownFields(log, cfg.UnknownFieldsName)
	if cfg.SchemaRegistryURL != "" {
		s.registry, err = schemaregistry.New(schemaregistry.Config{URL: cfg.SchemaRegistryURL, Strategy: cfg.SubjectStrategy, Schemas: s.schemas, Logger: log,
			HTTPClient: s.metrics.countRegistryRequests(httpClient), LookupOnly: lookupOnly})
		if err != nil {
			return nil, fmt.Errorf("--schema-registry-url: %w", err)
		}
	}
	return s, nil
}

// newBuilder makes the row → record step for the inspected tables.
func (s *setup) newBuilder(in *inspection) (*recordpkg.Builder, error) {
	cfg := s.cfg
	rc := recordpkg.Config{Router: s.router, Registry: s.registry, KeyFormat: cfg.KeyFormat, ValueFormat: cfg.ValueFormat,
		Builtin: cfg.BuiltinHeaders, HeaderColumns: cfg.HeaderColumns, TimestampColumn: cfg.TimestampColumn,
		Tombstones: cfg.Tombstones, CloudEvents: cfg.CloudEvents, CloudEventsSource: cfg.CloudEventsSource,
		MaxRecordBytes: cfg.MaxRecordBytes, DLQTopic: cfg.DLQTopic, Observer: s.metrics, UnknownFields: cfg.UnknownFields}
	for i, t := range in.Tables {
		rc.Tables = append(rc.Tables, recordpkg.Table{Name: t.Name, OID: t.OID, AggregateID: cfg.Tables[i].Columns.AggregateID, Columns: t.Columns})
	}
	return recordpkg.New(rc)
}

// preflight registers the schemas known at startup (see
// schemaregistry.Registry.Preflight); nothing to do without a registry.
func (s *setup) preflight(ctx context.Context) error {
	if s.registry == nil {
		return nil
	}
	return s.registry.Preflight(ctx, s.router.Matcher())
}

// newPublisher makes the Kafka publisher of run, replay and dlq redrive.
// reject handles a record the broker refused; checkpoint makes the record
// a Kafka transaction ends with (exactly-once; nil for replay and redrive,
// which are at-least-once).
func (s *setup) newPublisher(reject func(*publisher.Record, error) (*publisher.Record, error), checkpoint func(uint64, uint64, time.Time) (*publisher.Record, error)) (*publisher.Publisher, error) {
	cfg := s.cfg
	return publisher.New(publisher.Config{
		Brokers:            cfg.KafkaBrokers,
		Compression:        cfg.KafkaCompression,
		BatchBytes:         cfg.KafkaBatchBytes,
		Linger:             cfg.KafkaLinger,
		MaxRecordBytes:     cfg.MaxRecordBytes,
		TLS:                s.kafka.TLS,
		SASL:               s.kafka.SASL,
		Reject:             reject,
		Observer:           s.metrics,
		Logger:             s.log,
		ExactlyOnce:        cfg.ExactlyOnce && checkpoint != nil,
		TransactionalID:    cfg.TransactionalID,
		TransactionTimeout: cfg.TxnTimeout,
		TxnInterval:        cfg.TxnInterval,
		TxnMaxEvents:       cfg.TxnMaxEvents,
		Checkpoint:         checkpoint,
	})
}
