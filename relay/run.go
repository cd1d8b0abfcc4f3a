package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/cdc-relay/cdc-relay/checkpoint"
	"github.com/cdc-relay/cdc-relay/publisher"
	"github.com/cdc-relay/cdc-relay/rabbitmq"
	"github.com/cdc-relay/cdc-relay/replication"
	"github.com/cdc-relay/cdc-relay/schemaregistry"
)

// Options are what Run needs besides the Config. The zero value runs the
// relay with defaults.
type Options struct {
	// Logger is the relay's log; nil: NewLogger(cfg, os.Stderr).
	Logger *slog.Logger
	// Getenv reads the OTEL_* variables tracing obeys; nil: os.Getenv.
	Getenv func(string) string
	// InitialReplay makes the first start's replay of --initial-replay
	// (replication.Deps.InitialReplay; the replay package's Initial). It
	// is required with cfg.InitialReplay.
	InitialReplay func(cfg *Config, log *slog.Logger) func(ctx context.Context, until time.Time) error
	// Halted, when set, is told the error a halted stream ended with,
	// before the relay lingers (--halt-linger) with /readyz saying why.
	Halted func(err error)
}

// StartError is a setting, a schema or the metrics address that kept the
// relay from starting; the command exits 2 and prints it. Refused is a
// schema the registry finds incompatible (Err is its
// *schemaregistry.IncompatibleError).
type StartError struct {
	Err     error
	Refused bool
}

// Error is the line the command prints after "cdc-relay: ".
func (e *StartError) Error() string {
	if e.Refused {
		return "refusing to start: " + e.Err.Error()
	}
	return e.Err.Error()
}

// Unwrap is Err.
func (e *StartError) Unwrap() error { return e.Err }

// HaltError is the error a halted stream ended with, after the relay
// lingered; the command exits 3 when IsGap, else 1. Options.Halted was
// told already.
type HaltError struct{ Err error }

// Error is "halted: " and the stream's error.
func (e *HaltError) Error() string { return "halted: " + e.Err.Error() }

// Unwrap is Err.
func (e *HaltError) Unwrap() error { return e.Err }

