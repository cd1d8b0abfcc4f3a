package inbox_test

import (
	"context"
	"crypto/tls"
	"errors"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cdc-relay/cdc-relay/inbox"
)

// OrderPlaced reads the relay's JSON values (json tags) and Avro values
// (avro tags) alike.
type OrderPlaced struct {
	OrderID     string `json:"order_id" avro:"order_id"`
	CustomerID  string `json:"customer_id" avro:"customer_id"`
	AmountCents int64  `json:"amount_cents" avro:"amount_cents"`
}

// The loyalty consumer of ExampleNew, fed by RabbitMQ: the relay publishes
// to the outbox exchange with the event type as routing key, and the
// consumer declares its quorum queue (delivery limit 5, a dead-letter
// exchange and queue, single active consumer) and binds it.
func ExampleNewRabbitMQ() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	pool, err := pgxpool.New(ctx, "postgres://loyalty@db:5432/loyalty")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	c, err := inbox.NewRabbitMQ(inbox.RabbitMQConfig[OrderPlaced]{
		Consumer:    "loyalty", // the queue too
		URL:         os.Getenv("RABBITMQ_URL"),
		TLS:         &tls.Config{MinVersion: tls.VersionTLS12}, // with an amqps:// URL
		Exchange:    "outbox",
		RoutingKeys: []string{"OrderCreated"},
		DB:          pool,
		Handler: func(ctx context.Context, tx pgx.Tx, ev *inbox.Event[OrderPlaced]) error {
			_, err := tx.Exec(ctx, `INSERT INTO bonus_accruals (order_id, customer_id, points) VALUES ($1, $2, $3)`,
				ev.Value.OrderID, ev.Value.CustomerID, ev.Value.AmountCents/100)
			return err
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Run(ctx); err != nil {
		var qe *inbox.QueueArgumentsError
		if errors.As(err, &qe) {
			log.Fatalf("queue %s: wanted %v, has %v", qe.Queue, qe.Wanted, qe.Existing)
		}
		log.Fatal(err)
	}
}
