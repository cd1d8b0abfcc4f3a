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

// TestRabbitMQDeadLetters: stats, retire and redrive on a dead-letter
// stream, which stays as it was; their positions are in the broker, so a
// second run does nothing twice.
func TestRabbitMQDeadLetters(t *testing.T) {
	n := rabbit.Node(t)
	sfx := strconv.FormatInt(time.Now().UnixNano()%1e7, 10)
	ex, st, bound := "outbox-"+sfx, "dlq-"+sfx, "orders-"+sfx
	conn, err := amqp.Dial(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
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
	out.Reset()
	res, err := RedriveRabbitMQ(ctx, cfg, Filters{DryRun: true}, &out)
	if err != nil || res.Redriven != 3 || res.NotAsIs != 1 || res.Done != 1 {
		t.Errorf("dry run: %+v, %v\n%s", res, err, out.String())
	}
	out.Reset()
	res, err = RedriveRabbitMQ(ctx, cfg, Filters{HasKind: true, Kind: "too_large"}, &out)
	if err != nil || res.Redriven != 0 || res.Filtered != 4 {
		t.Errorf("--kind too_large: %+v, %v\n%s", res, err, out.String())
	}
	if q, err := ch.QueueDeclarePassive(bound, true, false, false, false, nil); err != nil || q.Messages != 0 {
		t.Fatalf("bound queue after the dry run and the filtered run: %+v, %v; want empty", q, err)
	}

	for round := range 2 {
		out.Reset()
		res, err = RedriveRabbitMQ(ctx, cfg, Filters{}, &out)
		if err != nil {
			t.Fatalf("redrive %d: %v", round, err)
		}
		want := RabbitRedriven{Redriven: 2, Failing: 1, NotAsIs: 1, Done: 1}
		if round == 1 {
			want = RabbitRedriven{Failing: 1, NotAsIs: 1, Done: 3}
		}
		if res != want || res.ExitCode() != relay.ExitFailed {
			t.Errorf("redrive %d: %+v (exit %d), want %+v (exit 1)\n%s", round, res, res.ExitCode(), want, out.String())
		}
		if !strings.Contains(out.String(), "still failing id=e1 offset=1 exchange="+ex+" routing_key=invoice.sent reason=\"unroutable") {
			t.Errorf("redrive %d: no still-failing line for e1:\n%s", round, out.String())
		}
		stats("after redrive "+strconv.Itoa(round), 2, 2, 1)
	}

	// The bound queue got e0 and e3 once each, as the events were.
	rch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
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
