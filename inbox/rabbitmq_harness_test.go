package inbox

// The RabbitMQ half of the harness: one private RabbitMQ node shared by
// the package's tests (testMain closes it), a plain amqp091-go publisher
// that sends relay-shaped messages with confirms, and a child consumer:
// the test binary itself, started again with inboxChildEnv set, so that a
// consumer can be killed with -9.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/cdc-relay/cdc-relay/internal/rabbittest"
	"github.com/cdc-relay/cdc-relay/internal/relaytest"
)

// rabbit is the package's RabbitMQ node (testMain closes it).
var rabbit rabbittest.Shared

// orderEvent is the JSON payload of the test's events: the aggregate and
// its event number, which gives the order the events were published in.
type orderEvent struct {
	OrderID string `json:"order_id"`
	N       int    `json:"n"`
}

// relayMessage is a message as the relay publishes it: persistent,
// message_id = event id, type = event type, timestamp = commit time,
// content_type, app_id cdc-relay, the Kafka record's headers plus
// aggregate_id and aggregate_type.
func relayMessage(id, aggID string, n int) amqp.Publishing {
	body, _ := json.Marshal(orderEvent{OrderID: aggID, N: n})
	return amqp.Publishing{
		DeliveryMode: amqp.Persistent, MessageId: id, Type: "OrderCreated", Timestamp: time.Now().UTC().Truncate(time.Second),
		ContentType: "application/json", AppId: "cdc-relay", Body: body,
		Headers: amqp.Table{"id": id, "event_type": "OrderCreated", "aggregate_type": "Order", "aggregate_id": aggID,
			"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
	}
}

// publisher sends messages on a confirm channel, with mandatory, and
// waits for each message's confirm: no test message is lost on its way.
type publisher struct {
	t    testing.TB
	url  string
	conn *amqp.Connection
	ch   *amqp.Channel
}

func newPublisher(t testing.TB, url string) *publisher {
	t.Helper()
	p := &publisher{t: t, url: url}
	if err := p.dial(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.conn.Close() })
	return p
}

// dial (again) opens the connection and its confirm channel.
func (p *publisher) dial() error {
	if p.conn != nil {
		p.conn.Close()
	}
	conn, err := amqp.Dial(p.url)
	if err != nil {
		return err
	}
	p.conn = conn
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	p.ch = ch
	return ch.Confirm(false)
}

// publish sends msgs to exchange with routing key = their type and fails
// the test unless every one is confirmed.
func (p *publisher) publish(exchange string, msgs ...amqp.Publishing) {
	p.t.Helper()
	if err := p.send(exchange, msgs...); err != nil {
		p.t.Fatal(err)
	}
}

// send is publish for another goroutine than the test's: it returns the
// first message that was not confirmed.
func (p *publisher) send(exchange string, msgs ...amqp.Publishing) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dcs := make([]*amqp.DeferredConfirmation, len(msgs))
	for i, m := range msgs {
		dc, err := p.ch.PublishWithDeferredConfirmWithContext(ctx, exchange, m.Type, true, false, m)
		if err != nil {
			return fmt.Errorf("publish %s: %w", m.MessageId, err)
		}
		dcs[i] = dc
	}
	for i, dc := range dcs {
		if ok, err := dc.WaitContext(ctx); err != nil || !ok {
			return fmt.Errorf("publish %s: not confirmed (%v)", msgs[i].MessageId, err)
		}
	}
	return nil
}

// queueDepth returns a queue's ready messages (passive declare).
func queueDepth(t testing.TB, node *rabbittest.Node, queue string) int {
	t.Helper()
	q, err := node.Channel(t).QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		t.Fatalf("queue %s: %v", queue, err)
	}
	return q.Messages
}

// deadLetters takes messages from the dead-letter queue (basic.get with
// ack) until want arrived, and returns them.
func deadLetters(t testing.TB, node *rabbittest.Node, queue string, want int) []amqp.Delivery {
	t.Helper()
	ch := node.Channel(t)
	var out []amqp.Delivery
	waitFor(t, 120*time.Second, fmt.Sprintf("%d dead letters in %s", want, queue), func() bool {
		for {
			d, ok, err := ch.Get(queue, true)
			if err != nil {
				t.Fatalf("get from %s: %v", queue, err)
			}
			if !ok {
				return len(out) >= want
			}
			out = append(out, d)
		}
	})
	return out
}

