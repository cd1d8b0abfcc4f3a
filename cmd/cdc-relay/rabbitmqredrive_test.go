package main

// dlq redrive with --rabbitmq-url, run as the built binary: the letters
// that hold the row's payload go through today's row → record step and are
// published as run publishes them, as TestDLQRedrive and
// TestDLQRedriveFollow do on Kafka. What arrives is read by a plain
// amqp091-go consumer on a queue bound to the exchange.

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/cdc-relay/cdc-relay/internal/relaytest"
)

// rabbitAvro are the relay settings of the RabbitMQ redrive tests: Avro
// values, the registry, and the schemas of dir (testdata/schemas lacks
// OrderShipped).
func rabbitAvro(t *testing.T, dir string) []string {
	t.Helper()
	relaytest.Need(t, registry)
	return []string{"--value-format", "avro", "--schema-registry-url", registry.URL(), "--schemas-dir", dir}
}

// withMessageID is the deliveries of got with message id id.
func withMessageID(got []amqp.Delivery, id string) []amqp.Delivery {
	var out []amqp.Delivery
	for _, d := range got {
		if d.MessageId == id {
			out = append(out, d)
		}
	}
	return out
}

// deadLetters lists the dead letters of a stream collected (the tools'
// end markers left out).
func deadLetters(stored func() []amqp.Delivery) []amqp.Delivery {
	var out []amqp.Delivery
	for _, d := range stored() {
		if _, ok := d.Headers["error_kind"]; ok {
			out = append(out, d)
		}
	}
	return out
}

