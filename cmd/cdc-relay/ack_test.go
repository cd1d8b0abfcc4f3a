package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestKillAndRestart: kill -9 the relay in the middle of a stream and start
// it again: nothing is lost; duplicates are allowed and counted.
func TestKillAndRestart(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	r := startRelay(t, f.args())
	r.waitStreaming(60 * time.Second)

	ctx := context.Background()
	conn := connect(t)
	var ids []int64
	write := func(from, to int) {
		for i := from; i < to; i += 20 {
			evs := make([]event, 20)
			for j := range evs {
				agg := uuidFor((i + j) % 50)
				evs[j] = event{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, i+j)}
			}
			got, err := f.insertTx(ctx, conn, evs)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, got...)
		}
	}
	write(0, 2000)
	// Kill once part of the stream is through, with more still coming.
	r.waitMetric("cdc_relay_events_published_total", 60*time.Second, func(v float64) bool { return v >= 200 })
	r.kill()
	write(2000, 3000)
	r2 := startRelay(t, f.args())
	recs := c.waitIDs(120*time.Second, ids)
	seen := distinctIDs(recs)
	dups := 0
	for _, n := range seen {
		dups += n - 1
	}
	t.Logf("events %d, records %d, duplicates after kill -9: %d", len(ids), len(recs), dups)
	if len(seen) < len(ids) {
		t.Fatalf("lost events: %d distinct of %d", len(seen), len(ids))
	}
	if code := r2.terminate(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// TestAckRuleDuringKafkaOutage: while the broker is down, confirmed_flush_lsn
// never passes a transaction whose events Kafka has not acknowledged.
func TestAckRuleDuringKafkaOutage(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	f.ownBroker() // stopped below
	r := startRelay(t, f.args())
	r.waitStreaming(60 * time.Second)
	ctx := context.Background()
	conn := connect(t)

	type txn struct {
		ids   []int64
		after uint64 // WAL insert position after the commit: ≥ the commit's end LSN
	}
	var txns []txn
	writeTx := func(i int) {
		agg := uuidFor(i % 7)
		ids, err := f.insertTx(ctx, conn, []event{
			{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, i)},
			{AggregateType: "Order", AggregateID: agg, EventType: "OrderCancelled", Payload: orderCancelled(agg, i)},
		})
		if err != nil {
			t.Fatal(err)
		}
		txns = append(txns, txn{ids: ids, after: currentLSN(t, conn)})
	}
	for i := 0; i < 50; i++ {
		writeTx(i)
	}
	waitFor(t, 60*time.Second, "first transactions confirmed", func() bool { return f.confirmedFlush() >= txns[49].after })

	restartBroker := f.stopBroker()
	for i := 50; i < 150; i++ {
		writeTx(i)
	}
	// While Kafka is down the relay reads the new transactions but must not confirm them.
	r.waitMetric("cdc_relay_events_read_total", 60*time.Second, func(v float64) bool { return v >= 300 })
	confirmedDuring := f.confirmedFlush()
	if confirmedDuring >= txns[50].after {
		t.Fatalf("confirmed_flush_lsn %X passed unacknowledged transaction 50 (ends before %X) while Kafka was down", confirmedDuring, txns[50].after)
	}
	// Kill the relay while events are in flight, then bring Kafka back.
	r.kill()
	confirmedAtKill := f.confirmedFlush()
	restartBroker()
	// Every transaction at or below the confirmed LSN is in Kafka already.
	c := f.consume("^" + f.topicPrefix + `\..*`)
	var must []int64
	for _, tx := range txns {
		if tx.after <= confirmedAtKill {
			must = append(must, tx.ids...)
		}
	}
	if len(must) < 100 {
		t.Fatalf("only %d events below the confirmed LSN; the test needs the first 50 transactions confirmed", len(must))
	}
	c.waitIDs(60*time.Second, must)

	// A restarted relay delivers the rest: nothing lost.
	r2 := startRelay(t, f.args())
	var all []int64
	for _, tx := range txns {
		all = append(all, tx.ids...)
	}
	c.waitIDs(120*time.Second, all)
	if code := r2.terminate(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// TestInterleavedTransactionsHaltAndRestart: B inserts B1 and stays open; A
// inserts a large A1 and A2 and commits; B commits right after. The relay
// halts on B1 (an invalid event under --on-invalid halt), so it confirms A's
// end and nothing past it. Restarted in dlq mode it must still deliver B1:
// confirming a row LSN or commit LSN+len+1 instead would skip it.
func TestInterleavedTransactionsHaltAndRestart(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	r := startRelay(t, f.args("--on-invalid", "halt", "--halt-linger", "0s"))
	r.waitStreaming(60 * time.Second)
	ctx := context.Background()
	connA, connB := connect(t), connect(t)

	txB, err := connB.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var b1 int64
	if err := txB.QueryRow(ctx, fmt.Sprintf(`INSERT INTO %s (aggregate_type, aggregate_id, event_type, payload) VALUES ('Order', $1, 'NoSuchEvent', '{"x": 1}') RETURNING id`, f.table), uuidFor(2)).Scan(&b1); err != nil {
		t.Fatal(err)
	}
	agg := uuidFor(1)
	big := strings.Repeat("x", 200000)
	a1 := fmt.Sprintf(`{"order_id": %q, "customer_id": %q, "status": "PENDING", "amount_cents": 1, "created_at": 1}`, agg, big)
	ids, err := f.insertTx(ctx, connA, []event{
		{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: a1},
		{AggregateType: "Order", AggregateID: agg, EventType: "OrderCancelled", Payload: orderCancelled(agg, 2)},
	})
	if err != nil {
		t.Fatal(err)
	}
	var beforeB string
	if err := txB.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&beforeB); err != nil {
		t.Fatal(err)
	}
	if err := txB.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if code := r.wait(60 * time.Second); code != exitFailed {
		t.Fatalf("halt exit code = %d, want %d", code, exitFailed)
	}
	out := r.Output()
	if !strings.Contains(out, "id="+strconv.FormatInt(b1, 10)) || !strings.Contains(out, "NoSuchEvent") {
		t.Fatalf("halt message does not name the event id %d and its reason:\n%s", b1, tailString(out, 3000))
	}
	c.waitIDs(60*time.Second, ids)
	// B's commit starts after beforeB: the halted relay must not have confirmed it.
	if confirmed := f.confirmedFlush(); confirmed > parseLSN(t, beforeB) {
		t.Fatalf("confirmed_flush_lsn %X is past the start of B's commit (after %s) although B1 was never published", confirmed, beforeB)
	}
	r2 := startRelay(t, f.args())
	recs := c.waitIDs(60*time.Second, []int64{b1})
	for _, rec := range recs {
		if rec.Headers["id"] == strconv.FormatInt(b1, 10) && rec.Topic != f.dlq {
			t.Fatalf("B1 landed in %s, want the DLQ %s", rec.Topic, f.dlq)
		}
	}
	if code := r2.terminate(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// TestInterleavedTransactionsKillRestart: the same interleaving, with the
// relay killed after it has read B but before Kafka could take B1 (the broker
// is down); restarted, it must deliver B1.
func TestInterleavedTransactionsKillRestart(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	f.ownBroker()
	testInterleavedTransactionsKillRestart(t, f)
}

// testInterleavedTransactionsKillRestart stops f's broker: give f one of
// its own (ownBroker) when the test runs in parallel.
func testInterleavedTransactionsKillRestart(t *testing.T, f *fixture) {
	r := startRelay(t, f.args())
	r.waitStreaming(60 * time.Second)
	ctx := context.Background()
	connA, connB := f.connect(), f.connect()
	c := f.consume("^" + f.topicPrefix + `\..*`)

	txB, err := connB.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	aggB := uuidFor(20)
	var b1 int64
	if err := txB.QueryRow(ctx, fmt.Sprintf(`INSERT INTO %s (aggregate_type, aggregate_id, event_type, payload) VALUES ('Order', $1, 'OrderCreated', $2) RETURNING id`, f.table),
		aggB, orderCreated(aggB, 1)).Scan(&b1); err != nil {
		t.Fatal(err)
	}
	agg := uuidFor(10)
	a1 := fmt.Sprintf(`{"order_id": %q, "customer_id": %q, "status": "PENDING", "amount_cents": 1, "created_at": 1}`, agg, strings.Repeat("y", 200000))
	idsA, err := f.insertTx(ctx, connA, []event{
		{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: a1},
		{AggregateType: "Order", AggregateID: agg, EventType: "OrderCancelled", Payload: orderCancelled(agg, 2)},
	})
	if err != nil {
		t.Fatal(err)
	}
	afterA := currentLSN(t, connA)
	c.waitIDs(60*time.Second, idsA)
	waitFor(t, 30*time.Second, "A confirmed", func() bool { return f.confirmedFlush() >= afterA })

	restartBroker := f.stopBroker()
	if err := txB.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r.waitMetric("cdc_relay_events_read_total", 30*time.Second, func(v float64) bool { return v >= 3 })
	r.kill()
	restartBroker()
	r2 := startRelay(t, f.args())
	c.waitIDs(90*time.Second, []int64{b1})
	if code := r2.terminate(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// TestIdleOutboxBusyOtherTable: writes to a table outside the publication move
// the WAL; with an idle outbox the slot's confirmed_flush_lsn keeps up.
func TestIdleOutboxBusyOtherTable(t *testing.T) {
	t.Parallel()
	testIdleOutboxBusyOtherTable(t, newFixture(t, ""))
}

func testIdleOutboxBusyOtherTable(t *testing.T, f *fixture) {
	f.exec(fmt.Sprintf("CREATE TABLE busy_%s (id serial PRIMARY KEY, v text)", f.name))
	r := startRelay(t, f.args())
	r.waitStreaming(60 * time.Second)
	conn := f.connect()
	ctx := context.Background()
	start := currentLSN(t, conn)
	for i := 0; i < 20; i++ {
		if _, err := conn.Exec(ctx, fmt.Sprintf("INSERT INTO busy_%s (v) SELECT repeat('z', 1000) FROM generate_series(1, 500)", f.name)); err != nil {
			t.Fatal(err)
		}
	}
	end := currentLSN(t, conn)
	if end-start < 5<<20 {
		t.Fatalf("test wrote only %d bytes of WAL", end-start)
	}
	waitFor(t, 30*time.Second, "confirmed_flush_lsn to follow the WAL with an idle outbox", func() bool {
		return f.confirmedFlush() >= end
	})
	lag := r.waitMetric("cdc_relay_slot_lag_bytes", 10*time.Second, func(v float64) bool { return v < 1<<20 })
	t.Logf("slot lag after catching up: %.0f bytes", lag)
	var _ pgx.Rows
}
