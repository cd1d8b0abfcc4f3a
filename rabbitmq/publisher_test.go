package rabbitmq

import (
	"context"
	"errors"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/cdc-relay/cdc-relay/internal/backoff"
	"github.com/cdc-relay/cdc-relay/internal/rabbittest"
)

// One node serves the package's tests; each test has its own exchange and
// queues.
var shared rabbittest.Shared

func TestMain(m *testing.M) { os.Exit(shared.Run(m)) }

var names atomic.Int64

// fresh is a suffix that makes a test's exchange and queue names its own,
// also when -count runs it again on the same node.
func fresh() string { return "-" + strconv.FormatInt(names.Add(1), 10) }

func startNode(t *testing.T) *rabbittest.Node { return shared.Node(t) }

// channel opens a connection and a channel to n, closed at the test's end.
func channel(t *testing.T, n *rabbittest.Node) *amqp.Channel {
	t.Helper()
	return n.Channel(t)
}

// inOrder fails unless got is id-1, id-2, ... in that order.
func inOrder(t *testing.T, got []string, what string) {
	t.Helper()
	for i, id := range got {
		if want := "id-" + strconv.Itoa(i+1); id != want {
			t.Fatalf("message %d is %s, want %s: %s", i, id, want, what)
		}
	}
}

// topology declares exchange ex (durable topic) and a quorum queue q bound
// with key, with extra queue arguments.
func topology(t *testing.T, n *rabbittest.Node, ex, q, key string, args amqp.Table) *amqp.Channel {
	t.Helper()
	ch := channel(t, n)
	if err := ch.ExchangeDeclare(ex, "topic", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if args == nil {
		args = amqp.Table{}
	}
	if args["x-queue-type"] == nil {
		args["x-queue-type"] = "quorum"
	}
	if _, err := ch.QueueDeclare(q, true, false, false, false, args); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(q, key, ex, false, nil); err != nil {
		t.Fatal(err)
	}
	return ch
}

// acks records the Acked calls and fails the test if the prefix ever goes
// back or skips.
type acks struct {
	t    *testing.T
	mu   sync.Mutex
	upTo uint64
	n    int
}

func (a *acks) acked(upTo uint64, events int, _ int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if upTo != a.upTo+uint64(events) {
		a.t.Errorf("acked up to %d with %d events after %d: not a contiguous prefix", upTo, events, a.upTo)
	}
	a.upTo, a.n = upTo, a.n+events
}

func (a *acks) get() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.upTo
}

type counts struct{ confirmed, nacked, returned, reconnected atomic.Int64 }

func (c *counts) Confirmed(n int) { c.confirmed.Add(int64(n)) }
func (c *counts) Nacked()         { c.nacked.Add(1) }
func (c *counts) Returned()       { c.returned.Add(1) }
func (c *counts) Reconnected()    { c.reconnected.Add(1) }

func msg(ex string, seq uint64, key string) *Message {
	return &Message{Seq: seq, Exchange: ex, RoutingKey: key, Publishing: amqp.Publishing{
		DeliveryMode: amqp.Persistent, MessageId: "id-" + strconv.FormatUint(seq, 10), Body: []byte(strconv.FormatUint(seq, 10)),
	}}
}

