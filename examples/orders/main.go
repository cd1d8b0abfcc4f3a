// Command orders is the example writer service: it places orders, each in
// one transaction with its OrderCreated event (package outbox), and cancels
// some of them later, each cancellation again in one transaction with its
// OrderCancelled event. cdc-relay publishes the events to Kafka.
//
//	orders --pg-url postgres://... [--setup] [--orders 100] [--rate 50] [--cancel-every 3] [--mode table|message]
//
// --setup creates the orders table and the outbox table (docs/outbox.sql)
// if missing. --mode message writes the same events, with the same code, as
// transactional logical decoding messages (outbox.ModeMessage, PostgreSQL
// 14+): the outbox table then stays empty (a relay serving only such
// writers runs with an empty --table). Payloads are checked against --schemas-dir before they are
// written. It prints one line per order and exits 0 when done; SIGTERM
// stops it early (exit 0). Exit 1 on a failure, 2 on bad flags.
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/outbox"
	"github.com/cdc-relay/cdc-relay/schemaregistry"
)

const ordersDDL = `CREATE TABLE IF NOT EXISTS orders (
	id           uuid PRIMARY KEY,
	customer_id  text   NOT NULL,
	amount_cents bigint NOT NULL,
	status       text   NOT NULL,
	created_at   timestamptz NOT NULL DEFAULT now()
)`

type options struct {
	pgURL       string
	setup       bool
	outboxSQL   string
	schemasDir  string
	orders      int
	rate        float64
	cancelEvery int
	customers   int
	mode        string
}

func main() {
	var o options
	flag.StringVar(&o.pgURL, "pg-url", os.Getenv("DATABASE_URL"), "PostgreSQL URL of the orders database (default $DATABASE_URL)")
	flag.BoolVar(&o.setup, "setup", false, "create the orders and outbox tables if missing")
	flag.StringVar(&o.outboxSQL, "outbox-sql", "docs/outbox.sql", "DDL of the outbox table, for --setup")
	flag.StringVar(&o.schemasDir, "schemas-dir", "testdata/schemas", "the relay's .avsc files: payloads are validated against them")
	flag.IntVar(&o.orders, "orders", 100, "orders to place; 0 places orders until SIGTERM")
	flag.Float64Var(&o.rate, "rate", 50, "orders per second; 0 is as fast as possible")
	flag.IntVar(&o.cancelEvery, "cancel-every", 3, "cancel every n-th order (in a later transaction); 0 cancels none")
	flag.IntVar(&o.customers, "customers", 20, "number of distinct customers")
	flag.StringVar(&o.mode, "mode", "table", "table: outbox rows; message: table-less, pg_logical_emit_message (PostgreSQL 14+)")
	flag.Parse()
	if o.pgURL == "" || o.orders < 0 || o.rate < 0 || o.cancelEvery < 0 || o.customers < 1 || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "orders: --pg-url is required; --orders, --rate, --cancel-every must not be negative, --customers at least 1")
		os.Exit(2)
	}
	if _, ok := modes[o.mode]; !ok {
		fmt.Fprintf(os.Stderr, "orders: --mode %q: want table or message\n", o.mode)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(ctx, o); err != nil && !errors.Is(err, context.Canceled) {
		log.Error("orders failed", "error", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	schemas, err := schemaregistry.LoadDir(o.schemasDir)
	if err != nil {
		return err
	}
	w, err := outbox.New(outbox.Config{Mode: modes[o.mode], Schemas: schemas})
	if err != nil {
		return err
	}
	conn, err := connect(ctx, o.pgURL)
	if err != nil {
		return err
	}
	defer func() { conn.Close(context.Background()) }()
	if o.setup {
		ddl, err := os.ReadFile(o.outboxSQL)
		if err != nil {
			return err
		}
		if _, err := conn.Exec(ctx, ordersDDL+";\n"+string(ddl)); err != nil {
			return fmt.Errorf("setup: %w", err)
		}
	}
	var tick <-chan time.Time
	if o.rate > 0 {
		t := time.NewTicker(time.Duration(float64(time.Second) / o.rate))
		defer t.Stop()
		tick = t.C
	}
	var toCancel []order
	for i := 1; o.orders == 0 || i <= o.orders; i++ {
		if tick != nil {
			select {
			case <-ctx.Done():
				return nil
			case <-tick:
			}
		} else if ctx.Err() != nil {
			return nil
		}
		ord := order{id: newUUID(), customer: fmt.Sprintf("c-%d", i%o.customers), cents: int64(1000 + i%50*100)}
		if err := place(ctx, conn, w, ord); err != nil {
			if ctx.Err() != nil {
				return nil // SIGTERM during the transaction: it rolled back or committed whole
			}
			return err
		}
		fmt.Printf("placed %s\n", ord.id)
		if o.cancelEvery > 0 && i%o.cancelEvery == 0 {
			toCancel = append(toCancel, ord)
		}
		// Cancel an earlier order now and then, in its own transaction.
		if len(toCancel) > 0 && (i%2 == 0 || i == o.orders) {
			for _, c := range toCancel {
				if err := cancel(ctx, conn, w, c); err != nil {
					if ctx.Err() != nil {
						return nil
					}
					return err
				}
				fmt.Printf("cancelled %s\n", c.id)
			}
			toCancel = toCancel[:0]
		}
	}
	return nil
}

// modes are the values of --mode: the only difference between the two is
// outbox.Config.Mode.
var modes = map[string]outbox.Mode{"table": outbox.ModeTable, "message": outbox.ModeMessage}

type order struct {
	id, customer string
	cents        int64
}

func place(ctx context.Context, conn *pgx.Conn, w *outbox.Writer, o order) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO orders (id, customer_id, amount_cents, status) VALUES ($1, $2, $3, 'PENDING')`, o.id, o.customer, o.cents); err != nil {
			return err
		}
		_, err := w.Write(ctx, tx, outbox.Event{AggregateType: "Order", AggregateID: o.id, EventType: "OrderCreated", Payload: map[string]any{
			"order_id": o.id, "customer_id": o.customer, "status": "PENDING", "amount_cents": o.cents,
			"items":      []map[string]any{{"sku": "SKU-1", "quantity": 1, "unit_price_cents": o.cents}},
			"created_at": time.Now().UnixMilli(),
		}})
		return err
	})
}

func cancel(ctx context.Context, conn *pgx.Conn, w *outbox.Writer, o order) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE orders SET status = 'CANCELLED' WHERE id = $1`, o.id); err != nil {
			return err
		}
		_, err := w.Write(ctx, tx, outbox.Event{AggregateType: "Order", AggregateID: o.id, EventType: "OrderCancelled", Payload: map[string]any{
			"order_id": o.id, "customer_id": o.customer, "reason": "CUSTOMER_REQUEST", "amount_cents": o.cents,
			"cancelled_at": time.Now().UnixMilli(),
		}})
		return err
	})
}

func connect(ctx context.Context, url string) (*pgx.Conn, error) {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return pgx.Connect(cctx, url)
}

// newUUID returns a random (version 4) UUID for an order id.
func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