// Run is `cdc-relay run`: it builds the pipeline from cfg, streams until
// ctx ends, then drains and shuts down in order (stop reading, flush Kafka
// within --shutdown-timeout, the final status update, close the
// connections, stop the HTTP server). It returns nil after a stop on
// request. Otherwise: a *StartError when it could not start; for a stream
// that ended on a configuration error (IsConfigExit) or an unrecoverable
// one (*replication.UnrecoverableError), that error; for any other halt a
// *HaltError, once the relay lingered. Run installs no signal handler and
// never exits the process.
func Run(ctx context.Context, cfg *Config, o Options) error {
	log := o.Logger
	if log == nil {
		log = NewLogger(cfg, os.Stderr)
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	var initialReplay func(ctx context.Context, until time.Time) error
	if cfg.InitialReplay {
		if o.InitialReplay == nil {
			return &StartError{Err: ConfigErr("initial-replay", "is set, but this build of the relay has no replay (Options.InitialReplay)")}
		}
		initialReplay = o.InitialReplay(cfg, log)
	}
	su, err := NewSetup(cfg, log, false)
	if err != nil {
		return &StartError{Err: err}
	}
	stats, lag, m := su.Stats, su.Lag, su.Metrics
	guard := NewGuard(cfg, su.Kafka.Opts, log, false)
	defer guard.Close()
	tr, err := newTracing(ctx, cfg.Tracing, o.Getenv, log)
	if err != nil {
		return &StartError{Err: err}
	}
	defer tr.shutdown(log) // after the publisher's flush, below
	base := handler{halt: cfg.OnInvalid == "halt", dlq: cfg.DeadLetters(), broker: brokerOf(cfg), metrics: m, log: log, tracing: tr, unconfigured: &rateLog{},
		dead: &deadLetters{count: func(reason string) { m.DeadLetter(reason) }}}
	// The sink: Kafka's publisher, or under --rabbitmq-url RabbitMQ's
	// (at-least-once only: the settings refuse exactly-once with it).
	var pub *publisher.Publisher
	var rabbit *rabbitmq.Sink
	var newSink func(ctx context.Context, acker publisher.Acker) recordSink
	if cfg.RabbitMQ() {
		if rabbit, err = newRabbitSink(cfg, m, log, nil); err != nil {
			return &StartError{Err: err}
		}
		if err := tr.useRabbitMQ(cfg); err != nil {
			return &StartError{Err: err}
		}
		m.SetHealth(nil, guard.WriteHealth)
		m.ready.rabbitmq = rabbitHealth(rabbit.Health, guard.Backend())
		newSink = func(ctx context.Context, acker publisher.Acker) recordSink {
			return rabbitSession{rabbit.NewSession(ctx, acker)}
		}
	} else {
		pub, err = su.NewPublisher(base.rejected, func(end, commitEnd uint64, commit time.Time) (*publisher.Record, error) {
			server := stats.Server()
			if server == nil {
				return nil, errors.New("no server identified yet")
			}
			topic, key, value, err := guard.TxnRecord(*server, replication.LSN(end), replication.LSN(commitEnd), commit)
			if err != nil {
				return nil, err
			}
			return &publisher.Record{Topic: topic, Key: key, Value: value, Time: time.Now()}, nil
		}, stats.Gathering)
		if err != nil {
			return &StartError{Err: err}
		}
		defer pub.Close()
		base.dead.exactlyOnce = pub.Transactional()
		m.SetHealth(pub.Health, guard.WriteHealth)
		newSink = func(ctx context.Context, acker publisher.Acker) recordSink { return pub.NewSession(ctx, acker) }
	}

	stream := replication.NewStream(replication.Config{
		URL:               cfg.PGURL,
		Slot:              cfg.Slot,
		Publication:       cfg.Publication,
		Tables:            cfg.Tables,
		StatusInterval:    cfg.StatusInterval,
		ReadTimeout:       cfg.ReadTimeout,
		DrainTimeout:      cfg.ShutdownTimeout,
		MaxInFlightEvents: cfg.MaxInFlightEvents,
		MaxInFlightBytes:  cfg.MaxInFlightBytes,
		RecreateLostSlot:  cfg.RecreateLostSlot,
		SlotFailover:      cfg.SlotFailover,
		AllowExtraTables:  cfg.AllowExtraTables,
		ExactlyOnce:       cfg.ExactlyOnce,
		IsConfigError:     IsConfigExit,
		Broker:            brokerOf(cfg).String(),
		Gather:            streamGather(cfg),
		Logger:            log,
	}, replication.Deps{
		// On its first connection the stream reads the server version and
		// the tables from the catalog; the row → record step is built from
		// them and handed to every session.
		Inspect: func(ctx context.Context, conn *pgx.Conn) (replication.Inspected, error) {
			in, err := Inspect(ctx, conn, cfg)
			if err != nil {
				return replication.Inspected{}, err
			}
			if err := checkInitialReplay(cfg, in); err != nil {
				return replication.Inspected{}, replication.Fatal(err)
			}
			builder, err := su.NewBuilder(in)
			if err != nil {
				return replication.Inspected{}, replication.Fatal(err) // a *FlagError
			}
			prefix := ""
			if in.Major >= replication.MessagesMinMajor {
				prefix = cfg.MessagePrefix
			}
			return replication.Inspected{ExtraColumns: builder.ExtraColumns(), MessagePrefix: prefix,
				NewSession: func(sctx context.Context, tr *replication.Tracker) (replication.Session, error) {
					if !cfg.ExactlyOnce {
						return base.session(builder, newSink(sctx, tr)), nil
					}
					skip, err := exactlyOnceStart(sctx, cfg, pub, guard, stats, tr.Confirmed(), log)
					if err != nil {
						return nil, markFenced(err)
					}
					// The checkpoint at skip is durable: a checkpoint-only
					// transaction must never write one behind it.
					tr.Checkpointed(skip, 0, time.Time{})
					base.dead.begin()
					h := base.session(builder, pub.NewSession(sctx, commitAcker{tr, base.dead}))
					h.skipBelow = skip
					return h, nil
				}}, nil
		},
		Guard:         guard,
		InitialReplay: initialReplay,
		OnSkippedRow:  skippedRows(m, log, cfg.Publication),
		Stats:         stats,
	})

	srv, err := NewHTTPServer(cfg.MetricsAddr, m, stats, cfg.ReadTimeout, log)
	if err != nil {
		return &StartError{Err: fmt.Errorf("--metrics-addr: cannot listen on %s: %w", cfg.MetricsAddr, err)}
	}
	defer srv.Shutdown()

	if rabbit != nil {
		log.Info("start", "version", Version, "pg_url", Redact(cfg.PGURL), "slot", cfg.Slot, "publication", cfg.Publication,
			"tables", TableNames(cfg.Tables), "rabbitmq_url", Redact(cfg.RabbitMQURL), "rabbitmq_exchange", cfg.RabbitMQExchange, "routing_key", cfg.RoutingKey,
			"schemas", len(su.Schemas), "on_invalid", cfg.OnInvalid, "metrics_addr", cfg.MetricsAddr)
	} else {
		log.Info("start", "version", Version, "pg_url", Redact(cfg.PGURL), "slot", cfg.Slot, "publication", cfg.Publication,
			"tables", TableNames(cfg.Tables), "kafka_brokers", cfg.KafkaBrokers, "schemas", len(su.Schemas), "on_invalid", cfg.OnInvalid, "metrics_addr", cfg.MetricsAddr)
	}

	if err := su.Preflight(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		var incompatible *schemaregistry.IncompatibleError
		if errors.As(err, &incompatible) {
			return &StartError{Err: err, Refused: true}
		}
		return fmt.Errorf("schema registry: %w", err)
	}

	// Say early when Kafka is unreachable or refuses the credentials: the
	// publisher would otherwise only find out at the first event. The relay
	// starts anyway and retries, as Kafka may come up later. RabbitMQ's
	// exchange and dead-letter stream are declared (or checked) first: one
	// of another kind is exit 2.
	pingDone := make(chan struct{})
	if rabbit != nil {
		close(pingDone)
		if err := prepareRabbit(ctx, rabbit, cfg, log); err != nil {
			return err
		}
	} else {
		go func() {
			defer close(pingDone)
			pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
			defer pcancel()
			if err := pub.Ping(pctx); err != nil && ctx.Err() == nil {
				log.Error("kafka not reachable at startup: the relay waits for Kafka and the checkpoint topic (--checkpoint-topic) before it streams; nothing is read from the slot meanwhile",
					"kafka_brokers", cfg.KafkaBrokers, "checkpoint_topic", cfg.CheckpointTopic, "err", err.Error())
			}
		}()
	}
	defer func() { <-pingDone }()

	lagCtx, stopLag := context.WithCancel(context.Background())
	defer stopLag()
	go lag.Run(lagCtx)
	pollDone := make(chan struct{})
	go func() {
		defer close(pollDone)
		poller := &replication.SlotPoller{URL: cfg.PGURL, Slot: cfg.Slot, Interval: cfg.SlotPollInterval, Stats: stats, Logger: log}
		poller.Run(lagCtx)
	}()
	defer func() { stopLag(); <-pollDone }()

	// The checkpoint writer: nothing is confirmed to PostgreSQL that a
	// durable checkpoint does not cover. Under exactly-once the checkpoint
	// is written inside the Kafka transactions instead, and Run returns at
	// once: a plain write could land after a transactional one that
	// commits later, and hide it. The stream writes the final checkpoint
	// itself, before its final confirm (Guard.Checkpoint).
	ckptCtx, stopCkpt := context.WithCancel(context.Background())
	ckptDone := make(chan struct{})
	go func() {
		defer close(ckptDone)
		guard.Run(ckptCtx, stats)
	}()
	err = stream.Run(ctx)
	if err == nil {
		LogUndrained(log, stats, cfg.ShutdownTimeout, cfg.ExactlyOnce, brokerOf(cfg))
	}
	stopCkpt()
	<-ckptDone
	var unrecoverable *replication.UnrecoverableError
	if err == nil || IsConfigExit(err) || errors.As(err, &unrecoverable) {
		// An unrecoverable error: the stream logged the cause and the
		// fix. It ends the relay at once, no --halt-linger: a
		// supervisor's restarts show the crash loop.
		return err
	}
	if o.Halted != nil {
		o.Halted(err)
	}
	lingerHalted(ctx, cfg.HaltLinger, log)
	return &HaltError{Err: err}
}

// lingerHalted keeps a halted relay up for linger, or until a signal, so
// that probes and scrapes see why it stopped: /readyz answers 503 with the
// cause and cdc_relay_halted is 1. Streaming has ended and the slot is
// released by then; a standby may take it (and meets the same event). The
// exit that follows lets a supervisor restart the relay, which picks up a fix
// such as a new .avsc or a restored column.
func lingerHalted(ctx context.Context, linger time.Duration, log *slog.Logger) {
	if linger <= 0 || ctx.Err() != nil {
		return
	}
	log.Info("halted: serving /readyz (503) and /metrics until exit; SIGTERM exits now", "exit_in", linger.String())
	t := time.NewTimer(linger)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// exactlyOnceStart runs once the stream holds the slot, before the session
// reads it: fence every older instance with the transactional id (which
// settles what they left open), then read the checkpoint with
// read_committed. It returns the LSN up to which transactions are in Kafka
// already.
//
// It is also where the slot, confirmed at slotConfirmed when this instance
// took it, is compared with the checkpoint (checkpoint.Guard.SkipBelow).
func exactlyOnceStart(ctx context.Context, cfg *Config, pub *publisher.Publisher, guard *checkpoint.Guard, stats *replication.Stats, slotConfirmed replication.LSN, log *slog.Logger) (replication.LSN, error) {
	server := stats.Server()
	if server == nil {
		return 0, errors.New("exactly-once: no server identified")
	}
	id := TransactionalID(cfg, guard.RelayID())
	pub.SetTransactionalID(id)
	fctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := pub.Fence(fctx); err != nil {
		switch {
		case errors.Is(err, kerr.InvalidTransactionTimeout):
			return 0, replication.Fatal(ConfigErr("txn-timeout", "%s is more than the broker's transaction.max.timeout.ms (15 min by default): lower --txn-timeout, or raise the broker's setting", cfg.TxnTimeout))
		case errors.Is(err, kerr.TransactionalIDAuthorizationFailed):
			return 0, replication.Fatal(fmt.Errorf("exactly-once: the relay's principal may not use transactional id %s: grant it WRITE and DESCRIBE on TRANSACTIONAL_ID %s (kafka-acls.sh --transactional-id), or set --transactional-id to one it may use: %w", id, id, err))
		}
		return 0, err
	}
	skip, err := guard.SkipBelow(fctx, replication.GuardInput{Server: *server, Slot: cfg.Slot, Exists: true}, slotConfirmed)
	if err != nil {
		return 0, err
	}
	log.Info("exactly-once: fenced older instances and read the checkpoint", "transactional_id", id, "checkpoint_lsn", skip.String())
	return skip, nil
}

// TransactionalID is the Kafka transactional id of exactly-once delivery:
// --transactional-id, else cdc-relay-<relay id>, so that every replica of
// one relay (one slot) shares it.
func TransactionalID(cfg *Config, relayID string) string {
	if cfg.TransactionalID != "" {
		return cfg.TransactionalID
	}
	return "cdc-relay-" + relayID
}

// streamGather is the replication stream's Gather: the Kafka linger, spent
// waiting for the stream's bytes instead of holding records
// (replication/lowat.go). A RabbitMQ sink publishes each event at once, as
// before.
func streamGather(cfg *Config) time.Duration {
	if cfg.RabbitMQ() {
		return 0
	}
	return cfg.KafkaLinger
}
