package tail

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/cdc-relay/cdc-relay/internal/rabbittest"
	"github.com/cdc-relay/cdc-relay/internal/relaytest"
	"github.com/cdc-relay/cdc-relay/relay"
)

var rabbit rabbittest.Shared

func TestMain(m *testing.M) { os.Exit(rabbit.Run(m)) }

var rabbitNames atomic.Int64

func fresh(prefix string) string {
	return prefix + "-" + strconv.FormatInt(time.Now().UnixNano()%1e6, 10) + "-" + strconv.FormatInt(rabbitNames.Add(1), 10)
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func amqpChannel(t *testing.T, url string) *amqp.Channel {
	t.Helper()
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	return ch
}

// publish sends msg and waits for its confirm.
func publish(t *testing.T, ch *amqp.Channel, exchange, key string, msg amqp.Publishing) {
	t.Helper()
	dc, err := ch.PublishWithDeferredConfirm(exchange, key, false, false, msg)
	if err != nil {
		t.Fatal(err)
	}
	if !dc.Wait() {
		t.Fatalf("publish to %q %q: nacked", exchange, key)
	}
}

// startTail runs RunRabbitMQ until it returns; wait gives its error.
func startTail(t *testing.T, ctx context.Context, cfg RabbitMQConfig, out io.Writer, log *relaytest.LogBuffer) (wait func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- RunRabbitMQ(ctx, cfg, out, slog.New(slog.NewTextHandler(log, nil))) }()
	return func() error {
		select {
		case err := <-done:
			return err
		case <-time.After(time.Minute):
			t.Fatal("tail did not return within a minute")
			return nil
		}
	}
}

