package dlq

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/cdc-relay/cdc-relay/internal/rabbittest"
	"github.com/cdc-relay/cdc-relay/internal/relaytest"
	"github.com/cdc-relay/cdc-relay/relay"
)

var rabbit rabbittest.Shared

func TestMain(m *testing.M) { os.Exit(rabbit.Run(m)) }

// deadLetter is a dead letter as the relay writes one to its stream,
// written here by a plain amqp091 publisher.
type deadLetter struct {
	id, eventType, kind, routingKey string
	age                             time.Duration
}

func (dl deadLetter) publishing(now time.Time, exchange string) amqp.Publishing {
	h := amqp.Table{"id": dl.id, "event_type": dl.eventType, "aggregate_type": "order", "aggregate_id": "o-" + dl.id,
		"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "error_kind": dl.kind, "error": "why " + dl.id}
	if dl.routingKey != "" {
		h["exchange"], h["routing_key"] = exchange, dl.routingKey
	} else {
		h["outbox_row"] = `{"table":"public.outbox"}`
	}
	return amqp.Publishing{MessageId: dl.id, Type: dl.eventType, Timestamp: now.Add(-dl.age).Truncate(time.Second), ContentType: "application/json",
		AppId: "cdc-relay", DeliveryMode: amqp.Persistent, Headers: h, Body: []byte(`{"order":"` + dl.id + `"}`)}
}

// dlqTopology declares on n an exchange, a queue bound to it with
// order.* and a dead-letter stream, named after prefix and a suffix of
// their own, and returns them with a confirm channel.
func dlqTopology(t *testing.T, n *rabbittest.Node, prefix string) (ch *amqp.Channel, ex, st, bound string) {
	t.Helper()
	sfx := prefix + strconv.FormatInt(time.Now().UnixNano()%1e7, 10)
	ex, st, bound = "outbox-"+sfx, "dlq-"+sfx, "orders-"+sfx
	ch = n.Channel(t)
	if err := ch.ExchangeDeclare(ex, amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(bound, true, false, false, false, amqp.Table{"x-queue-type": "classic"}); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(bound, "order.*", ex, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(st, true, false, false, false, amqp.Table{"x-queue-type": "stream"}); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	return ch, ex, st, bound
}

// TestRabbitMQDeadLetters: stats, retire and redrive on a dead-letter
// stream, which stays as it was; their positions are in the broker, so a
// second run does nothing twice.
func TestRabbitMQDeadLetters(t *testing.T) {
	n := rabbit.Node(t)
	ch, ex, st, bound := dlqTopology(t, n, "")
	now := time.Now()
	letters := []deadLetter{
		{"e0", "order.created", "unroutable", "order.created", 3 * time.Hour},
		{"e1", "invoice.sent", "unroutable", "invoice.sent", 2 * time.Hour}, // still unroutable
		{"e2", "order.created", "schema_mismatch", "", 30 * time.Minute},    // the row's payload
		{"e3", "order.paid", "unroutable", "order.paid", 20 * time.Minute},
		{"e4", "order.shipped", "unroutable", "order.shipped", 10 * time.Minute}, // retired
	}
	for _, dl := range letters {
		dc, err := ch.PublishWithDeferredConfirm("", st, true, false, dl.publishing(now, ex))
		if err != nil || !dc.Wait() {
			t.Fatalf("write dead letter %s: %v", dl.id, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := RabbitMQConfig{URL: n.URL(), Stream: st, Exchange: ex}

	stats := func(when string, pending, redriven, retired int) *Counts {
		t.Helper()
		c, err := CountRabbitMQ(ctx, cfg, now)
		if err != nil {
			t.Fatalf("%s: stats: %v", when, err)
		}
		if c.InTopic != len(letters) || c.Pending != pending || c.Redriven != redriven || c.Retired != retired {
			t.Errorf("%s: stats in stream %d pending %d redriven %d retired %d; want %d, %d, %d, %d",
				when, c.InTopic, c.Pending, c.Redriven, c.Retired, len(letters), pending, redriven, retired)
		}
		return c
	}
	c := stats("first", 5, 0, 0)
	if c.Kinds["unroutable"] != 4 || c.Kinds["schema_mismatch"] != 1 || c.EventTypes["order.created"] != 2 || c.Ages["24h"] != 2 || c.Ages["1h"] != 3 {
		t.Errorf("first stats: kinds %v event types %v ages %v", c.Kinds, c.EventTypes, c.Ages)
	}
	if want := now.Add(-3 * time.Hour).Truncate(time.Second).UTC(); c.Oldest == nil || !c.Oldest.Equal(want) {
		t.Errorf("oldest %v, want %v", c.Oldest, want)
	}
	var out bytes.Buffer
	PrintCounts(&out, c)
	if !strings.Contains(out.String(), st+": 5 dead letters pending (5 in the stream; positions in "+st+".positions)") {
		t.Errorf("PrintCounts:\n%s", out.String())
	}

	// Retire e4, twice: the second time it is already retired.
	for i, want := range [][2]int{{1, 0}, {0, 1}} {
		out.Reset()
		rt := &RabbitRetirer{Config: cfg, Filters: Filters{HasID: true, ID: "e4"}, Reason: "obsolete", Stdout: &out}
		if err := rt.Run(ctx); err != nil {
			t.Fatal(err)
		}
		if rt.Retired != want[0] || rt.Already != want[1] || rt.Filtered != 4 {
			t.Errorf("retire %d: retired %d already %d filtered %d; want %v, 4 filtered\n%s", i, rt.Retired, rt.Already, rt.Filtered, want, out.String())
		}
	}
	stats("after retire", 4, 0, 1)

	// A dry run publishes nothing; --kind leaves the others pending.
	redrive := func(f Filters) (RabbitRedriven, int) {
		out.Reset()
		return RedriveRabbitMQ(ctx, RabbitRedriveOptions{Config: cfg, Filters: f, Stdout: &out, Stderr: &out})
	}
	res, code := redrive(Filters{DryRun: true})
	if code != 0 || res.Redriven != 3 || res.NotBuilt != 1 || res.Done != 1 {
		t.Errorf("dry run: %+v, exit %d\n%s", res, code, out.String())
	}
	res, code = redrive(Filters{HasKind: true, Kind: "too_large"})
	if code != 0 || res.Redriven != 0 || res.Filtered != 4 {
		t.Errorf("--kind too_large: %+v, exit %d\n%s", res, code, out.String())
	}
	if q, err := ch.QueueDeclarePassive(bound, true, false, false, false, nil); err != nil || q.Messages != 0 {
		t.Fatalf("bound queue after the dry run and the filtered run: %+v, %v; want empty", q, err)
	}

	for round := range 2 {
		res, code = redrive(Filters{})
		want := RabbitRedriven{Redriven: 2, Failing: 1, NotBuilt: 1, Done: 1}
		if round == 1 {
			want = RabbitRedriven{Failing: 1, NotBuilt: 1, Done: 3}
		}
		if res != want || code != relay.ExitFailed {
			t.Errorf("redrive %d: %+v (exit %d), want %+v (exit 1)\n%s", round, res, code, want, out.String())
		}
		if !strings.Contains(out.String(), "still failing id=e1 offset=1 exchange="+ex+" routing_key=invoice.sent reason=\"unroutable") {
			t.Errorf("redrive %d: no still-failing line for e1:\n%s", round, out.String())
		}
		stats("after redrive "+strconv.Itoa(round), 2, 2, 1)
	}

	// The bound queue got e0 and e3 once each, as the events were.
	rch := n.Channel(t)
	var got []amqp.Delivery
	for {
		d, ok, err := rch.Get(bound, true)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		got = append(got, d)
	}
	if len(got) != 2 || got[0].MessageId != "e0" || got[1].MessageId != "e3" {
		t.Fatalf("bound queue: %d messages %v, want e0 and e3", len(got), got)
	}
	d := got[0]
	if d.RoutingKey != "order.created" || d.Type != "order.created" || d.DeliveryMode != amqp.Persistent || d.AppId != "cdc-relay" ||
		d.ContentType != "application/json" || string(d.Body) != `{"order":"e0"}` || !d.Timestamp.Equal(now.Add(-3*time.Hour).Truncate(time.Second)) {
		t.Errorf("redriven e0: %+v", d)
	}
	for _, h := range []string{"error_kind", "error", "exchange", "routing_key", "outbox_row", "x-stream-offset"} {
		if _, ok := d.Headers[h]; ok {
			t.Errorf("redriven e0 has dead-letter header %s: %v", h, d.Headers)
		}
	}
	for _, h := range []string{"id", "event_type", "aggregate_type", "aggregate_id", "traceparent"} {
		if _, ok := d.Headers[h]; !ok {
			t.Errorf("redriven e0 lacks header %s: %v", h, d.Headers)
		}
	}
}

// TestRabbitMQRedriveFollow: redrive --follow sends the pending letter of
// its start, then one appended while it runs, and ends when ctx does with
// exit 0; a letter dead-lettered after it ended is left for the next run.
func TestRabbitMQRedriveFollow(t *testing.T) {
	n := rabbit.Node(t)
	ch, ex, st, bound := dlqTopology(t, n, "f")
	now := time.Now()
	write := func(dl deadLetter) {
		t.Helper()
		dc, err := ch.PublishWithDeferredConfirm("", st, true, false, dl.publishing(now, ex))
		if err != nil || !dc.Wait() {
			t.Fatalf("write dead letter %s: %v", dl.id, err)
		}
	}
	queued := func() int {
		t.Helper()
		q, err := ch.QueueDeclarePassive(bound, true, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		return q.Messages
	}
	write(deadLetter{"f0", "order.created", "unroutable", "order.created", time.Hour})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out relaytest.LogBuffer
	type result struct {
		res  RabbitRedriven
		code int
	}
	done := make(chan result, 1)
	go func() {
		res, code := RedriveRabbitMQ(ctx, RabbitRedriveOptions{Config: RabbitMQConfig{URL: n.URL(), Stream: st, Exchange: ex},
			Filters: Filters{Follow: true}, Stdout: &out, Stderr: &out})
		done <- result{res, code}
	}()
	relaytest.WaitFor(t, time.Minute, "the letter of the start redriven", func() bool { return queued() == 1 })
	write(deadLetter{"f1", "order.paid", "unroutable", "order.paid", 0})
	relaytest.WaitFor(t, time.Minute, "the letter appended while following redriven", func() bool { return queued() == 2 })
	select {
	case r := <-done:
		t.Fatalf("redrive --follow ended by itself: %+v, exit %d\n%s", r.res, r.code, out.String())
	default:
	}
	cancel()
	var r result
	select {
	case r = <-done:
	case <-time.After(time.Minute):
		t.Fatalf("redrive --follow did not end with its context:\n%s", out.String())
	}
	if r.code != 0 || r.res != (RabbitRedriven{Redriven: 2}) || !strings.Contains(out.String(), "redrive: redriven 2, still failing 0, skipped 0") {
		t.Fatalf("redrive --follow: %+v, exit %d\n%s", r.res, r.code, out.String())
	}

	// The next run finds both redriven, and sends only what came since.
	write(deadLetter{"f2", "order.shipped", "unroutable", "order.shipped", 0})
	res, code := RedriveRabbitMQ(context.Background(), RabbitRedriveOptions{Config: RabbitMQConfig{URL: n.URL(), Stream: st, Exchange: ex},
		Stdout: &out, Stderr: &out})
	if code != 0 || res != (RabbitRedriven{Redriven: 1, Done: 2}) || queued() != 3 {
		t.Fatalf("the run after --follow: %+v, exit %d, %d in the queue, want 1 redriven, 2 before, 3 queued\n%s", res, code, queued(), out.String())
	}
}
