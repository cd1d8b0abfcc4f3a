package main

// The relay publishing to RabbitMQ: a private node (internal/rabbittest),
// shared by the package's RabbitMQ tests, each with its own exchange,
// queues and streams; what arrives is read by a plain amqp091-go consumer,
// not by the relay's code.

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/cdc-relay/cdc-relay/internal/rabbittest"
	"github.com/cdc-relay/cdc-relay/internal/relaytest"
)

// sharedRabbit is the package's RabbitMQ node, started by the first test
// that needs it; testMain closes it.
var sharedRabbit rabbittest.Shared

// needRabbit is the package's RabbitMQ node; the test fails if it cannot
// start (and skips while the service tier is off).
func needRabbit(t *testing.T) *rabbittest.Node { return sharedRabbit.Node(t) }

// rabbitArgs are the relay flags for the fixture on RabbitMQ: its own
// exchange, dead-letter stream and checkpoint streams; JSON values unless
// extra sets --value-format.
func (f *fixture) rabbitArgs(n *rabbittest.Node, extra ...string) []string {
	if !slices.Contains(extra, "--value-format") {
		extra = append([]string{"--value-format", "json"}, extra...)
	}
	return append([]string{"run",
		"--pg-url", f.pg.url,
		"--slot", f.slot,
		"--publication", f.publication,
		"--table", "public." + f.table,
		"--rabbitmq-url", n.URL(),
		"--rabbitmq-exchange", f.exchange(),
		"--rabbitmq-dlq-stream", f.exchange() + ".dlq",
		"--rabbitmq-checkpoint-stream", f.exchange() + ".checkpoints",
		"--log-level", "debug",
	}, extra...)
}

func (f *fixture) exchange() string { return "x" + f.name }

// bindQueue declares the fixture's exchange as the relay does (a durable
// topic exchange) and a queue bound to it with key, and returns the queue
// name.
func (f *fixture) bindQueue(ch *amqp.Channel, key string) string {
	f.t.Helper()
	f.declareExchange(ch)
	q := f.exchange() + ".q" + randSuffix()
	if _, err := ch.QueueDeclare(q, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
		f.t.Fatal(err)
	}
	if err := ch.QueueBind(q, key, f.exchange(), false, nil); err != nil {
		f.t.Fatal(err)
	}
	return q
}

// collect consumes queue (a stream from its first offset when stream is
// true) into a list the returned function reads.
func collect(t *testing.T, n *rabbittest.Node, queue string, stream bool) func() []amqp.Delivery {
	t.Helper()
	ch := n.Channel(t)
	if err := ch.Qos(500, 0, false); err != nil {
		t.Fatal(err)
	}
	var args amqp.Table
	if stream {
		args = amqp.Table{"x-stream-offset": "first"}
	}
	msgs, err := ch.Consume(queue, "", false, false, false, false, args)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []amqp.Delivery
	go func() {
		for d := range msgs {
			d.Ack(false)
			mu.Lock()
			got = append(got, d)
			mu.Unlock()
		}
	}()
	return func() []amqp.Delivery {
		mu.Lock()
		defer mu.Unlock()
		return append([]amqp.Delivery(nil), got...)
	}
}

// waitSlotPast waits until the slot's confirmed_flush_lsn reaches lsn.
func (f *fixture) waitSlotPast(lsn uint64, timeout time.Duration) {
	f.t.Helper()
	waitFor(f.t, timeout, fmt.Sprintf("confirmed_flush_lsn past %X", lsn), func() bool { return f.confirmedFlush() >= lsn })
}

// rabbitRelay starts a fixture's relay on RabbitMQ with extra flags, once
// a queue is bound to its exchange with bindKey; it returns what the
// queue received so far, read by a plain consumer.
func rabbitRelay(t *testing.T, bindKey string, extra ...string) (*fixture, *rabbittest.Node, func() []amqp.Delivery, *relay) {
	t.Helper()
	n := needRabbit(t)
	f := newFixture(t, "")
	got := collect(t, n, f.bindQueue(n.Channel(t), bindKey), false)
	r := startRelay(t, f.rabbitArgs(n, extra...))
	r.waitStreaming(60 * time.Second)
	return f, n, got, r
}

