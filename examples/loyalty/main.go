// Command loyalty is the example consumer, built on package inbox: for each
// OrderCreated it accrues bonus points (1 point per 100 cents) and for each
// OrderCancelled it reverses them, exactly once per event however often
// Kafka delivers it.
//
//	loyalty --pg-url postgres://... --kafka-brokers host:9092 --schema-registry-url http://... [--setup]
//
// --setup creates processed_messages (docs/inbox.sql) and the loyalty tables
// if missing. --batch-size runs that many queued events per transaction,
// --database-sql uses database/sql (inbox.Config.SQLHandler) instead of pgx,
// --key-format is the relay's. It prints "applied <event_type> <order> <id>" after each
// committed event and "duplicate <id>" for each duplicate it skipped, and
// runs until SIGTERM (exit 0). Exit 1 on a failure, 2 on bad flags.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/cdc-relay/cdc-relay/inbox"
)

const loyaltyDDL = `
CREATE TABLE IF NOT EXISTS bonus_accruals (
	id          bigserial PRIMARY KEY,
	order_id    text   NOT NULL, -- deliberately not unique: exactly-once comes from the inbox
	customer_id text   NOT NULL,
	points      bigint NOT NULL,
	reversed    boolean NOT NULL DEFAULT false
);
CREATE TABLE IF NOT EXISTS loyalty_balances (
	customer_id text PRIMARY KEY,
	points      bigint NOT NULL
);
-- Every effect in the order it was applied, to check per-order ordering.
CREATE TABLE IF NOT EXISTS loyalty_effects (
	seq        bigserial PRIMARY KEY,
	order_id   text NOT NULL,
	event_type text NOT NULL,
	event_id   text NOT NULL
);`

// order is the part of OrderCreated and OrderCancelled the service reads;
// hamba/avro skips the other fields of the writer schema.
type order struct {
	OrderID     string `avro:"order_id"`
	CustomerID  string `avro:"customer_id"`
	AmountCents int64  `avro:"amount_cents"`
}

type options struct {
	pgURL, brokers, registry, topics, consumer, dlq, inboxSQL, keyFormat string
	setup, databaseSQL                                                   bool
	workers, maxAttempts, batchSize                                      int
	sessionTimeout                                                       time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.pgURL, "pg-url", os.Getenv("DATABASE_URL"), "PostgreSQL URL of the loyalty database (default $DATABASE_URL)")
	flag.StringVar(&o.brokers, "kafka-brokers", "", "comma-separated Kafka brokers (required)")
	flag.StringVar(&o.registry, "schema-registry-url", "", "schema registry URL (required)")
	flag.StringVar(&o.topics, "topics", "outbox.event.Order", "comma-separated topics to read")
	flag.StringVar(&o.consumer, "consumer", "loyalty", "consumer name (dedupe scope and Kafka group)")
	flag.StringVar(&o.dlq, "dlq-topic", "", "dead-letter topic (default <consumer>.dlq)")
	flag.BoolVar(&o.setup, "setup", false, "create processed_messages and the loyalty tables if missing")
	flag.StringVar(&o.inboxSQL, "inbox-sql", "docs/inbox.sql", "DDL of processed_messages, for --setup")
	flag.IntVar(&o.workers, "workers", 4, "concurrent workers (events of one order stay on one worker)")
	flag.IntVar(&o.maxAttempts, "max-attempts", 5, "attempts before an event goes to the dead-letter topic")
	flag.DurationVar(&o.sessionTimeout, "session-timeout", 10*time.Second, "Kafka group session timeout")
	flag.IntVar(&o.batchSize, "batch-size", 1, "events of one worker per database transaction")
	flag.BoolVar(&o.databaseSQL, "database-sql", false, "apply events through database/sql (*sql.Tx) instead of pgx")
	flag.StringVar(&o.keyFormat, "key-format", "string", "the relay's --key-format: string, json, json-schema or avro")
	flag.Parse()
	if o.pgURL == "" || o.brokers == "" || o.registry == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "loyalty: --pg-url, --kafka-brokers and --schema-registry-url are required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(ctx, o, log); err != nil {
		var ce *inbox.ConfigError
		log.Error("loyalty failed", "error", err)
		if errors.As(err, &ce) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, log *slog.Logger) error {
	pcfg, err := pgxpool.ParseConfig(o.pgURL)
	if err != nil {
		return err
	}
	pcfg.MaxConns = int32(o.workers + 2)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	if o.setup {
		ddl, err := os.ReadFile(o.inboxSQL)
		if err != nil {
			return err
		}
		if _, err := pool.Exec(ctx, string(ddl)+";\n"+loyaltyDDL); err != nil {
			return fmt.Errorf("setup: %w", err)
		}
	}
	var out sync.Mutex // one line at a time on stdout
	applied := func(ev *inbox.Event[order]) {
		// Printed before the commit: a line may precede a commit that
		// then fails; the database is the record, this is progress.
		out.Lock()
		fmt.Printf("applied %s %s %s\n", ev.Type, ev.Value.OrderID, ev.ID)
		out.Unlock()
	}
	cfg := inbox.Config[order]{
		Consumer:       o.consumer,
		Brokers:        strings.Split(o.brokers, ","),
		Topics:         strings.Split(o.topics, ","),
		RegistryURL:    o.registry,
		Workers:        o.workers,
		MaxAttempts:    o.maxAttempts,
		BatchSize:      o.batchSize,
		KeyFormat:      o.keyFormat,
		DLQTopic:       o.dlq,
		SessionTimeout: o.sessionTimeout,
		Logger:         log,
		OnDuplicate: func(ev *inbox.Event[order]) {
			out.Lock()
			fmt.Printf("duplicate %s\n", ev.ID)
			out.Unlock()
		},
	}
	if o.databaseSQL {
		db := stdlib.OpenDBFromPool(pool)
		defer db.Close()
		cfg.SQLDB = db
		cfg.SQLHandler = func(ctx context.Context, tx *sql.Tx, ev *inbox.Event[order]) error {
			err := apply(ctx, sqlTx{tx}, ev)
			if err == nil {
				applied(ev)
			}
			return err
		}
	} else {
		cfg.DB = pool
		cfg.Handler = func(ctx context.Context, tx pgx.Tx, ev *inbox.Event[order]) error {
			err := apply(ctx, pgxTx{tx}, ev)
			if err == nil {
				applied(ev)
			}
			return err
		}
	}
	c, err := inbox.New(cfg)
	if err != nil {
		return err
	}
	err = c.Run(ctx)
	s := c.Stats()
	log.Info("loyalty stopped", "processed", s.Processed, "duplicates", s.Duplicates, "retries", s.Retries, "dead_lettered", s.DeadLettered)
	return err
}