// run starts p and returns a func that stops it and returns Run's error.
func run(t *testing.T, p *Publisher) func() error {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	stop := func() error { cancel(); return <-done }
	t.Cleanup(func() { stop() })
	return stop
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// consume reads n distinct message ids from q (dupes allowed) and returns
// them in arrival order, first arrival only.
func consume(t *testing.T, n *rabbittest.Node, q string, count int, timeout time.Duration) []string {
	t.Helper()
	conn, err := amqp.Dial(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Qos(500, 0, false); err != nil {
		t.Fatal(err)
	}
	msgs, err := ch.Consume(q, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var order []string
	deadline := time.After(timeout)
	for len(order) < count {
		select {
		case m := <-msgs:
			if !seen[m.MessageId] {
				seen[m.MessageId] = true
				order = append(order, m.MessageId)
			}
			m.Ack(false)
		case <-deadline:
			t.Fatalf("read %d of %d distinct messages from %s", len(order), count, q)
		}
	}
	return order
}

func TestPublishAcksAContiguousPrefixInOrder(t *testing.T) {
	sfx := fresh()
	n := startNode(t)
	topology(t, n, "ex-order"+sfx, "q-order"+sfx, "order.#", nil)
	a := &acks{t: t}
	p := New(Config{URL: n.URL(), Exchange: "ex-order" + sfx, Declare: true, MaxInFlight: 300, Acked: a.acked})
	run(t, p)
	const total = 3000
	for i := uint64(1); i <= total; i++ {
		if err := p.Publish(context.Background(), msg("ex-order"+sfx, i, "order.created")); err != nil {
			t.Fatal(err)
		}
		if f := p.InFlight(); f > 300 {
			t.Fatalf("%d in flight, bound 300", f)
		}
	}
	waitFor(t, "every message acked", time.Minute, func() bool { return a.get() == total })
	inOrder(t, consume(t, n, "q-order"+sfx, total, time.Minute), "order lost")
}

func TestUnroutableGoesToTheDeadLetterQueue(t *testing.T) {
	sfx := fresh()
	n := startNode(t)
	ch := topology(t, n, "ex-unroutable"+sfx, "q-routed"+sfx, "routed", nil)
	if _, err := ch.QueueDeclare("q-dead"+sfx, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	a := &acks{t: t}
	c := &counts{}
	var dead sync.Map
	p := New(Config{URL: n.URL(), Exchange: "ex-unroutable" + sfx, Declare: true, Acked: a.acked, Observer: c,
		Unroutable: func(m *Message) (*Message, error) {
			dead.Store(m.Publishing.MessageId, true)
			return &Message{Exchange: "", RoutingKey: "q-dead" + sfx, Publishing: amqp.Publishing{
				DeliveryMode: amqp.Persistent, MessageId: m.Publishing.MessageId, Body: m.Publishing.Body,
				Headers: amqp.Table{"error_kind": "unroutable"}}}, nil
		}})
	run(t, p)
	const total = 200
	for i := uint64(1); i <= total; i++ {
		key := "routed"
		if i%10 == 0 {
			key = "nobody.listens"
		}
		if err := p.Publish(context.Background(), msg("ex-unroutable"+sfx, i, key)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "every message acked", time.Minute, func() bool { return a.get() == total })
	if got := c.returned.Load(); got != total/10 {
		t.Fatalf("%d returned, want %d", got, total/10)
	}
	routed := consume(t, n, "q-routed"+sfx, total-total/10, time.Minute)
	for _, id := range routed {
		if _, ok := dead.Load(id); ok {
			t.Fatalf("%s was returned and is in the routed queue too", id)
		}
	}
	letters := consume(t, n, "q-dead"+sfx, total/10, time.Minute)
	for _, id := range letters {
		if _, ok := dead.Load(id); !ok {
			t.Fatalf("dead letter %s was never returned", id)
		}
	}
}

func TestNackFromAFullQueueIsRetriedNotDeadLettered(t *testing.T) {
	sfx := fresh()
	n := startNode(t)
	topology(t, n, "ex-full"+sfx, "q-full"+sfx, "#", amqp.Table{"x-max-length": int64(20), "x-overflow": "reject-publish", "x-queue-type": "classic"})
	a := &acks{t: t}
	c := &counts{}
	p := New(Config{URL: n.URL(), Exchange: "ex-full" + sfx, Declare: true, Acked: a.acked, Observer: c,
		Unroutable: func(m *Message) (*Message, error) { return nil, errors.New("nothing is unroutable here") }})
	run(t, p)
	const total = 100
	for i := uint64(1); i <= total; i++ {
		if err := p.Publish(context.Background(), msg("ex-full"+sfx, i, "k")); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the full queue to nack", time.Minute, func() bool { return c.nacked.Load() > 0 })
	if got := a.get(); got >= total {
		t.Fatalf("acked up to %d with a queue of 20 and no consumer", got)
	}
	got := consume(t, n, "q-full"+sfx, total, 2*time.Minute)
	waitFor(t, "every message acked", time.Minute, func() bool { return a.get() == total })
	if len(got) != total || c.returned.Load() != 0 {
		t.Fatalf("%d distinct delivered, %d returned", len(got), c.returned.Load())
	}
}

func TestClosedConnectionResendsTheUnconfirmed(t *testing.T) {
	sfx := fresh()
	n := startNode(t)
	topology(t, n, "ex-close"+sfx, "q-close"+sfx, "#", nil)
	a := &acks{t: t}
	c := &counts{}
	p := New(Config{URL: n.URL(), Exchange: "ex-close" + sfx, Declare: true, Acked: a.acked, Observer: c,
		Backoff: backoff.Backoff{Min: 50 * time.Millisecond, Max: time.Second}})
	run(t, p)
	// Publish until the connection was closed three times under load.
	var published atomic.Uint64
	stopPub := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for i := uint64(1); ; i++ {
			select {
			case <-stopPub:
				done <- nil
				return
			default:
			}
			if err := p.Publish(context.Background(), msg("ex-close"+sfx, i, "k")); err != nil {
				done <- err
				return
			}
			published.Store(i)
		}
	}()
	for kills := 0; kills < 3; kills++ {
		before := a.get()
		waitFor(t, "more acks", time.Minute, func() bool { return a.get() > before+1000 })
		if _, err := n.Ctl("close_all_connections", "test closes it"); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the reconnect", time.Minute, func() bool { return c.reconnected.Load() > int64(kills) })
	}
	close(stopPub)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	total := int(published.Load())
	waitFor(t, "every message acked", 2*time.Minute, func() bool { return a.get() == uint64(total) })
	inOrder(t, consume(t, n, "q-close"+sfx, total, 2*time.Minute), "the re-send broke the order of first arrivals")
}

func TestMemoryAlarmPausesPublishing(t *testing.T) {
	sfx := fresh()
	n := startNode(t)
	topology(t, n, "ex-alarm"+sfx, "q-alarm"+sfx, "#", nil)
	a := &acks{t: t}
	p := New(Config{URL: n.URL(), Exchange: "ex-alarm" + sfx, Declare: true, Acked: a.acked})
	run(t, p)
	if err := p.Publish(context.Background(), msg("ex-alarm"+sfx, 1, "k")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first ack", time.Minute, func() bool { return a.get() == 1 })
	if _, err := n.Ctl("set_vm_memory_high_watermark", "0.000001"); err != nil {
		t.Fatal(err)
	}
	restored := false
	t.Cleanup(func() {
		if !restored {
			n.Ctl("set_vm_memory_high_watermark", "0.4")
		}
	})
	// The broker blocks a connection when it next publishes.
	for i := uint64(2); i <= 50; i++ {
		if err := p.Publish(context.Background(), msg("ex-alarm"+sfx, i, "k")); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "blocked", time.Minute, func() bool { return !p.Health().BlockedSince.IsZero() })
	if got := a.get(); got == 50 {
		t.Fatalf("acked up to %d under a memory alarm", got)
	}
	if _, err := n.Ctl("set_vm_memory_high_watermark", "0.4"); err != nil {
		t.Fatal(err)
	}
	restored = true
	waitFor(t, "every message acked", time.Minute, func() bool { return a.get() == 50 })
	if !p.Health().BlockedSince.IsZero() {
		t.Fatal("still blocked after the alarm cleared")
	}
	if got := consume(t, n, "q-alarm"+sfx, 50, time.Minute); len(got) != 50 {
		t.Fatalf("%d of 50", len(got))
	}
}

func TestExchangeOfAnotherTypeIsAnExchangeError(t *testing.T) {
	sfx := fresh()
	n := startNode(t)
	ch := channel(t, n)
	if err := ch.ExchangeDeclare("ex-fanout"+sfx, "fanout", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	p := New(Config{URL: n.URL(), Exchange: "ex-fanout" + sfx, Declare: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := p.Run(ctx)
	var exErr *ExchangeError
	if !errors.As(err, &exErr) || exErr.Exchange != "ex-fanout"+sfx {
		t.Fatalf("Run: %v, want an *ExchangeError naming ex-fanout", err)
	}
	if perr := p.Publish(ctx, msg("ex-fanout"+sfx, 1, "k")); perr == nil {
		t.Fatal("Publish after Run ended: no error")
	}
}