// TestRabbitMQEndToEnd: rows inserted by concurrent writers arrive in a
// queue bound to the exchange, each a persistent message with message_id,
// type, timestamp, content_type, app_id, the routing key of its event type
// and the headers of the Kafka record plus aggregate_id and
// aggregate_type, its body the payload; in commit order per aggregate; and
// the slot is confirmed past them.
func TestRabbitMQEndToEnd(t *testing.T) {
	t.Parallel()
	f, _, got, r := rabbitRelay(t, "#")

	const writers, perWriter = 3, 200
	type inserted struct {
		aggID, evType, payload, headers string
		created                         time.Time
	}
	all := map[string]inserted{} // by id
	f.runWriters(writers, perWriter, func(w, done int) []event {
		evs := make([]event, 1+done%7)
		for i := range evs {
			agg := uuidFor(w*1000 + (done+i)%5) // each writer owns 5 aggregates
			evType, payload := "OrderCreated", orderCreated(agg, done+i)
			if (done+i)%3 == 0 {
				evType, payload = "OrderCancelled", orderCancelled(agg, done+i)
			}
			evs[i] = event{AggregateType: "Order", AggregateID: agg, EventType: evType, Payload: payload,
				Headers: fmt.Sprintf(`{"traceparent": "00-%032x-%016x-01", "attempt": %d}`, done+i, w+1, i)}
		}
		return evs
	}, func(_ int, evs []event, ids []int64, began time.Time) {
		for i, id := range ids {
			all[strconv.FormatInt(id, 10)] = inserted{evs[i].AggregateID, evs[i].EventType, evs[i].Payload, evs[i].Headers, began}
		}
	})
	end := currentLSN(t, f.connect())
	waitFor(t, 120*time.Second, "every event in the queue", func() bool { return len(got()) >= writers*perWriter })

	lastByAgg := map[string]int64{}
	seen := map[string]bool{}
	for _, d := range got() {
		in, ok := all[d.MessageId]
		if !ok {
			t.Fatalf("message_id %q is no inserted id", d.MessageId)
		}
		if seen[d.MessageId] {
			continue // at least once: a duplicate is allowed, never a gap
		}
		seen[d.MessageId] = true
		if d.DeliveryMode != amqp.Persistent || d.Type != in.evType || d.ContentType != "application/json" || d.AppId != "cdc-relay" ||
			d.Exchange != f.exchange() || d.RoutingKey != in.evType {
			t.Fatalf("message %s: delivery mode %d, type %q, content type %q, app id %q, exchange %q, routing key %q",
				d.MessageId, d.DeliveryMode, d.Type, d.ContentType, d.AppId, d.Exchange, d.RoutingKey)
		}
		// The commit time, in whole seconds, after the insert began.
		if d.Timestamp.Before(in.created.Truncate(time.Second)) || d.Timestamp.After(time.Now()) {
			t.Fatalf("message %s: timestamp %s, inserted at %s", d.MessageId, d.Timestamp, in.created)
		}
		var rowHeaders map[string]any
		json.Unmarshal([]byte(in.headers), &rowHeaders)
		want := map[string]string{"id": d.MessageId, "event_type": in.evType, "aggregate_type": "Order", "aggregate_id": in.aggID,
			"traceparent": rowHeaders["traceparent"].(string), "attempt": fmt.Sprint(rowHeaders["attempt"])}
		if len(d.Headers) != len(want) {
			t.Fatalf("message %s: headers %v, want %v", d.MessageId, d.Headers, want)
		}
		for k, v := range want {
			if d.Headers[k] != v {
				t.Fatalf("message %s: header %s = %v, want %q", d.MessageId, k, d.Headers[k], v)
			}
		}
		if !jsonEqual(d.Body, []byte(in.payload)) {
			t.Fatalf("message %s: body %s, want %s", d.MessageId, d.Body, in.payload)
		}
		id, _ := strconv.ParseInt(d.MessageId, 10, 64)
		if id < lastByAgg[in.aggID] {
			t.Fatalf("aggregate %s: event %d after %d, out of commit order", in.aggID, id, lastByAgg[in.aggID])
		}
		lastByAgg[in.aggID] = id
	}
	if len(seen) != len(all) {
		t.Fatalf("%d of %d events arrived", len(seen), len(all))
	}
	f.waitSlotPast(end, 60*time.Second)
	if code := r.terminate(); code != 0 {
		t.Fatalf("exit %d after SIGTERM", code)
	}
	if out := r.Output(); !strings.Contains(out, "rabbitmq_url=amqp://guest:xxxxx@") || strings.Contains(out, ":guest@") {
		t.Fatalf("the log does not redact the password of --rabbitmq-url:\n%s", tailString(out, 3000))
	}
}

