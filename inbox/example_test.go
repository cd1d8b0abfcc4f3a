package inbox_test

import (
	"context"
	"errors"
	"log"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cdc-relay/cdc-relay/inbox"
)

// OrderCreated is the part of the event the loyalty service reads; the
// writer schema's other fields are skipped.
type OrderCreated struct {
	OrderID     string `avro:"order_id"`
	CustomerID  string `avro:"customer_id"`
	AmountCents int64  `avro:"amount_cents"`
}

// A consumer that accrues bonus points once per order, however often Kafka
// delivers the event. processed_messages (docs/inbox.sql) must exist.
func ExampleNew() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	pool, err := pgxpool.New(ctx, "postgres://loyalty@db:5432/loyalty")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	c, err := inbox.New(inbox.Config[OrderCreated]{
		Consumer:    "loyalty",
		Brokers:     []string{"kafka:9092"},
		Topics:      []string{"outbox.event.Order"},
		RegistryURL: "http://registry:8081",
		DB:          pool,
		MaxAttempts: 5,
		Retention:   7 * 24 * time.Hour, // delete marks older than a week, in batches
		Handler: func(ctx context.Context, tx pgx.Tx, ev *inbox.Event[OrderCreated]) error {
			if ev.Type != "OrderCreated" {
				return nil
			}
			// Same transaction as the mark: both commit, or neither does.
			_, err := tx.Exec(ctx, `INSERT INTO bonus_accruals (order_id, customer_id, points) VALUES ($1, $2, $3)`,
				ev.Value.OrderID, ev.Value.CustomerID, ev.Value.AmountCents/100)
			return err
		},
	})
	if err != nil {
		var ce *inbox.ConfigError
		if errors.As(err, &ce) {
			log.Fatalf("fix Config.%s: %s", ce.Field, ce.Reason)
		}
		log.Fatal(err)
	}
	if err := c.Run(ctx); err != nil {
		log.Fatal(err)
	}
	log.Printf("stopped: %+v", c.Stats())
}

// Values decode into a map when no Go type fits.
func ExampleEvent_map() {
	handler := func(ctx context.Context, tx pgx.Tx, ev *inbox.Event[map[string]any]) error {
		log.Printf("%s %s of %s %s (trace %s): %v", ev.Type, ev.ID, ev.AggregateType, ev.AggregateID, ev.Headers["traceparent"], ev.Value)
		return nil
	}
	_ = inbox.Config[map[string]any]{Handler: handler}
}