// TestRabbitMQDLQRedrive: on RabbitMQ, a dead letter of an event type
// without a schema is redriven once the schema is deployed: it arrives on
// the exchange with its message id, routing key, type, headers and commit
// time, its body Avro under the subject named after the exchange, read by
// an independent consumer; one that still fails stays pending (exit 1),
// and a second run redrives nothing twice. dlq stats counts what is
// pending.
func TestRabbitMQDLQRedrive(t *testing.T) {
	t.Parallel()
	f, n, got, r := rabbitRelay(t, "#", rabbitAvro(t, schemaDir)...)
	stream := f.exchange() + ".dlq"
	letters := collect(t, n, stream, true)
	rows := f.insertRedriveRows(7401)
	agg1, tp, shipped, bad, good := rows.agg1, rows.tp, rows.shipped, rows.bad, rows.good
	waitFor(t, 90*time.Second, "the valid event and two dead letters", func() bool {
		return len(withMessageID(got(), good)) == 1 && len(deadLetters(letters)) >= 2
	})
	if code := r.terminate(); code != 0 {
		t.Fatalf("run exited %d", code)
	}
	kinds := map[string]amqp.Delivery{}
	for _, d := range deadLetters(letters) {
		kinds[d.MessageId] = d
	}
	letter := kinds[shipped]
	if letter.Headers["error_kind"] != "no_schema" || letter.Headers["outbox_row"] == nil || letter.Headers["aggregate_id"] != agg1 {
		t.Fatalf("dead letter of %s: %v", shipped, letter.Headers)
	}
	if kinds[bad].Headers["error_kind"] != "schema_mismatch" {
		t.Fatalf("dead letter of %s: %v", bad, kinds[bad].Headers)
	}

	stats := func() dlqCounts { return rabbitDLQStats(t, n, stream) }
	if c := stats(); c.Pending != 2 || c.Kinds["no_schema"] != 1 || c.Kinds["schema_mismatch"] != 1 {
		t.Fatalf("stats before the redrive: %+v", c)
	}

	fixed := schemasPlus(t, map[string]string{"OrderShipped.avsc": orderShipped})
	redrive := f.toolArgs(n, []string{"dlq", "redrive"}, rabbitAvro(t, fixed)...)
	code, out, errs := runBin(t, append(redrive, "--dry-run")...)
	if code != exitFailed || len(lines(out, "would be redriven id="+shipped+" offset=")) != 1 || len(lines(out, "would be still failing id="+bad+" offset=")) != 1 ||
		!strings.Contains(out, "dry run: would have: redriven 1, still failing 1, skipped 0") {
		t.Fatalf("dry run = %d, want %d with one to redrive and one still failing:\n%s\n%s", code, exitFailed, out, errs)
	}

	code, out, errs = runBin(t, redrive...)
	if code != exitFailed || len(lines(out, "redriven id="+shipped+" offset=")) != 1 || !strings.Contains(out, "exchange="+f.exchange()+" routing_key=OrderShipped") ||
		len(lines(out, "still failing id="+bad+" offset=")) != 1 || !strings.Contains(out, "kind=schema_mismatch") ||
		!strings.Contains(out, "redrive: redriven 1, still failing 1, skipped 0") {
		t.Fatalf("redrive = %d, want %d (a letter still fails) with one redriven and one still failing:\n%s\n%s", code, exitFailed, out, errs)
	}
	waitFor(t, 60*time.Second, "the redriven event", func() bool { return len(withMessageID(got(), shipped)) == 1 })
	d := withMessageID(got(), shipped)[0]
	if d.Exchange != f.exchange() || d.RoutingKey != "OrderShipped" || d.Type != "OrderShipped" || d.AppId != "cdc-relay" ||
		d.ContentType != "application/avro" || d.DeliveryMode != amqp.Persistent {
		t.Errorf("redriven message via %s/%s: type %q app %q content type %q delivery mode %d", d.Exchange, d.RoutingKey, d.Type, d.AppId, d.ContentType, d.DeliveryMode)
	}
	want := map[string]any{"id": shipped, "event_type": "OrderShipped", "aggregate_type": "Order", "aggregate_id": agg1, "traceparent": tp, "attempt": "3"}
	for k, v := range want {
		if d.Headers[k] != v {
			t.Errorf("redriven header %s = %v, want %v", k, d.Headers[k], v)
		}
	}
	for _, k := range []string{"error_kind", "error", "outbox_row", "exchange", "routing_key"} {
		if _, ok := d.Headers[k]; ok {
			t.Errorf("the redriven message has the dead-letter header %s: %v", k, d.Headers)
		}
	}
	if !d.Timestamp.Equal(letter.Timestamp) || !d.Timestamp.Equal(withMessageID(got(), good)[0].Timestamp) {
		t.Errorf("redriven timestamp %v, want the commit time %v (the letter's and its transaction's valid event's)", d.Timestamp, letter.Timestamp)
	}
	subject := f.exchange() + "-com.example.orders.OrderShipped"
	if len(d.Body) < 5 || int(binary.BigEndian.Uint32(d.Body[1:5])) != registry.LatestID(t, subject) {
		t.Fatalf("body % x does not start with the wire-format header of %s", d.Body[:min(5, len(d.Body))], subject)
	}
	v, _, err := newAvroDecoder().decode(d.Body)
	if err != nil || v["carrier"] != "dhl" || v["order_id"] != agg1 {
		t.Errorf("redriven value %v, %v", v, err)
	}

	// A second run passes over the redriven letter (its position), and the
	// failing one fails again.
	code, out, errs = runBin(t, redrive...)
	if code != exitFailed || !strings.Contains(out, "redrive: redriven 0, still failing 1, skipped 1") || len(lines(out, "skipped id="+shipped+" offset=")) != 1 {
		t.Fatalf("second redrive = %d:\n%s\n%s", code, out, errs)
	}
	if c := stats(); c.Pending != 1 || c.Redriven != 1 || c.Kinds["schema_mismatch"] != 1 {
		t.Fatalf("stats after two redrives: %+v, want 1 pending schema_mismatch, 1 redriven", c)
	}
	if n := len(withMessageID(got(), shipped)); n != 1 {
		t.Fatalf("the redriven event is in the queue %d times, want once", n)
	}
}