// effectsDDL is the test handler's table: one row per applied event, in
// the order applied (seq).
const effectsDDL = `CREATE TABLE IF NOT EXISTS effects (seq bigserial PRIMARY KEY, consumer text NOT NULL,
	message_id text NOT NULL, aggregate_id text NOT NULL, n int NOT NULL)`

// applyEffect is the test handler: it records the event in tx.
func applyEffect(consumer string) Handler[orderEvent] {
	return func(ctx context.Context, tx pgx.Tx, ev *Event[orderEvent]) error {
		_, err := tx.Exec(ctx, "INSERT INTO effects (consumer, message_id, aggregate_id, n) VALUES ($1, $2, $3, $4)",
			consumer, ev.ID, ev.AggregateID, ev.Value.N)
		return err
	}
}

// runRabbit runs a RabbitMQConsumer in the test process until the test
// ends, and returns it with the channel Run's result arrives on.
func runRabbit[T any](t *testing.T, cfg RabbitMQConfig[T]) (*RabbitMQConsumer[T], <-chan error) {
	t.Helper()
	c, err := NewRabbitMQ(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Error("Run did not return within 60 s of the cancellation")
		}
	})
	return c, done
}

// The child consumer's settings, in its environment.
const (
	inboxChildEnv = "INBOX_RABBITMQ_CHILD" // the consumer name; set: run as the child
	childURLEnv   = "INBOX_RABBITMQ_URL"
	childPGEnv    = "INBOX_RABBITMQ_PG"
	childExEnv    = "INBOX_RABBITMQ_EXCHANGE"
	childQueueEnv = "INBOX_RABBITMQ_QUEUE"
)

// flakyFirst fails the first attempt of one event in ten (by its id): the
// delivery is retried in place and applied at its second attempt.
func flakyFirst(h Handler[orderEvent]) Handler[orderEvent] {
	return func(ctx context.Context, tx pgx.Tx, ev *Event[orderEvent]) error {
		f := fnv.New32a()
		f.Write([]byte(ev.ID))
		if f.Sum32()%10 == 0 && ev.Attempt == 1 {
			return errors.New("flaky: fails an event's first attempt")
		}
		return h(ctx, tx, ev)
	}
}

// The test binary runs as a child consumer when inboxChildEnv is set: a
// process a test can kill with -9.
func init() {
	if name := os.Getenv(inboxChildEnv); name != "" {
		os.Exit(childConsumer(name))
	}
}

