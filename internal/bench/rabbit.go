package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/cdc-relay/cdc-relay/internal/pgtest"
	"github.com/cdc-relay/cdc-relay/internal/rabbittest"
)

// The RabbitMQ side of the benchmark (--broker rabbitmq): the relay and the
// anchor publish to one durable topic exchange, and one queue bound with
// "#" takes every message, which a consumer drains as they arrive.
const (
	rabbitExchange = "bench"
	rabbitQueue    = "bench.all"
	// anchorWindow bounds the anchor's unconfirmed messages: the relay's
	// --max-in-flight-events default, so that both may have as many
	// messages in flight.
	anchorWindow = 50000
	// consumePrefetch and ackEvery are the collecting consumer's prefetch
	// and how many deliveries one multiple ack covers.
	consumePrefetch = 2000
	ackEvery        = 500
)

// startRabbitServices starts PostgreSQL and a private RabbitMQ node in
// parallel. On error the services that did start are returned too, so that
// close stops them.
func startRabbitServices() (*services, error) {
	s := &services{}
	var wg sync.WaitGroup
	var pgErr, rmqErr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		s.pg, pgErr = pgtest.Start(pgtest.Options{})
	}()
	go func() {
		defer wg.Done()
		s.rabbit, rmqErr = rabbittest.Start(rabbittest.Options{})
	}()
	wg.Wait()
	switch {
	case pgErr != nil:
		return s, fmt.Errorf("start PostgreSQL: %w", pgErr)
	case rmqErr != nil:
		return s, fmt.Errorf("start RabbitMQ: %w", rmqErr)
	}
	s.brokerPID = pidWithArg("beam", s.rabbit.Dir())
	return s, nil
}

// pidWithArg finds the process whose command line holds both prog and arg
// (the node's Erlang VM names its data directory); 0 when there is none.
func pidWithArg(prog, arg string) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), prog) && strings.Contains(string(b), arg) {
			return pid
		}
	}
	return 0
}

// rabbitTopology declares the exchange (as the relay does) and a fresh,
// empty queue of queueType bound to it with "#". Every queue argument is
// explicit.
func rabbitTopology(ch *amqp.Channel, queueType string) error {
	if err := ch.ExchangeDeclare(rabbitExchange, amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
		return fmt.Errorf("declare exchange %s: %w", rabbitExchange, err)
	}
	if _, err := ch.QueueDelete(rabbitQueue, false, false, false); err != nil {
		return fmt.Errorf("delete queue %s: %w", rabbitQueue, err)
	}
	args := amqp.Table{"x-queue-type": queueType}
	if queueType == "quorum" {
		args["x-delivery-limit"] = int32(5)
	}
	if _, err := ch.QueueDeclare(rabbitQueue, true, false, false, false, args); err != nil {
		return fmt.Errorf("declare queue %s: %w", rabbitQueue, err)
	}
	if err := ch.QueueBind(rabbitQueue, "#", rabbitExchange, false, nil); err != nil {
		return fmt.Errorf("bind queue %s: %w", rabbitQueue, err)
	}
	return nil
}

// collector consumes the queue, counting each message by its message_id
// (an outbox id, or the anchor's sequence number) and, when keep is set,
// keeping the messages for the anchor to send again. onRecv, when set, is
// called with each id and the instant it arrived.
type collector struct {
	conn   *amqp.Connection
	minID  int64
	seen   []atomic.Bool
	count  atomic.Int64
	dups   atomic.Int64
	bad    atomic.Int64 // ids out of range or not numbers
	keep   bool
	idOf   func(amqp.Delivery) string // where the id is; nil: message_id
	kept   []amqp.Delivery
	first  amqp.Delivery // the first message, valid once count > 0
	onRecv func(id int64, at time.Time)
	done   chan struct{}
	err    error // valid once done is closed
}

// startCollector opens its own connection and consumes the queue with
// manual acks, for ids minID..minID+n-1.
func startCollector(url string, minID int64, n int, keep bool, onRecv func(int64, time.Time)) (*collector, error) {
	return startCollectorWith(url, minID, n, keep, onRecv, nil)
}

// startCollectorID is startCollector that reads each message's id with
// idOf, keeping nothing.
func startCollectorID(url string, minID int64, n int, idOf func(amqp.Delivery) string) (*collector, error) {
	return startCollectorWith(url, minID, n, false, nil, idOf)
}

func startCollectorWith(url string, minID int64, n int, keep bool, onRecv func(int64, time.Time), idOf func(amqp.Delivery) string) (*collector, error) {
	conn, err := amqp.Dial(url)
	if err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	ch, err := conn.Channel()
	if err == nil {
		err = ch.Qos(consumePrefetch, 0, false)
	}
	var ds <-chan amqp.Delivery
	if err == nil {
		ds, err = ch.Consume(rabbitQueue, "bench", false, false, false, false, nil)
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("consume %s: %w", rabbitQueue, err)
	}
	c := &collector{conn: conn, minID: minID, seen: make([]atomic.Bool, n), keep: keep, idOf: idOf, onRecv: onRecv, done: make(chan struct{})}
	if keep {
		c.kept = make([]amqp.Delivery, 0, n)
	}
	go c.run(ds)
	return c, nil
}