// TestRabbitMQDeadLetters: with --routing-key '{aggregate_id}', an event
// whose key a queue is bound to arrives there; one no queue is bound for is
// returned and becomes a dead letter of kind unroutable in the dead-letter
// stream; one whose 300-byte aggregate id makes too long a key becomes a
// dead letter of kind invalid_routing_key. Both are counted, and the slot
// is confirmed past all three.
func TestRabbitMQDeadLetters(t *testing.T) {
	t.Parallel()
	f, n, delivered, r := rabbitRelay(t, "bound-1", "--routing-key", "{aggregate_id}")

	long := strings.Repeat("l", 300)
	ids, err := f.insertTx(context.Background(), f.connect(), []event{
		{AggregateType: "Order", AggregateID: "bound-1", EventType: "OrderCreated", Payload: `{"n": 1}`},
		{AggregateType: "Order", AggregateID: "nobody-1", EventType: "OrderCreated", Payload: `{"n": 2}`},
		{AggregateType: "Order", AggregateID: long, EventType: "OrderCreated", Payload: `{"n": 3}`},
	})
	if err != nil {
		t.Fatal(err)
	}
	end := currentLSN(t, f.connect())
	waitFor(t, 60*time.Second, "the routable event", func() bool { return len(delivered()) >= 1 })
	if d := delivered()[0]; d.MessageId != strconv.FormatInt(ids[0], 10) || d.RoutingKey != "bound-1" {
		t.Fatalf("delivered %s with key %s, want %d with key bound-1", d.MessageId, d.RoutingKey, ids[0])
	}
	// The stream exists once the relay declared it.
	dlq := collect(t, n, f.exchange()+".dlq", true)
	waitFor(t, 60*time.Second, "two dead letters", func() bool { return len(dlq()) >= 2 })
	kinds := map[string]amqp.Delivery{}
	for _, d := range dlq() {
		kind, _ := d.Headers["error_kind"].(string)
		kinds[kind] = d
	}
	un, inv := kinds["unroutable"], kinds["invalid_routing_key"]
	if un.MessageId != strconv.FormatInt(ids[1], 10) || un.Headers["routing_key"] != "nobody-1" || un.Headers["exchange"] != f.exchange() ||
		un.Headers["aggregate_id"] != "nobody-1" || string(un.Body) != `{"n":2}` || un.Type != "OrderCreated" {
		t.Fatalf("unroutable dead letter: %s %v %s", un.MessageId, un.Headers, un.Body)
	}
	if reason, _ := un.Headers["error"].(string); !strings.Contains(reason, "no queue is bound") {
		t.Fatalf("unroutable reason %q", reason)
	}
	if inv.MessageId != strconv.FormatInt(ids[2], 10) || inv.Headers["aggregate_id"] != long {
		t.Fatalf("invalid_routing_key dead letter: %s %v", inv.MessageId, inv.Headers)
	}
	if reason, _ := inv.Headers["error"].(string); !strings.Contains(reason, "300 bytes") {
		t.Fatalf("invalid_routing_key reason %q", reason)
	}
	r.waitMetric("cdc_relay_rabbitmq_unroutable_total", 10*time.Second, func(v float64) bool { return v == 1 })
	r.waitMetric("cdc_relay_dlq_events_total", 10*time.Second, func(v float64) bool { return v == 2 })
	f.waitSlotPast(end, 60*time.Second)
	if len(delivered()) != 1 {
		t.Fatalf("%d messages in the bound queue, want 1", len(delivered()))
	}
}