// childConsumer consumes with flakyFirst(applyEffect) until SIGTERM,
// printing "duplicate <id>" for each duplicate skipped.
func childConsumer(name string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	pool, err := pgxpool.New(ctx, os.Getenv(childPGEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer pool.Close()
	c, err := NewRabbitMQ(RabbitMQConfig[orderEvent]{
		Consumer: name, URL: os.Getenv(childURLEnv), Exchange: os.Getenv(childExEnv), Queue: os.Getenv(childQueueEnv),
		RoutingKeys: []string{"#"}, DB: pool, Handler: flakyFirst(applyEffect(name)), Workers: 4,
		RetryMin: 10 * time.Millisecond, RetryMax: 200 * time.Millisecond,
		OnDuplicate: func(ev *Event[orderEvent]) { fmt.Println("duplicate " + ev.ID) },
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := c.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	st := c.Stats()
	fmt.Println("processed " + strconv.FormatInt(st.Processed, 10))
	return 0
}

// startChild starts a child consumer.
func startChild(t *testing.T, name, consumer, url, pgURL, exchange, queue string) *proc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return relaytest.Start(t, exe, []string{"-test.run=^$"}, relaytest.Options{Name: name, TailBytes: 3000, Env: []string{
		inboxChildEnv + "=" + consumer, childURLEnv + "=" + url, childPGEnv + "=" + pgURL, childExEnv + "=" + exchange, childQueueEnv + "=" + queue}})
}

// failedAttempts counts the failed attempts a child consumer logged (each
// retried in place).
func failedAttempts(p *proc) int { return strings.Count(p.Output(), "handler failed; retrying") }

// stopAfterFailure waits for one of children to log a failed attempt and
// at once, while it holds the failed event, kills it with -9 or, with
// term, stops it with SIGTERM (it must exit 0); it returns its index.
func stopAfterFailure(t *testing.T, children []*proc, term bool) int {
	t.Helper()
	base := make([]int, len(children))
	for i, c := range children {
		base[i] = failedAttempts(c)
	}
	victim := -1
	waitFor(t, 60*time.Second, "a failed attempt", func() bool {
		for i, c := range children {
			if failedAttempts(c) > base[i] {
				victim = i
				return true
			}
		}
		return false
	})
	if !term {
		children[victim].Kill()
	} else if code := children[victim].Terminate(); code != 0 {
		t.Fatalf("a consumer stopped with SIGTERM exited %d", code)
	}
	return victim
}

// childNames name the two child consumers of startChildren.
var childNames = []string{"consumer-a", "consumer-b"}

// startChildren starts two child consumers of queue, the second once the
// first consumes: with single active consumer the first applies and the
// second waits.
func startChildren(t *testing.T, node *rabbittest.Node, url, consumer, ex, queue string) []*proc {
	t.Helper()
	children := []*proc{startChild(t, childNames[0], consumer, node.URL(), url, ex, queue)}
	waitConsuming(t, node, queue)
	return append(children, startChild(t, childNames[1], consumer, node.URL(), url, ex, queue))
}

// appliedCount is how many effects consumer applied (0 on error: callers
// poll).
func appliedCount(url, consumer string) int64 {
	n, _ := queryInt(url, "SELECT count(*) FROM effects WHERE consumer = $1", consumer)
	return n
}

// checkExactlyOnce waits until consumer applied total events, then checks
// that each was applied once, with one mark, each aggregate's in the order
// published, and that nothing was dead-lettered.
func checkExactlyOnce(t *testing.T, node *rabbittest.Node, url, consumer, queue string, total int) {
	t.Helper()
	waitFor(t, 180*time.Second, fmt.Sprintf("all %d events applied", total), func() bool { return appliedCount(url, consumer) >= int64(total) })
	if n := appliedCount(url, consumer); n != int64(total) {
		t.Errorf("%d effects, want one per published event: %d", n, total)
	}
	if n := mustInt(t, url, "SELECT count(DISTINCT message_id) FROM effects WHERE consumer = $1", consumer); n != int64(total) {
		t.Errorf("%d distinct events applied, want %d", n, total)
	}
	if n := mustInt(t, url, "SELECT count(*) FROM processed_messages WHERE consumer = $1", consumer); n != int64(total) {
		t.Errorf("%d marks, want %d", n, total)
	}
	if n := outOfOrder(t, url, consumer); n != 0 {
		t.Errorf("%d pairs of an aggregate's events applied out of order", n)
	}
	if n := queueDepth(t, node, queue+".dlq"); n != 0 {
		t.Errorf("%d dead letters: no event should have failed for good", n)
	}
}

// eventSource makes relay-shaped events of aggregates agg-0 to agg-N-1 in
// turn, each aggregate's numbered from 0 in the order made.
type eventSource struct {
	prefix string
	next   []int
	total  int
}

func newEventSource(prefix string, aggs int) *eventSource {
	return &eventSource{prefix: prefix, next: make([]int, aggs)}
}

// chunk returns the next n events.
func (e *eventSource) chunk(n int) []amqp.Publishing {
	msgs := make([]amqp.Publishing, 0, n)
	for range n {
		a := e.total % len(e.next)
		msgs = append(msgs, relayMessage(fmt.Sprintf("%s-%d-%d", e.prefix, a, e.next[a]), fmt.Sprintf("agg-%d", a), e.next[a]))
		e.next[a]++
		e.total++
	}
	return msgs
}
