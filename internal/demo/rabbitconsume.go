package main

import (
	"context"
	"fmt"
	"sort"
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"
)

// rabbitConsumer reads what the relay published, as any RabbitMQ consumer
// would, with amqp091-go: the quorum queue with prefetch and a manual ack
// after each message is handled, and the outbox.dlq stream from its first
// offset (a stream is read, not consumed).
type rabbitConsumer struct {
	conn *amqp.Connection
	ch   *amqp.Channel

	tally
	byQueue  map[string]int // queue → messages
	problems []string       // messages that were not what the writer wrote
}

// newRabbitConsumer connects to url, declares the topology (before the
// relay starts, so that no event finds the exchange unbound) and sets the
// prefetch.
func newRabbitConsumer(url string) (*rabbitConsumer, error) {
	conn, err := amqp.Dial(url)
	if err != nil {
		return nil, fmt.Errorf("connect to RabbitMQ: %w", err)
	}
	c := &rabbitConsumer{conn: conn, tally: tally{seen: map[string]int{}}, byQueue: map[string]int{}}
	if c.ch, err = conn.Channel(); err != nil {
		conn.Close()
		return nil, fmt.Errorf("open a channel: %w", err)
	}
	if err := declareTopology(c.ch); err != nil {
		conn.Close()
		return nil, err
	}
	if err := c.ch.Qos(prefetch, 0, false); err != nil {
		conn.Close()
		return nil, fmt.Errorf("set prefetch: %w", err)
	}
	return c, nil
}

// await prints every message as it arrives until each written event has
// been seen, or ctx ends. It consumes the queue and, from its first
// offset, the dead-letter stream the relay declared. It fails if a message
// is not what the writer wrote.
func (c *rabbitConsumer) await(ctx context.Context, want []written) error {
	byID := map[string]written{}
	for _, w := range want {
		byID[w.id] = w
	}
	events, err := c.ch.ConsumeWithContext(ctx, queue, "demo-billing", false, false, false, false, nil)
	if err != nil {
		return fmt.Errorf("consume %s: %w", queue, err)
	}
	dead, err := c.ch.ConsumeWithContext(ctx, dlqTopic, "demo-dlq", false, false, false, false,
		amqp.Table{"x-stream-offset": "first"})
	if err != nil {
		return fmt.Errorf("read stream %s: %w", dlqTopic, err)
	}
	for !c.allSeen(want) {
		var (
			m  amqp.Delivery
			ok bool
			q  string
		)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case m, ok = <-events:
			q = queue
		case m, ok = <-dead:
			q = dlqTopic
		}
		if !ok {
			return fmt.Errorf("the broker closed the consumer of %s", q)
		}
		c.handle(q, m, byID)
		if err := m.Ack(false); err != nil {
			return fmt.Errorf("ack %s: %w", q, err)
		}
	}
	if len(c.problems) > 0 {
		return fmt.Errorf("%d unexpected message(s):\n  %s", len(c.problems), strings.Join(c.problems, "\n  "))
	}
	return nil
}

// handle prints one message with its properties and checks them against
// what was written.
func (c *rabbitConsumer) handle(q string, m amqp.Delivery, byID map[string]written) {
	id := m.MessageId
	if h := headerText(m.Headers["id"]); q == dlqTopic && h != "" {
		id = h // the dead letter keeps the event's id header
	}
	c.byQueue[q]++
	c.seen[id]++
	dup := ""
	if c.seen[id] > 1 {
		dup = "  (duplicate)"
	}
	fmt.Printf("%-19s #%-3d routing_key=%s message_id=%s type=%s content_type=%s redelivered=%t%s\n",
		q, c.byQueue[q], m.RoutingKey, m.MessageId, m.Type, m.ContentType, m.Redelivered, dup)
	fmt.Printf("%-19s      headers: %s\n", "", formatHeaders(m.Headers))
	fmt.Printf("%-19s      body: %s\n", "", m.Body)

	w, ok := byID[id]
	wantQueue := queue
	if !w.valid {
		wantQueue = dlqTopic
	}
	switch {
	case !ok:
		c.problems = append(c.problems, fmt.Sprintf("%s #%d: id %q was not written by this demo", q, c.byQueue[q], id))
	case q != wantQueue:
		c.problems = append(c.problems, fmt.Sprintf("id %s arrived on %s, want %s", id, q, wantQueue))
	case q == dlqTopic && headerText(m.Headers["error_kind"]) == "":
		c.problems = append(c.problems, fmt.Sprintf("dead letter %s has no error_kind header", id))
	case q == dlqTopic:
	case m.RoutingKey != w.eventType || m.Type != w.eventType:
		c.problems = append(c.problems, fmt.Sprintf("id %s has routing key %q and type %q, want the event type %q", id, m.RoutingKey, m.Type, w.eventType))
	case headerText(m.Headers["aggregate_id"]) != w.aggregateID:
		c.problems = append(c.problems, fmt.Sprintf("id %s has aggregate_id %q, want %q", id, headerText(m.Headers["aggregate_id"]), w.aggregateID))
	case m.DeliveryMode != amqp.Persistent:
		c.problems = append(c.problems, fmt.Sprintf("id %s has delivery mode %d, want 2 (persistent)", id, m.DeliveryMode))
	case !strings.HasPrefix(headerText(m.Headers["traceparent"]), "00-"):
		c.problems = append(c.problems, fmt.Sprintf("id %s lacks the traceparent header the writer set", id))
	}
}

// counts describes how many messages each queue held, e.g. "12 on
// billing.orders, 1 on outbox.dlq".
func (c *rabbitConsumer) counts() string {
	parts := []string{fmt.Sprintf("%d on %s", c.byQueue[queue], queue)}
	if n := c.byQueue[dlqTopic]; n > 0 {
		parts = append(parts, fmt.Sprintf("%d on %s", n, dlqTopic))
	}
	return strings.Join(parts, ", ")
}

// close closes the connection and its channel.
func (c *rabbitConsumer) close() { c.conn.Close() }

// headerText is a header value as text ("" when absent).
func headerText(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case []byte:
		return string(v)
	}
	return fmt.Sprint(v)
}

// formatHeaders writes headers as key=value pairs in key order, each value
// quoted when it holds a space.
func formatHeaders(h amqp.Table) string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		v := headerText(h[k])
		if strings.ContainsAny(v, " \t") {
			v = fmt.Sprintf("%q", v)
		}
		parts[i] = k + "=" + v
	}
	return strings.Join(parts, " ")
}
