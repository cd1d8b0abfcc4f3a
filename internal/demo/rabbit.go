package main

import (
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/cdc-relay/cdc-relay/internal/pgtest"
	"github.com/cdc-relay/cdc-relay/internal/rabbittest"
	"github.com/cdc-relay/cdc-relay/internal/relaytest"
)

// The RabbitMQ topology the demo declares before the relay starts, as the
// article lays it out: a quorum queue per consuming service, bound to the
// relay's topic exchange by event type, with a delivery limit and a
// dead-letter exchange of its own (for messages the consumer rejects, not
// the relay's dead letters, which go to the outbox.dlq stream).
const (
	exchange     = "outbox"         // --rabbitmq-exchange's default
	queue        = "billing.orders" // the consuming service's queue
	deadExchange = "billing.dlx"    // the queue's x-dead-letter-exchange
	deadQueue    = "billing.orders.dead"
	deliveryCap  = 5  // x-delivery-limit, as in the article
	prefetch     = 10 // basic.qos, as in the article
)

// bindings are the routing keys the queue is bound with: the relay's
// default routing key is {event_type}.
var bindings = []string{"OrderCreated", "OrderCancelled"}

// startRabbitServices starts PostgreSQL and a private RabbitMQ node in
// parallel and prints one line for each as it becomes ready. It waits for
// both, even after a failure, so that close can stop whatever started.
func (d *demo) startRabbitServices() error {
	type result struct {
		name, addr string
		took       time.Duration
		err        error
	}
	results := make(chan result, 2)
	var (
		pg   *pgtest.Cluster
		node *rabbittest.Node
	)
	go func() {
		t := time.Now()
		c, err := pgtest.Start(pgtest.Options{})
		addr := ""
		if err == nil {
			pg, addr = c, fmt.Sprintf("127.0.0.1:%d (PostgreSQL 15)", c.Port())
		}
		results <- result{"postgres", addr, time.Since(t), err}
	}()
	go func() {
		t := time.Now()
		n, err := rabbittest.Start(rabbittest.Options{})
		addr := ""
		if err == nil {
			node, addr = n, fmt.Sprintf("127.0.0.1:%d (RabbitMQ, node %s)", n.Port(), n.Name())
		}
		results <- result{"rabbitmq", addr, time.Since(t), err}
	}()
	var first error
	for range 2 {
		r := <-results
		if r.err != nil {
			if first == nil {
				first = fmt.Errorf("start %s: %w", r.name, r.err)
			}
			continue
		}
		fmt.Printf("%-11s %s in %s\n", r.name, r.addr, r.took.Round(time.Millisecond))
	}
	// Each goroutine wrote its variable before it sent; both have sent.
	d.svc = &relaytest.Services{PG: pg}
	d.pg, d.rabbit = pg, node
	return first
}

// declareTopology declares the exchange (as the relay does: durable topic),
// the consumer's quorum queue with its bindings, and the queue's
// dead-letter exchange and queue. Every queue argument is explicit, since
// RabbitMQ 4 changed some defaults.
func declareTopology(ch *amqp.Channel) error {
	if err := ch.ExchangeDeclare(exchange, amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
		return fmt.Errorf("declare exchange %s: %w", exchange, err)
	}
	if err := ch.ExchangeDeclare(deadExchange, amqp.ExchangeFanout, true, false, false, false, nil); err != nil {
		return fmt.Errorf("declare exchange %s: %w", deadExchange, err)
	}
	if _, err := ch.QueueDeclare(deadQueue, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
		return fmt.Errorf("declare queue %s: %w", deadQueue, err)
	}
	if err := ch.QueueBind(deadQueue, "", deadExchange, false, nil); err != nil {
		return fmt.Errorf("bind queue %s: %w", deadQueue, err)
	}
	args := amqp.Table{
		"x-queue-type":           "quorum",
		"x-delivery-limit":       int32(deliveryCap),
		"x-dead-letter-exchange": deadExchange,
	}
	if _, err := ch.QueueDeclare(queue, true, false, false, false, args); err != nil {
		return fmt.Errorf("declare queue %s: %w", queue, err)
	}
	for _, key := range bindings {
		if err := ch.QueueBind(queue, key, exchange, false, nil); err != nil {
			return fmt.Errorf("bind queue %s to %s with %s: %w", queue, exchange, key, err)
		}
	}
	fmt.Printf("topology    quorum queue %s (x-delivery-limit %d, x-dead-letter-exchange %s) bound to topic exchange %s with %v\n",
		queue, deliveryCap, deadExchange, exchange, bindings)
	return nil
}