func (c *collector) run(ds <-chan amqp.Delivery) {
	defer close(c.done)
	unacked := 0
	for d := range ds {
		now := time.Now()
		mid := d.MessageId
		if c.idOf != nil {
			mid = c.idOf(d)
		}
		id, err := strconv.ParseInt(mid, 10, 64)
		switch k := id - c.minID; {
		case err != nil || k < 0 || k >= int64(len(c.seen)):
			c.bad.Add(1)
		case c.seen[k].Swap(true):
			c.dups.Add(1)
		default:
			if c.onRecv != nil {
				c.onRecv(id, now)
			}
		}
		if c.count.Load() == 0 {
			c.first = d
			c.first.Acknowledger = nil
		}
		if c.keep {
			k := d
			k.Acknowledger = nil
			c.kept = append(c.kept, k)
		}
		if unacked++; unacked >= ackEvery {
			if err := d.Ack(true); err != nil {
				c.err = err
				return
			}
			unacked = 0
		}
		c.count.Add(1)
	}
}

// wait waits until n messages have arrived, the timeout passes or ctx ends.
func (c *collector) wait(ctx context.Context, n int64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for c.count.Load() < n {
		if time.Now().After(deadline) {
			return fmt.Errorf("the consumer has %d of %d messages after %s", c.count.Load(), n, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.done:
			return fmt.Errorf("the consumer stopped after %d of %d messages: %v", c.count.Load(), n, c.err)
		case <-time.After(slotPoll):
		}
	}
	return nil
}

// close closes the connection and waits for the consumer to end.
func (c *collector) close() {
	c.conn.Close()
	<-c.done
}

// missing counts the ids never seen.
func (c *collector) missing() int64 {
	var n int64
	for i := range c.seen {
		if !c.seen[i].Load() {
			n++
		}
	}
	return n
}

// anchorPublisher publishes on one confirm channel with mandatory set, at
// most window messages unconfirmed: it waits for the oldest deferred
// confirmation only when the window is full, never per message.
type anchorPublisher struct {
	conn     *amqp.Connection
	ch       *amqp.Channel
	pending  []*amqp.DeferredConfirmation
	head     int
	window   int
	returns  chan amqp.Return
	returned atomic.Int64
	nacks    int64
}

func newAnchorPublisher(url string, window int) (*anchorPublisher, error) {
	conn, err := amqp.Dial(url)
	if err != nil {
		return nil, fmt.Errorf("anchor: %w", err)
	}
	ch, err := conn.Channel()
	if err == nil {
		err = ch.Confirm(false)
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("anchor: confirm channel: %w", err)
	}
	p := &anchorPublisher{conn: conn, ch: ch, window: window, returns: ch.NotifyReturn(make(chan amqp.Return, 64))}
	go func() {
		for range p.returns {
			p.returned.Add(1)
		}
	}()
	return p, nil
}

// publish sends one message, first waiting for the oldest confirmation if
// the window is full.
func (p *anchorPublisher) publish(ctx context.Context, key string, m amqp.Publishing) error {
	if len(p.pending)-p.head >= p.window {
		if err := p.confirmOldest(ctx); err != nil {
			return err
		}
	}
	dc, err := p.ch.PublishWithDeferredConfirmWithContext(ctx, rabbitExchange, key, true, false, m)
	if err != nil {
		return fmt.Errorf("anchor: publish: %w", err)
	}
	p.pending = append(p.pending, dc)
	if p.head > 4*p.window { // drop what was confirmed
		p.pending = append(p.pending[:0], p.pending[p.head:]...)
		p.head = 0
	}
	return nil
}

func (p *anchorPublisher) confirmOldest(ctx context.Context) error {
	dc := p.pending[p.head]
	p.pending[p.head] = nil
	p.head++
	ok, err := dc.WaitContext(ctx)
	if err != nil {
		return fmt.Errorf("anchor: confirm: %w", err)
	}
	if !ok {
		p.nacks++
	}
	return nil
}

// flush waits for every outstanding confirmation.
func (p *anchorPublisher) flush(ctx context.Context) error {
	for p.head < len(p.pending) {
		if err := p.confirmOldest(ctx); err != nil {
			return err
		}
	}
	if p.nacks > 0 || p.returned.Load() > 0 {
		return fmt.Errorf("anchor: %d nacks and %d returns", p.nacks, p.returned.Load())
	}
	return nil
}

func (p *anchorPublisher) close() { p.conn.Close() }

// publishing turns a consumed message back into what was published: the
// same body, properties and headers.
func publishing(d amqp.Delivery) amqp.Publishing {
	return amqp.Publishing{
		Headers: d.Headers, ContentType: d.ContentType, ContentEncoding: d.ContentEncoding,
		DeliveryMode: d.DeliveryMode, Priority: d.Priority, CorrelationId: d.CorrelationId,
		ReplyTo: d.ReplyTo, Expiration: d.Expiration, MessageId: d.MessageId, Timestamp: d.Timestamp,
		Type: d.Type, UserId: d.UserId, AppId: d.AppId, Body: d.Body,
	}
}
