package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/relaytest"
)

func uuidFor(i int) string {
	return fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
}

func orderCreated(orderID string, n int) string {
	return fmt.Sprintf(`{"order_id": %q, "customer_id": "c-%d", "status": "PENDING", "amount_cents": %d, "currency": "EUR",
		"items": [{"sku": "sku-%d", "quantity": 1, "unit_price_cents": %d}], "created_at": 1700000000000}`, orderID, n, n, n, n)
}

func orderCancelled(orderID string, n int) string {
	return fmt.Sprintf(`{"order_id": %q, "customer_id": "c-%d", "reason": "CUSTOMER_REQUEST", "amount_cents": %d, "cancelled_at": 1700000000001}`, orderID, n, n)
}

// TestEndToEnd: several concurrent writers, transactions of 1 to 50 rows;
// every event arrives with its topic, key, headers and an Avro body that
// decodes to the inserted payload (srclient and goavro against the
// registry), in order per aggregate. Against each registry.
func TestEndToEnd(t *testing.T) {
	t.Parallel()
	eachRegistry(t, func(t *testing.T, reg relaytest.SchemaRegistry) { testEndToEnd(t, newFixtureFor(t, reg, "")) })
}

func testEndToEnd(t *testing.T, f *fixture) {
	// Building the primary key's index scans the new table once; the
	// creating backend reports that when it exits. Nothing else may scan it.
	baseline := f.tableScans()
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	// An application_name of its own: relays of tests running beside this
	// one share the server, and their backends are not this relay's.
	app := "cdc-relay-" + f.slot
	args := f.args()
	for i := range args {
		if args[i] == "--pg-url" {
			args[i+1] += map[bool]string{true: "&", false: "?"}[strings.Contains(args[i+1], "?")] + "application_name=" + app
		}
	}
	r := startRelay(t, args)
	r.waitStreaming(60 * time.Second)

	const writers, perWriter = 4, 750
	type inserted struct {
		id      int64
		aggID   string
		evType  string
		payload string
	}
	var all []inserted
	rngs := make([]*rand.Rand, writers) // each writer's own
	for w := range rngs {
		rngs[w] = rand.New(rand.NewPCG(uint64(w), 7))
	}
	f.runWriters(writers, perWriter, func(w, done int) []event {
		rng := rngs[w]
		evs := make([]event, 1+rng.IntN(50))
		for i := range evs {
			// Each writer owns 20 aggregates, so order per aggregate is the writer's order.
			agg := uuidFor(w*1000 + rng.IntN(20))
			evType, payload := "OrderCreated", orderCreated(agg, done+i)
			if rng.IntN(4) == 0 {
				evType, payload = "OrderCancelled", orderCancelled(agg, done+i)
			}
			evs[i] = event{AggregateType: "Order", AggregateID: agg, EventType: evType, Payload: payload,
				Headers: fmt.Sprintf(`{"traceparent": "00-%032x-%016x-01", "attempt": %d}`, done+i, w, i)}
		}
		return evs
	}, func(_ int, evs []event, ids []int64, _ time.Time) {
		for i, e := range evs {
			all = append(all, inserted{id: ids[i], aggID: e.AggregateID, evType: e.EventType, payload: e.Payload})
		}
	})
	ids := make([]int64, len(all))
	for i, e := range all {
		ids[i] = e.id
	}
	recs := c.waitIDs(120*time.Second, ids)

	byID := map[string]record{}
	perAgg := map[string][]record{} // first occurrence order as consumed per partition
	for _, rec := range recs {
		id := rec.Headers["id"]
		if _, dup := byID[id]; dup {
			continue
		}
		byID[id] = rec
		perAgg[rec.Key] = append(perAgg[rec.Key], rec)
	}
	dec := f.avroDecoder()
	for _, e := range all {
		rec := byID[strconv.FormatInt(e.id, 10)]
		if rec.Topic != f.topic("Order") {
			t.Fatalf("event %d: topic %q, want %q", e.id, rec.Topic, f.topic("Order"))
		}
		if rec.Key != e.aggID {
			t.Fatalf("event %d: key %q, want %q", e.id, rec.Key, e.aggID)
		}
		if rec.Headers["event_type"] != e.evType || rec.Headers["aggregate_type"] != "Order" {
			t.Fatalf("event %d: headers %v", e.id, rec.Headers)
		}
		if rec.Headers["traceparent"] == "" || rec.Headers["attempt"] == "" {
			t.Fatalf("event %d: headers from the jsonb column missing: %v", e.id, rec.Headers)
		}
		got, _, err := dec.decode(rec.Value)
		if err != nil {
			t.Fatalf("event %d: %v", e.id, err)
		}
		var want map[string]any
		if err := json.Unmarshal([]byte(e.payload), &want); err != nil {
			t.Fatal(err)
		}
		for _, field := range []string{"order_id", "customer_id", "amount_cents", "status", "reason", "currency"} {
			w, ok := want[field]
			if !ok {
				continue
			}
			if fmt.Sprint(got[field]) != fmt.Sprint(w) {
				t.Fatalf("event %d: decoded %s = %v, want %v (payload %s)", e.id, field, got[field], w, e.payload)
			}
		}
		if e.evType == "OrderCreated" {
			items, _ := got["items"].([]any)
			if len(items) != 1 || fmt.Sprint(items[0].(map[string]any)["sku"]) != fmt.Sprint(want["items"].([]any)[0].(map[string]any)["sku"]) {
				t.Fatalf("event %d: decoded items %v, want %v", e.id, got["items"], want["items"])
			}
		}
	}
	// One aggregate, one partition.
	partitionOf := map[string]int32{}
	partitions := map[int32]bool{}
	for _, rec := range recs {
		if p, ok := partitionOf[rec.Key]; ok && p != rec.Partition {
			t.Fatalf("aggregate %s in partitions %d and %d", rec.Key, p, rec.Partition)
		}
		partitionOf[rec.Key] = rec.Partition
		partitions[rec.Partition] = true
	}
	if len(partitions) < 2 {
		t.Fatalf("80 aggregates all landed in %d partition(s) of 3", len(partitions))
	}
	// Order per aggregate: within each partition the consumer sees an
	// aggregate's events in insertion order (ids increase per aggregate
	// because each aggregate has a single writer).
	for agg, rs := range perAgg {
		sort.SliceStable(rs, func(i, j int) bool { return rs[i].Offset < rs[j].Offset })
		last := int64(-1)
		for _, rec := range rs {
			id, _ := strconv.ParseInt(rec.Headers["id"], 10, 64)
			if id < last {
				t.Fatalf("aggregate %s out of order: id %d after %d", agg, id, last)
			}
			last = id
		}
	}
	if dups := len(recs) - len(byID); dups != 0 {
		t.Logf("duplicates without any fault: %d", dups)
	}
	// The confirmed LSN catches up with everything written.
	conn := f.connect()
	end := currentLSN(t, conn)
	waitFor(t, 30*time.Second, "confirmed_flush_lsn to reach the WAL end", func() bool { return f.confirmedFlush() >= end })
	if code := r.terminate(); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d, want 0", code)
	}
	// The relay never read the outbox table: its backends flush their table
	// statistics when they exit, and no scan of the table is counted.
	waitFor(t, 10*time.Second, "the relay's backends to exit", func() bool {
		var n int
		conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&n)
		return n == 0
	})
	if got := f.tableScans(); got != baseline {
		t.Fatalf("the outbox table was scanned: %d scans before the relay ran, %d after", baseline, got)
	}
}

// tableScans returns seq_scan + idx_scan of the fixture's table, once the
// scan done by building its primary key index has been reported.
func (f *fixture) tableScans() int64 {
	f.t.Helper()
	conn := f.connect()
	var n int64
	waitFor(f.t, 10*time.Second, "table statistics", func() bool {
		err := conn.QueryRow(context.Background(), "SELECT seq_scan + coalesce(idx_scan, 0) FROM pg_stat_user_tables WHERE relname = $1", f.table).Scan(&n)
		return err == nil && n >= 1
	})
	return n
}