func lines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// TestTailRabbitMQExchange: tail follows an exchange through a temporary,
// exclusive, auto-delete, length-capped queue bound with its pattern, and
// prints the JSON line with the AMQP members.
func TestTailRabbitMQExchange(t *testing.T) {
	n := rabbit.Node(t)
	ex := fresh("tail-ex")
	ch := amqpChannel(t, n.URL())
	if err := ch.ExchangeDeclare(ex, amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, log relaytest.LogBuffer
	wait := startTail(t, ctx, RabbitMQConfig{URL: n.URL(), Exchange: ex, Pattern: "order.*", Count: 2}, &out, &log)
	waitFor(t, "tail following", time.Minute, func() bool { return strings.Contains(log.String(), "msg=following") })
	if !strings.Contains(log.String(), "the relay sees none of them as unroutable") {
		t.Errorf("no warning that tail's queue makes events routable:\n%s", log.String())
	}

	queues, err := n.Ctl("-q", "list_queues", "name", "exclusive", "auto_delete", "durable", "arguments")
	if err != nil {
		t.Fatal(err)
	}
	var tq string
	for _, l := range strings.Split(queues, "\n") {
		if strings.HasPrefix(l, "cdc-relay.tail.") {
			tq = l
		}
	}
	for _, want := range []string{"true\ttrue\tfalse", `{"x-max-length",10000}`, `{"x-overflow","drop-head"}`, `{"x-max-length-bytes",16777216}`} {
		if !strings.Contains(tq, want) {
			t.Errorf("tail's queue %q: want %s", tq, want)
		}
	}

	ts := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	publish(t, ch, ex, "customer.created", amqp.Publishing{MessageId: "skip", Body: []byte(`{}`)})
	publish(t, ch, ex, "order.created", amqp.Publishing{MessageId: "e1", Type: "order.created", Timestamp: ts, ContentType: "application/json",
		AppId: "cdc-relay", DeliveryMode: amqp.Persistent, Body: []byte(`{"total": 5}`),
		Headers: amqp.Table{"aggregate_id": "o-1", "aggregate_type": "order", "traceparent": "00-abc-def-01", "n": int32(7)}})
	publish(t, ch, ex, "order.paid", amqp.Publishing{MessageId: "e2", Body: []byte("plain text")})
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	got := lines(t, out.String())
	if len(got) != 2 {
		t.Fatalf("lines: %d, want 2 (order.* only, Count 2):\n%s", len(got), out.String())
	}
	first, _ := json.Marshal(got[0])
	want := `{"app_id":"cdc-relay","content_type":"application/json","delivery_mode":2,"exchange":"` + ex + `","headers":{"aggregate_id":"o-1","aggregate_type":"order","n":"7","traceparent":"00-abc-def-01"},"key":"o-1","message_id":"e1","offset":null,"partition":null,"routing_key":"order.created","schema_id":null,"stream":null,"subject":null,"timestamp":"2026-12-01T10:00:00.000Z","topic":null,"type":"order.created","value":{"total":5}}`
	if string(first) != want {
		t.Errorf("first line:\n got %s\nwant %s", first, want)
	}
	if got[1]["value"] != "plain text" || got[1]["message_id"] != "e2" || got[1]["timestamp"] != nil {
		t.Errorf("second line: %v", got[1])
	}
	// The temporary queue went with tail's connection.
	waitFor(t, "tail's queue deleted", 30*time.Second, func() bool {
		q, err := n.Ctl("-q", "list_queues", "name")
		return err == nil && !strings.Contains(q, "cdc-relay.tail.")
	})
}

// blockingWriter blocks every write until release is closed.
type blockingWriter struct {
	release chan struct{}
	n       atomic.Int64
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	<-w.release
	w.n.Add(int64(bytes.Count(p, []byte("\n"))))
	return len(p), nil
}

// TestTailRabbitMQSlowDropsOldest: a tail that does not read keeps at most
// MaxLength messages in the broker, dropping the oldest, and the relay's
// publishing goes on.
func TestTailRabbitMQSlowDropsOldest(t *testing.T) {
	n := rabbit.Node(t)
	ex := fresh("tail-slow")
	ch := amqpChannel(t, n.URL())
	if err := ch.ExchangeDeclare(ex, amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := &blockingWriter{release: make(chan struct{})}
	var log relaytest.LogBuffer
	wait := startTail(t, ctx, RabbitMQConfig{URL: n.URL(), Exchange: ex, MaxLength: 20}, w, &log)
	waitFor(t, "tail following", time.Minute, func() bool { return strings.Contains(log.String(), "msg=following") })
	const sent = 500
	for i := range sent {
		publish(t, ch, ex, "k", amqp.Publishing{MessageId: strconv.Itoa(i), Body: []byte(strconv.Itoa(i))})
	}
	// Tail holds at most its prefetch unacked; its queue at most 20 ready.
	var ready, unacked int
	waitFor(t, "the queue at its cap", 30*time.Second, func() bool {
		q, err := n.Ctl("-q", "list_queues", "name", "messages_ready", "messages_unacknowledged")
		if err != nil {
			return false
		}
		for _, l := range strings.Split(q, "\n") {
			if f := strings.Fields(l); len(f) == 3 && strings.HasPrefix(f[0], "cdc-relay.tail.") {
				ready, _ = strconv.Atoi(f[1])
				unacked, _ = strconv.Atoi(f[2])
			}
		}
		return ready == 20
	})
	if unacked > rabbitPrefetch {
		t.Errorf("unacked %d, want at most the prefetch %d", unacked, rabbitPrefetch)
	}
	close(w.release)
	waitFor(t, "tail printed what the queue kept", 30*time.Second, func() bool { return w.n.Load() >= int64(unacked+ready) })
	cancel()
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	if got := w.n.Load(); got >= sent || got > int64(rabbitPrefetch+20) {
		t.Errorf("printed %d of %d: want at most prefetch + cap = %d (the oldest dropped)", got, sent, rabbitPrefetch+20)
	}
}

// TestTailRabbitMQStream: a stream is read by name without consuming it,
// from its beginning to its end as of the start, a second time alike, and
// followed; --from-beginning on an exchange, and a queue that is not a
// stream, are configuration errors, and the queue keeps its message.
func TestTailRabbitMQStream(t *testing.T) {
	n := rabbit.Node(t)
	st, ex, cq := fresh("tail-stream"), fresh("tail-ex"), fresh("tail-classic")
	ch := amqpChannel(t, n.URL())
	if _, err := ch.QueueDeclare(st, true, false, false, false, amqp.Table{"x-queue-type": "stream"}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		// An event may have the type "marker": it is no end marker.
		publish(t, ch, "", st, amqp.Publishing{MessageId: "m" + strconv.Itoa(i), Type: "marker", Body: []byte(`{"i":` + strconv.Itoa(i) + `}`),
			Headers: amqp.Table{"error_kind": "unroutable"}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for round := range 2 {
		var out, log relaytest.LogBuffer
		if err := startTail(t, ctx, RabbitMQConfig{URL: n.URL(), Stream: st, Start: FromBeginning}, &out, &log)(); err != nil {
			t.Fatal(err)
		}
		got := lines(t, out.String())
		if len(got) != 3 {
			t.Fatalf("round %d: %d lines, want 3:\n%s", round, len(got), out.String())
		}
		for i, l := range got {
			if l["offset"] != float64(i) || l["message_id"] != "m"+strconv.Itoa(i) || l["type"] != "marker" || l["stream"] != st || l["routing_key"] != st {
				t.Errorf("round %d line %d: %v", round, i, l)
			}
			if hs := l["headers"].(map[string]any); hs["error_kind"] != "unroutable" || hs["x-stream-offset"] != nil {
				t.Errorf("round %d line %d headers: %v", round, i, hs)
			}
		}
	}
	// Since a time: a time past the stream's end finds nothing, one before
	// its start everything.
	for _, c := range []struct {
		since time.Time
		want  int
	}{{time.Now().Add(time.Hour), 0}, {time.Now().Add(-time.Hour), 3}} {
		var out, log relaytest.LogBuffer
		if err := startTail(t, ctx, RabbitMQConfig{URL: n.URL(), Stream: st, Start: FromTime, Since: c.since}, &out, &log)(); err != nil {
			t.Fatal(err)
		}
		if got := lines(t, out.String()); len(got) != c.want {
			t.Errorf("since %s: %d lines, want %d", c.since, len(got), c.want)
		}
	}
	// From an offset, following: the rest and what comes.
	var out, log relaytest.LogBuffer
	wait := startTail(t, ctx, RabbitMQConfig{URL: n.URL(), Stream: st, Start: FromOffsets, Offset: 2, Follow: true, Count: 2}, &out, &log)
	publish(t, ch, "", st, amqp.Publishing{MessageId: "m3"})
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	if got := lines(t, out.String()); len(got) != 2 || got[0]["message_id"] != "m2" || got[1]["message_id"] != "m3" {
		t.Errorf("from offset 2, following: %s", out.String())
	}

	if err := ch.ExchangeDeclare(ex, amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(cq, true, false, false, false, amqp.Table{"x-queue-type": "classic"}); err != nil {
		t.Fatal(err)
	}
	publish(t, ch, "", cq, amqp.Publishing{MessageId: "keep"})
	for _, c := range []struct {
		cfg     RabbitMQConfig
		key     string
		message string
	}{
		{RabbitMQConfig{Exchange: ex, Start: FromBeginning}, "from-beginning", "is not a stream"},
		{RabbitMQConfig{Exchange: ex, Start: FromTime, Since: time.Now()}, "since", "is not a stream"},
		{RabbitMQConfig{Stream: cq, Start: FromBeginning}, "stream", "not a stream"},
		{RabbitMQConfig{Stream: cq + "-missing", Start: FromBeginning}, "stream", "does not exist"},
		{RabbitMQConfig{Exchange: ex + "-missing"}, "rabbitmq-exchange", "does not exist"},
	} {
		c.cfg.URL = n.URL()
		var out, log relaytest.LogBuffer
		err := startTail(t, ctx, c.cfg, &out, &log)()
		var cerr *relay.ConfigError
		if !errors.As(err, &cerr) || cerr.Key != c.key || !strings.Contains(err.Error(), c.message) {
			t.Errorf("%+v: %v, want a ConfigError for %s saying %q", c.cfg, err, c.key, c.message)
		}
	}
	q, err := ch.QueueDeclarePassive(cq, true, false, false, false, nil)
	if err != nil || q.Messages != 1 {
		t.Errorf("classic queue after tail refused it: %+v, %v; want its 1 message kept", q, err)
	}
}
