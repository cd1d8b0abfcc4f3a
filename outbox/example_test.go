package outbox_test

import (
	"context"
	"database/sql"
	"log"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/outbox"
	"github.com/cdc-relay/cdc-relay/schemaregistry"
)

// An order and its OrderCreated event commit together, or not at all.
func ExampleWrite() {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, "postgres://app@db:5432/shop")
	if err != nil {
		log.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback(ctx)
	orderID := "5d9e1d7a-6b1f-4c4e-9a57-1f0e0a3c2b11"
	if _, err := tx.Exec(ctx, `INSERT INTO orders (id, customer_id, amount_cents) VALUES ($1, $2, $3)`, orderID, "c-1", 1999); err != nil {
		log.Fatal(err)
	}
	eventID, err := outbox.Write(ctx, tx, outbox.Event{
		AggregateType: "Order",
		AggregateID:   orderID,
		EventType:     "OrderCreated",
		Payload:       map[string]any{"order_id": orderID, "customer_id": "c-1", "status": "PENDING", "amount_cents": 1999, "created_at": 1700000000000},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}
	log.Printf("order %s placed, event %s", orderID, eventID)
}

// A Writer for database/sql, a table with other column names, payloads
// validated against the relay's schemas, and trace context from ctx.
func ExampleNew() {
	schemas, err := schemaregistry.LoadDir("schemas") // the relay's --schemas-dir
	if err != nil {
		log.Fatal(err)
	}
	w, err := outbox.New(outbox.Config{
		Table:   "orders.events",
		Columns: outbox.Columns{AggregateID: "aggregateid", AggregateType: "aggregatetype", EventType: "type"},
		Schemas: schemas,
		Propagator: func(ctx context.Context, carrier map[string]string) {
			// With OpenTelemetry:
			// otel.GetTextMapPropagator().Inject(ctx, propagation.MapCarrier(carrier))
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	db, err := sql.Open("pgx", "postgres://app@db:5432/shop") // import _ "github.com/jackc/pgx/v5/stdlib"
	if err != nil {
		log.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback()
	ids, err := w.WriteBatchSQL(ctx, tx, []outbox.Event{
		{AggregateType: "Order", AggregateID: "o-1", EventType: "OrderCreated", Payload: []byte(`{"order_id": "o-1"}`)},
		{AggregateType: "Order", AggregateID: "o-2", EventType: "OrderCreated", Payload: []byte(`{"order_id": "o-2"}`)},
	})
	if err != nil {
		log.Fatal(err) // errors.Is(err, outbox.ErrInvalidEvent): fix the event, nothing was written
	}
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}
	log.Println(ids)
}

// The table-less form: the same calls emit transactional logical messages
// (prefix "outbox") instead of rows; no table, no cleanup.
func ExampleConfig_message() {
	w, err := outbox.New(outbox.Config{Mode: outbox.ModeMessage})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, "postgres://app@db:5432/shop")
	if err != nil {
		log.Fatal(err)
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		_, err := w.Write(ctx, tx, outbox.Event{AggregateType: "Order", AggregateID: "o-1", EventType: "OrderCancelled",
			Payload: map[string]any{"order_id": "o-1", "reason": "CUSTOMER_REQUEST"}})
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
}