// tx is the part of a transaction apply uses, pgx or database/sql.
type tx interface {
	exec(ctx context.Context, query string, args ...any) error
	// queryInt scans one integer; found is false when no row came back.
	queryInt(ctx context.Context, query string, args ...any) (n int64, found bool, err error)
}

type pgxTx struct{ pgx.Tx }

func (t pgxTx) exec(ctx context.Context, q string, args ...any) error {
	_, err := t.Exec(ctx, q, args...)
	return err
}

func (t pgxTx) queryInt(ctx context.Context, q string, args ...any) (int64, bool, error) {
	var n int64
	err := t.QueryRow(ctx, q, args...).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	return n, err == nil, err
}

type sqlTx struct{ *sql.Tx }

func (t sqlTx) exec(ctx context.Context, q string, args ...any) error {
	_, err := t.ExecContext(ctx, q, args...)
	return err
}

func (t sqlTx) queryInt(ctx context.Context, q string, args ...any) (int64, bool, error) {
	var n int64
	err := t.QueryRowContext(ctx, q, args...).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return n, err == nil, err
}

// apply is the business effect, in the inbox's transaction.
func apply(ctx context.Context, tx tx, ev *inbox.Event[order]) error {
	o := ev.Value
	switch ev.Type {
	case "OrderCreated":
		points := o.AmountCents / 100
		if err := tx.exec(ctx, `INSERT INTO bonus_accruals (order_id, customer_id, points) VALUES ($1, $2, $3)`, o.OrderID, o.CustomerID, points); err != nil {
			return err
		}
		if err := tx.exec(ctx, `INSERT INTO loyalty_balances (customer_id, points) VALUES ($1, $2)
			ON CONFLICT (customer_id) DO UPDATE SET points = loyalty_balances.points + excluded.points`, o.CustomerID, points); err != nil {
			return err
		}
	case "OrderCancelled":
		points, found, err := tx.queryInt(ctx, `UPDATE bonus_accruals SET reversed = true WHERE order_id = $1 AND NOT reversed RETURNING points`, o.OrderID)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("order %s cancelled but no accrual to reverse: events out of order", o.OrderID)
		}
		if err := tx.exec(ctx, `UPDATE loyalty_balances SET points = points - $2 WHERE customer_id = $1`, o.CustomerID, points); err != nil {
			return err
		}
	default:
		return nil // not ours
	}
	return tx.exec(ctx, `INSERT INTO loyalty_effects (order_id, event_type, event_id) VALUES ($1, $2, $3)`, o.OrderID, ev.Type, ev.ID)
}