// TestRabbitMQDLQRedriveFollow: on RabbitMQ, redrive --follow sends the
// letter of its start, then the one the relay dead-letters while it runs;
// a letter that still fails is reported once, and SIGTERM ends it with its
// summary and exit 1.
func TestRabbitMQDLQRedriveFollow(t *testing.T) {
	t.Parallel()
	f, n, got, r := rabbitRelay(t, "#", rabbitAvro(t, schemaDir)...)
	letters := collect(t, n, f.exchange()+".dlq", true)
	ctx, conn, agg := context.Background(), f.connect(), uuidFor(7501)
	first, err := f.insertTx(ctx, conn, []event{shippedEvent(agg)})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 90*time.Second, "the first dead letter", func() bool { return len(deadLetters(letters)) >= 1 })

	fixed := schemasPlus(t, map[string]string{"OrderShipped.avsc": orderShipped})
	rd := startRelay(t, f.toolArgs(n, []string{"dlq", "redrive"}, append(rabbitAvro(t, fixed), "--follow")...))
	waitFor(t, 90*time.Second, "the first letter redriven", func() bool { return len(withMessageID(got(), strconv.FormatInt(first[0], 10))) == 1 })
	// Dead-lettered after the redrive started: one it can send, one that
	// still fails.
	later, err := f.insertTx(ctx, conn, []event{shippedEvent(agg), {"Order", agg, "OrderCreated", `{"order_id": "not enough"}`, ""}})
	if err != nil {
		t.Fatal(err)
	}
	good, bad := strconv.FormatInt(later[0], 10), strconv.FormatInt(later[1], 10)
	waitFor(t, 90*time.Second, "the later letter redriven and the failing one reported", func() bool {
		return len(withMessageID(got(), good)) == 1 && strings.Contains(rd.Output(), "still failing id="+bad+" ")
	})
	if code := rd.terminate(); code != exitFailed {
		t.Errorf("redrive --follow exited %d after SIGTERM, want %d (a letter still fails)", code, exitFailed)
	}
	if out := rd.Output(); !strings.Contains(out, "redrive: redriven 2, still failing 1, skipped 0") || strings.Count(out, "still failing id="+bad+" ") != 1 {
		t.Errorf("summary missing, or the failing letter reported other than once: %s", tailString(out, 3000))
	}
	if code := r.terminate(); code != 0 {
		t.Fatalf("run exited %d", code)
	}
	if n := len(withMessageID(got(), good)); n != 1 {
		t.Errorf("the later event is in the queue %d times, want once", n)
	}
}

// TestRabbitMQDLQRedriveRoutingKey: an event whose aggregate id makes too
// long a routing key is a dead letter of kind invalid_routing_key; redrive
// with the same --routing-key reports it still failing (exit 1), and with
// a template that fits sends it with the key that template gives.
func TestRabbitMQDLQRedriveRoutingKey(t *testing.T) {
	t.Parallel()
	f, n, got, r := rabbitRelay(t, "#", "--routing-key", "{aggregate_type}.{aggregate_id}")
	letters := collect(t, n, f.exchange()+".dlq", true)
	long := strings.Repeat("l", 300)
	ids, err := f.insertTx(context.Background(), f.connect(), []event{{AggregateType: "Order", AggregateID: long, EventType: "OrderCreated", Payload: `{"n": 1}`}})
	if err != nil {
		t.Fatal(err)
	}
	id := strconv.FormatInt(ids[0], 10)
	waitFor(t, 60*time.Second, "the dead letter", func() bool { return len(deadLetters(letters)) >= 1 })
	if code := r.terminate(); code != 0 {
		t.Fatalf("run exited %d", code)
	}
	if d := deadLetters(letters)[0]; d.Headers["error_kind"] != "invalid_routing_key" || d.MessageId != id {
		t.Fatalf("dead letter %s: %v", d.MessageId, d.Headers)
	}

	code, out, errs := runBin(t, f.toolArgs(n, []string{"dlq", "redrive"}, "--routing-key", "{aggregate_type}.{aggregate_id}")...)
	if code != exitFailed || len(lines(out, "still failing id="+id+" offset=0 kind=invalid_routing_key")) != 1 || !strings.Contains(out, "redrive: redriven 0, still failing 1") {
		t.Fatalf("redrive with the same --routing-key = %d, want %d:\n%s\n%s", code, exitFailed, out, errs)
	}
	code, out, errs = runBin(t, f.toolArgs(n, []string{"dlq", "redrive"}, "--routing-key", "{aggregate_type}.{event_type}")...)
	if code != 0 || len(lines(out, "redriven id="+id+" offset=0 exchange="+f.exchange()+" routing_key=Order.OrderCreated")) != 1 {
		t.Fatalf("redrive with a --routing-key that fits = %d, want 0:\n%s\n%s", code, out, errs)
	}
	waitFor(t, 60*time.Second, "the redriven event", func() bool { return len(withMessageID(got(), id)) == 1 })
	d := withMessageID(got(), id)[0]
	if d.RoutingKey != "Order.OrderCreated" || d.Headers["aggregate_id"] != long || string(d.Body) != `{"n":1}` || d.Headers["error_kind"] != nil || d.Headers["routing_key"] != nil {
		t.Fatalf("redriven message via %s: headers %v body %s", d.RoutingKey, d.Headers, d.Body)
	}
}