// TestRabbitMQInvalidEventLog: an invalid event (an empty aggregate id)
// lands in the dead-letter stream with its error_kind, and the relay's
// WARN says it went to the dead-letter stream, naming it under
// dlq_stream, never a dead-letter topic.
func TestRabbitMQInvalidEventLog(t *testing.T) {
	t.Parallel()
	f, n, delivered, r := rabbitRelay(t, "#")
	ids, err := f.insertTx(context.Background(), f.connect(), []event{{AggregateType: "Order", AggregateID: "", EventType: "OrderCreated", Payload: `{"n": 1}`}})
	if err != nil {
		t.Fatal(err)
	}
	dlq := collect(t, n, f.exchange()+".dlq", true)
	waitFor(t, 60*time.Second, "the dead letter", func() bool { return len(dlq()) >= 1 })
	if d := dlq()[0]; d.MessageId != strconv.FormatInt(ids[0], 10) || d.Headers["error_kind"] != "empty_aggregate_id" {
		t.Fatalf("dead letter %s %v, want %d of kind empty_aggregate_id", d.MessageId, d.Headers, ids[0])
	}
	line := linesWith(r.Output(), "invalid event sent to")
	if !strings.Contains(line, "invalid event sent to the dead-letter stream") || !strings.Contains(line, "dlq_stream="+f.exchange()+".dlq") ||
		strings.Contains(r.Output(), "dead-letter topic") || strings.Contains(line, "dlq_topic") {
		t.Fatalf("the WARN for the invalid event does not name the dead-letter stream:\n%s", line)
	}
	if len(delivered()) != 0 {
		t.Fatalf("%d messages reached the exchange's queue, want 0", len(delivered()))
	}
}

