package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/internal/relaytest"
)

// TestInvalidEventsGoToDLQ: each kind of invalid event lands in the
// dead-letter topic with its reason, and the valid events around it arrive.
// It runs at-least-once and exactly-once (delivery_test.go), where the dead
// letters go inside the Kafka transactions of their PostgreSQL
// transactions: a read_committed consumer reads every event and every dead
// letter exactly once, in order, and each is counted once.
func TestInvalidEventsGoToDLQ(t *testing.T) {
	eachDelivery(t, true, func(t *testing.T, d delivery) { testInvalidEventsGoToDLQ(t, newFixture(t, ""), d) })
}

func testInvalidEventsGoToDLQ(t *testing.T, f *fixture, d delivery) {
	c := d.consume(t, "^"+f.topicPrefix+`\..*`)
	r := startRelay(t, d.with(f.args("--max-record-bytes", "100000")))
	r.waitStreaming(60 * time.Second)
	ctx := context.Background()
	conn := f.connect()

	agg := uuidFor(77)
	valid := func(n int) event {
		return event{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, n)}
	}
	cases := []struct {
		name      string
		ev        event
		wantError string // substring of the error header
	}{
		{"missing required field", event{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: `{"order_id": "` + agg + `"}`}, "customer_id"},
		{"wrong type", event{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated",
			Payload: strings.Replace(orderCreated(agg, 1), `"amount_cents": 1`, `"amount_cents": "12"`, 1)}, "amount_cents"},
		{"no schema", event{AggregateType: "Order", AggregateID: agg, EventType: "ShipmentLost", Payload: `{"a": 1}`}, "ShipmentLost"},
		{"empty aggregate id", event{AggregateType: "Order", AggregateID: "", EventType: "OrderCreated", Payload: orderCreated(agg, 2)}, "aggregate_id"},
		{"invalid topic", event{AggregateType: "Or der", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, 3)}, "topic"},
		{"too large", event{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated",
			Payload: strings.Replace(orderCreated(agg, 4), `"c-4"`, `"`+strings.Repeat("L", 150000)+`"`, 1)}, "larger than the broker accepts"},
		{"payload is an array", event{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: `[1, 2]`}, "array"},
	}
	var validIDs []int64
	var order []string            // every id in commit order
	badIDs := map[string]string{} // id → wanted error substring
	badPayload := map[string]string{}
	badKind := map[string]string{} // id → wanted error_kind
	wantKind := map[string]string{"missing required field": "schema_mismatch", "wrong type": "schema_mismatch", "no schema": "no_schema",
		"empty aggregate id": "empty_aggregate_id", "invalid topic": "invalid_topic", "too large": "too_large", "payload is an array": "schema_mismatch"}
	for i, tc := range cases {
		tc.ev.Headers = `{"traceparent": "00-dlq-01"}`
		ids, err := f.insertTx(ctx, conn, []event{valid(100 + i), tc.ev, valid(200 + i)})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		validIDs = append(validIDs, ids[0], ids[2])
		for _, id := range ids {
			order = append(order, strconv.FormatInt(id, 10))
		}
		id := strconv.FormatInt(ids[1], 10)
		badIDs[id] = tc.wantError
		badPayload[id] = tc.ev.Payload
		badKind[id] = wantKind[tc.name]
	}
	all := append([]int64(nil), validIDs...)
	for id := range badIDs {
		n, _ := strconv.ParseInt(id, 10, 64)
		all = append(all, n)
	}
	recs := c.waitIDs(90*time.Second, all)
	for _, rec := range recs {
		id := rec.Headers["id"]
		want, bad := badIDs[id]
		if !bad {
			if rec.Topic != f.topic("Order") {
				t.Fatalf("valid event %s went to %s", id, rec.Topic)
			}
			continue
		}
		if rec.Topic != f.dlq {
			t.Fatalf("invalid event %s (%s) went to %s, want the DLQ", id, want, rec.Topic)
		}
		if !strings.Contains(rec.Headers["error"], want) {
			t.Errorf("event %s: error header %q does not mention %q", id, rec.Headers["error"], want)
		}
		if rec.Headers["error_kind"] != badKind[id] {
			t.Errorf("event %s: error_kind %q, want %q", id, rec.Headers["error_kind"], badKind[id])
		}
		if rec.Headers["traceparent"] != "00-dlq-01" {
			t.Errorf("event %s: the row's headers did not travel to the DLQ: %v", id, rec.Headers)
		}
		if rec.Headers["event_type"] == "" || rec.Headers["aggregate_type"] == "" {
			t.Errorf("event %s: DLQ headers incomplete: %v", id, rec.Headers)
		}
		if want != "larger than the broker accepts" && !jsonEqual(rec.Value, []byte(badPayload[id])) {
			t.Errorf("event %s: DLQ value %q, want the raw payload %q", id, rec.Value, badPayload[id])
		}
	}
	dlq := r.waitMetric("cdc_relay_dlq_events_total", 10*time.Second, func(v float64) bool { return v >= float64(len(cases)) })
	if dlq != float64(len(cases)) {
		t.Fatalf("cdc_relay_dlq_events_total = %v, want %d", dlq, len(cases))
	}
	if d.once() {
		end := currentLSN(t, conn)
		waitFor(t, 30*time.Second, "the slot to confirm past the events", func() bool { return f.confirmedFlush() >= end })
		checkOnce(t, c.records(), order)
	}
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// TestHaltOnInvalid: with --on-invalid halt the relay stops streaming,
// names the event and the reason, and confirms nothing past it. For
// --halt-linger (default 20s) it stays up: /readyz answers 503 with the
// cause, /healthz 200, cdc_relay_halted is 1; SIGTERM then exits 1 at once.
func TestHaltOnInvalid(t *testing.T) {
	f := newFixture(t, "")
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	r := startRelay(t, f.args("--on-invalid", "halt"))
	r.waitStreaming(60 * time.Second)
	ctx := context.Background()
	conn := connect(t)
	agg := uuidFor(5)
	good, err := f.insertTx(ctx, conn, []event{{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	c.waitIDs(60*time.Second, good)
	// The bad transaction's commit starts after `before`, read inside it.
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bad := make([]int64, 1)
	if err := tx.QueryRow(ctx, fmt.Sprintf(`INSERT INTO %s (aggregate_type, aggregate_id, event_type, payload) VALUES ('Order', $1, 'OrderCreated', '{"order_id": 5}') RETURNING id`, f.table), agg).Scan(&bad[0]); err != nil {
		t.Fatal(err)
	}
	var beforeText string
	if err := tx.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&beforeText); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	before := parseLSN(t, beforeText)
	var ready map[string]string
	waitFor(t, 60*time.Second, "/readyz 503 halted", func() bool {
		code, body := r.getJSON("/readyz")
		ready = body
		return code == 503 && body["state"] == "halted"
	})
	if !strings.Contains(ready["reason"], fmt.Sprintf("id=%d", bad[0])) || !strings.Contains(ready["reason"], "order_id") {
		t.Fatalf("/readyz reason %q does not name event %d and the reason", ready["reason"], bad[0])
	}
	if code, _ := r.getJSON("/healthz"); code != 200 {
		t.Fatalf("halted relay's /healthz = %d, want 200 (alive)", code)
	}
	if v, err := r.metric("cdc_relay_halted"); err != nil || v != 1 {
		t.Fatalf("cdc_relay_halted = %v (%v), want 1", v, err)
	}
	// The slot is released while the halted process lingers.
	waitFor(t, 30*time.Second, "slot released", func() bool { return !f.slotActive() })
	r.cmd.Process.Signal(syscall.SIGTERM)
	if code := r.wait(10 * time.Second); code != exitFailed {
		t.Fatalf("exit code after SIGTERM while halted = %d, want %d", code, exitFailed)
	}
	out := r.Output()
	if !strings.Contains(out, fmt.Sprintf("id=%d", bad[0])) || !strings.Contains(out, "order_id") {
		t.Fatalf("halt output does not name event %d and the reason:\n%s", bad[0], tailString(out, 3000))
	}
	if got := f.confirmedFlush(); got > before {
		t.Fatalf("confirmed_flush_lsn %X passed the invalid event's transaction (starts after %X)", got, before)
	}
}

// TestIncompatibleSchemaRefusesStart: after events were published with one
// schema, an incompatible change stops the relay at startup (exit 2) with a
// message naming the subject and the compatibility level. Against each
// registry.
func TestIncompatibleSchemaRefusesStart(t *testing.T) {
	eachRegistry(t, testIncompatibleSchemaRefusesStart)
}

func testIncompatibleSchemaRefusesStart(t *testing.T, reg relaytest.SchemaRegistry) {
	f := newFixtureFor(t, reg, "")
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	r := startRelay(t, f.args())
	r.waitStreaming(60 * time.Second)
	agg := uuidFor(9)
	ids, err := f.insertTx(context.Background(), connect(t), []event{{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	c.waitIDs(60*time.Second, ids)
	if code := r.terminate(); code != 0 {
		t.Fatalf("exit code %d", code)
	}

	// A new required field without a default breaks BACKWARD compatibility.
	subject := f.topic("Order") + "-com.example.orders.OrderCreated"
	defaultBackward(t, reg, subject)
	dir := incompatibleSchemaDir(t)
	args := f.args()
	for i := range args {
		if args[i] == "--schemas-dir" {
			args[i+1] = dir
		}
	}
	r2 := startRelay(t, args)
	if code := r2.wait(60 * time.Second); code != exitConfig {
		t.Fatalf("exit code = %d, want %d; output:\n%s", code, exitConfig, r2.Output())
	}
	out := r2.Output()
	if !strings.Contains(out, subject) || !strings.Contains(out, "BACKWARD") || !strings.Contains(out, "warehouse") {
		t.Fatalf("output does not name subject %s, level BACKWARD and field warehouse:\n%s", subject, out)
	}
	// Nothing was registered for the rejected schema.
	resp, err := http.Get(reg.URL() + "/subjects/" + subject + "/versions")
	if err != nil {
		t.Fatal(err)
	}
	var versions []int
	json.NewDecoder(resp.Body).Decode(&versions)
	resp.Body.Close()
	if len(versions) != 1 {
		t.Fatalf("subject %s has versions %v, want exactly the original one", subject, versions)
	}
}

// TestBrokerRejectsTooLargeRecord: a topic whose max.message.bytes is below
// --max-record-bytes refuses a record the relay's own check let through; the
// relay dead-letters it (or halts under --on-invalid halt) and the events
// around it still arrive, in order.
// TestBrokerRejectsTooLargeRecord runs at-least-once (dlq and halt) and
// under --delivery exactly-once (dlq, read by a read_committed consumer):
// the record the topic cannot take is dead-lettered before it is produced,
// so it never makes a Kafka transaction abort-only.
func TestBrokerRejectsTooLargeRecord(t *testing.T) {
	for _, tc := range []struct{ name, mode, delivery string }{{"dlq", "dlq", "at-least-once"}, {"halt", "halt", "at-least-once"}, {"dlq exactly-once", "dlq", "exactly-once"}} {
		mode := tc.mode
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, "")
			createTopic(t, broker.Addr(), f.topic("Order"), map[string]string{"max.message.bytes": "20000"})
			c := consume(t, "^"+f.topicPrefix+`\..*`, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
			r := startRelay(t, f.args("--on-invalid", mode, "--halt-linger", "0s", "--delivery", tc.delivery))
			r.waitStreaming(60 * time.Second)
			agg := uuidFor(3)
			big := strings.Replace(orderCreated(agg, 2), `"c-2"`, `"`+strings.Repeat("B", 40000)+`"`, 1)
			conn := connect(t)
			first, err := f.insertTx(context.Background(), conn, []event{{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, 1)}})
			if err != nil {
				t.Fatal(err)
			}
			c.waitIDs(60*time.Second, first)
			ids, err := f.insertTx(context.Background(), conn, []event{
				{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: big},
				{AggregateType: "Order", AggregateID: agg, EventType: "OrderCancelled", Payload: orderCancelled(agg, 3)},
			})
			if err != nil {
				t.Fatal(err)
			}
			bigID := strconv.FormatInt(ids[0], 10)
			if mode == "halt" {
				if code := r.wait(60 * time.Second); code != exitFailed {
					t.Fatalf("exit code %d, want %d", code, exitFailed)
				}
				if out := r.Output(); !strings.Contains(out, "id="+bigID) || !strings.Contains(out, "too large") {
					t.Fatalf("halt does not name event %s and the reason:\n%s", bigID, tailString(out, 2000))
				}
				return
			}
			recs := c.waitIDs(60*time.Second, ids)
			var order []string
			for _, rec := range recs {
				if rec.Headers["id"] == bigID {
					if rec.Topic != f.dlq || !strings.Contains(rec.Headers["error"], "too large") || rec.Headers["error_kind"] != "too_large" || len(rec.Value) != 0 {
						t.Fatalf("refused record: topic %s error %q value %d bytes", rec.Topic, rec.Headers["error"], len(rec.Value))
					}
					continue
				}
				if rec.Topic == f.topic("Order") {
					order = append(order, rec.Headers["id"])
				}
			}
			if len(order) != 2 || order[0] != strconv.FormatInt(first[0], 10) || order[1] != strconv.FormatInt(ids[1], 10) {
				t.Fatalf("events around the refused one: %v", order)
			}
		})
	}
}