// TestRabbitMQDLQRedriveUnconfiguredTable: on RabbitMQ, a row of a table
// added to the publication while the relay runs without it is an
// unconfigured_table dead letter; redrive without the table in --table
// skips it, pending (exit 0), and with the table builds it as a live row
// of the table: its id as message id, the routing key of its event type,
// its own headers and payload.
func TestRabbitMQDLQRedriveUnconfiguredTable(t *testing.T) {
	t.Parallel()
	f, n, got, r := rabbitRelay(t, "#")
	t.Cleanup(func() { f.exec("DROP PUBLICATION IF EXISTS " + f.publication) })
	letters := collect(t, n, f.exchange()+".dlq", true)
	other := "public.other_" + f.name
	f.exec(fmt.Sprintf(outboxDDL, other))
	t.Cleanup(func() { f.exec("DROP TABLE IF EXISTS " + other) })
	f.exec("ALTER SEQUENCE " + other + "_id_seq RESTART WITH 1000")
	f.exec(fmt.Sprintf("ALTER PUBLICATION %s ADD TABLE %s", f.publication, other))
	agg := uuidFor(7601)
	tp := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ids := insertRows(t, f.connect(), other, []event{{"Order", agg, "OrderCreated", `{"n": 1}`, fmt.Sprintf(`{"traceparent": %q}`, tp)}})
	id := strconv.FormatInt(ids[0], 10)
	waitFor(t, 60*time.Second, "the unconfigured_table dead letter", func() bool { return len(deadLetters(letters)) >= 1 })
	if code := r.terminate(); code != 0 {
		t.Fatalf("run exited %d", code)
	}
	if d := deadLetters(letters)[0]; d.Headers["error_kind"] != "unconfigured_table" || d.Headers["table"] != other {
		t.Fatalf("dead letter: %v", d.Headers)
	}

	redrive := f.toolArgs(n, []string{"dlq", "redrive"})
	code, out, errs := runBin(t, redrive...)
	if code != 0 || !strings.Contains(out, "is not a configured outbox table: add it to --table first") ||
		!strings.Contains(out, "redrive: redriven 0, still failing 0, skipped 1 (0 left out by the filters, 1 that cannot be built again") {
		t.Fatalf("redrive without the table = %d, want 0 with the letter skipped:\n%s\n%s", code, out, errs)
	}
	code, out, errs = runBin(t, withTables(redrive, "public."+f.table, other)...)
	if code != 0 || len(lines(out, "redriven id="+id+" offset=0 exchange="+f.exchange()+" routing_key=OrderCreated")) != 1 {
		t.Fatalf("redrive with the table = %d, want 0 with the row redriven:\n%s\n%s", code, out, errs)
	}
	waitFor(t, 60*time.Second, "the redriven row", func() bool { return len(withMessageID(got(), id)) == 1 })
	d := withMessageID(got(), id)[0]
	if d.RoutingKey != "OrderCreated" || d.Type != "OrderCreated" || d.Headers["aggregate_id"] != agg || d.Headers["traceparent"] != tp ||
		d.Headers["table"] != nil || d.Headers["error_kind"] != nil || string(d.Body) != `{"n":1}` {
		t.Fatalf("redriven row via %s, type %s: headers %v body %s", d.RoutingKey, d.Type, d.Headers, d.Body)
	}
}