// TestRabbitMQExchangeOfAnotherType: an existing fanout exchange named
// like --rabbitmq-exchange makes run exit 2, naming it.
func TestRabbitMQExchangeOfAnotherType(t *testing.T) {
	t.Parallel()
	n := needRabbit(t)
	f := newFixture(t, "")
	ch := n.Channel(t)
	if err := ch.ExchangeDeclare(f.exchange(), amqp.ExchangeFanout, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	r := startRelay(t, f.rabbitArgs(n))
	if code := r.wait(60 * time.Second); code != 2 {
		t.Fatalf("exit %d, want 2; output:\n%s", code, tailString(r.Output(), 3000))
	}
	if out := r.Output(); !strings.Contains(out, "--rabbitmq-exchange: exchange \""+f.exchange()+"\" exists with another type") {
		t.Fatalf("the message does not name the exchange:\n%s", tailString(out, 3000))
	}
}

// TestRabbitMQNothingDeclared: with --rabbitmq-declare=false the relay
// declares nothing, and an exchange that does not exist is exit 2 naming
// it.
func TestRabbitMQNothingDeclared(t *testing.T) {
	t.Parallel()
	n := needRabbit(t)
	f := newFixture(t, "")
	r := startRelay(t, f.rabbitArgs(n, "--rabbitmq-declare=false"))
	if code := r.wait(60 * time.Second); code != 2 {
		t.Fatalf("exit %d, want 2; output:\n%s", code, tailString(r.Output(), 3000))
	}
	if out := r.Output(); !strings.Contains(out, "--rabbitmq-exchange: exchange \""+f.exchange()+"\" does not exist, and the relay declares nothing") {
		t.Fatalf("the message does not name the exchange:\n%s", tailString(out, 3000))
	}
	if err := n.Channel(t).ExchangeDeclarePassive(f.exchange(), amqp.ExchangeTopic, true, false, false, false, nil); err == nil {
		t.Fatal("the relay declared the exchange")
	}
}

// TestRabbitMQKilledRelayLosesNothing: a relay killed (SIGKILL) while a
// writer inserts, then started again, leaves every event in the queue at
// least once, and the slot confirmed past them.
func TestRabbitMQKilledRelayLosesNothing(t *testing.T) {
	t.Parallel()
	f, n, got, r := rabbitRelay(t, "#")

	const total = 600
	conn := f.connect()
	want := map[string]bool{}
	insert := func(from, to int) {
		for i := from; i < to; i += 10 {
			evs := make([]event, 10)
			for j := range evs {
				evs[j] = event{AggregateType: "Order", AggregateID: uuidFor((i + j) % 7), EventType: "OrderCreated", Payload: orderCreated(uuidFor((i+j)%7), i+j)}
			}
			ids, err := f.insertTx(context.Background(), conn, evs)
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range ids {
				want[strconv.FormatInt(id, 10)] = true
			}
		}
	}
	insert(0, total/2)
	waitFor(t, 60*time.Second, "some events in the queue", func() bool { return len(got()) > 0 })
	r.kill()
	insert(total/2, total)
	r = startRelay(t, f.rabbitArgs(n))
	r.waitStreaming(60 * time.Second)
	end := currentLSN(t, conn)
	waitFor(t, 120*time.Second, "every event in the queue", func() bool {
		seen := map[string]bool{}
		for _, d := range got() {
			seen[d.MessageId] = true
		}
		for id := range want {
			if !seen[id] {
				return false
			}
		}
		return true
	})
	f.waitSlotPast(end, 60*time.Second)
	if code := r.terminate(); code != 0 {
		t.Fatalf("exit %d after SIGTERM", code)
	}
	// The checkpoint lives in RabbitMQ streams: the directory names this
	// relay's stream.
	for _, stream := range []string{".relays", ".gaps"} {
		if _, err := n.Channel(t).QueueDeclarePassive(f.exchange()+".checkpoints"+stream, true, false, false, false, nil); err != nil {
			t.Errorf("checkpoint stream %s: %v", stream, err)
		}
	}
}

// TestRabbitMQAvroCloudEvents: with --value-format avro the value is the
// Confluent wire format of the schema registered under the exchange's
// name (<exchange>-<record>, topic_record); with --cloudevents the
// attributes are cloudEvents_* headers and content_type is the data's.
func TestRabbitMQAvroCloudEvents(t *testing.T) {
	t.Parallel()
	relaytest.Need(t, registry)
	f, _, got, _ := rabbitRelay(t, "#", "--value-format", "avro", "--schema-registry-url", registry.URL(), "--schemas-dir", schemaDir,
		"--cloudevents", "--cloudevents-source", "/orders")
	agg := uuidFor(1)
	ids, err := f.insertTx(context.Background(), f.connect(), []event{{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the event", func() bool { return len(got()) >= 1 })
	d := got()[0]
	subject := f.exchange() + "-com.example.orders.OrderCreated"
	id := registry.LatestID(t, subject)
	if len(d.Body) < 5 || d.Body[0] != 0 || int(binary.BigEndian.Uint32(d.Body[1:5])) != id {
		t.Fatalf("body % x does not start with the wire-format header of schema %d (%s)", d.Body[:min(5, len(d.Body))], id, subject)
	}
	want := map[string]string{"cloudEvents_specversion": "1.0", "cloudEvents_id": strconv.FormatInt(ids[0], 10), "cloudEvents_source": "/orders",
		"cloudEvents_type": "OrderCreated", "cloudEvents_subject": agg}
	for k, v := range want {
		if d.Headers[k] != v {
			t.Errorf("header %s = %v, want %q", k, d.Headers[k], v)
		}
	}
	if _, ok := d.Headers["cloudEvents_time"]; !ok || d.ContentType != "application/avro" {
		t.Errorf("cloudEvents_time %v, content type %q", d.Headers["cloudEvents_time"], d.ContentType)
	}
	for k := range d.Headers {
		if strings.HasPrefix(k, "ce_") || k == "content-type" {
			t.Errorf("header %s is Kafka's", k)
		}
	}
}

// TestRabbitMQBlockedIsDegraded: a memory alarm on a node of the test's
// own pauses publishing: cdc_relay_rabbitmq_blocked is 1 and, after 10 s,
// /readyz answers degraded naming the alarm (from the publisher or the
// checkpoint writer, whichever degraded first); once the alarm clears, the event
// held back arrives and the relay is ready again.
func TestRabbitMQBlockedIsDegraded(t *testing.T) {
	t.Parallel()
	n := rabbittest.Own(t, rabbittest.Options{})
	f := newFixture(t, "")
	got := collect(t, n, f.bindQueue(n.Channel(t), "#"), false)
	r := startRelay(t, f.rabbitArgs(n))
	r.waitStreaming(60 * time.Second)
	if err := n.MemoryAlarm(true); err != nil {
		t.Fatal(err)
	}
	if _, err := f.insertTx(context.Background(), f.connect(), []event{{AggregateType: "Order", AggregateID: "a", EventType: "OrderCreated", Payload: `{"n": 1}`}}); err != nil {
		t.Fatal(err)
	}
	r.waitMetric("cdc_relay_rabbitmq_blocked", 30*time.Second, func(v float64) bool { return v == 1 })
	var body map[string]string
	waitFor(t, 60*time.Second, "/readyz degraded", func() bool {
		var code int
		code, body = r.getJSON("/readyz")
		return code == 503 && body["state"] == "degraded"
	})
	// The publisher's connection and the checkpoint store's are both
	// blocked; whichever degraded first gives the reason, and both name
	// the alarm.
	if !strings.Contains(body["reason"], "the broker has blocked publishing") {
		t.Fatalf("reason %q does not name the alarm", body["reason"])
	}
	if len(got()) != 0 {
		t.Fatalf("%d messages arrived while the broker blocked publishing", len(got()))
	}
	if err := n.MemoryAlarm(false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the event held back", func() bool { return len(got()) == 1 })
	r.waitMetric("cdc_relay_rabbitmq_blocked", 30*time.Second, func(v float64) bool { return v == 0 })
	waitFor(t, 30*time.Second, "/readyz ready", func() bool { code, _ := r.getJSON("/readyz"); return code == 200 })
}

// TestRabbitMQStartedDuringAlarm: a relay started during a memory alarm is
// blocked first on its checkpoint store's connection, which reads the
// checkpoint up to a marker it publishes, before any event is published:
// cdc_relay_rabbitmq_blocked is 1 then, and /readyz says the relay waits
// for RabbitMQ's checkpoint streams, naming neither Kafka nor a topic.
// Once the alarm clears the gauge is 0, the relay streams, and an event
// arrives.
func TestRabbitMQStartedDuringAlarm(t *testing.T) {
	t.Parallel()
	n := rabbittest.Own(t, rabbittest.Options{})
	f := newFixture(t, "")
	got := collect(t, n, f.bindQueue(n.Channel(t), "#"), false)
	if err := n.MemoryAlarm(true); err != nil {
		t.Fatal(err)
	}
	r := startRelay(t, f.rabbitArgs(n))
	r.waitMetric("cdc_relay_rabbitmq_blocked", 60*time.Second, func(v float64) bool { return v == 1 })
	if v, err := r.metric("cdc_relay_active"); err != nil || v != 0 {
		t.Fatalf("cdc_relay_active = %v (%v) during the alarm, want 0: the checkpoint cannot be read", v, err)
	}
	var body map[string]string
	waitFor(t, 30*time.Second, "/readyz waiting for the checkpoint streams", func() bool {
		var code int
		code, body = r.getJSON("/readyz")
		return code == 503 && body["state"] == "reconnecting"
	})
	if want := "waiting for RabbitMQ: the checkpoint streams cannot be read"; !strings.HasPrefix(body["reason"], want) ||
		strings.Contains(body["reason"], "Kafka") || strings.Contains(body["reason"], "topic") {
		t.Fatalf("/readyz reason %q, want it to begin %q and name neither Kafka nor a topic", body["reason"], want)
	}
	if err := n.MemoryAlarm(false); err != nil {
		t.Fatal(err)
	}
	r.waitMetric("cdc_relay_rabbitmq_blocked", 60*time.Second, func(v float64) bool { return v == 0 })
	r.waitStreaming(60 * time.Second)
	if _, err := f.insertTx(context.Background(), f.connect(), []event{{AggregateType: "Order", AggregateID: "a", EventType: "OrderCreated", Payload: `{"n": 1}`}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the event after the alarm", func() bool { return len(got()) == 1 })
	if code := r.terminate(); code != exitOK {
		t.Fatalf("exit code %d", code)
	}
}
