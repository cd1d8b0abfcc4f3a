package main

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestExactlyOnceReadCommittedVisibility: under --delivery exactly-once, a
// read_committed consumer never sees part of an open or an aborted Kafka
// transaction, and once one commits it sees every event of its PostgreSQL
// transaction, across topics. One 200,000-row PostgreSQL transaction over
// two aggregate types streams into one Kafka transaction; while the relay
// has had many of its records acknowledged (a read_uncommitted consumer sees
// them), the read_committed one sees none. The relay's path to PostgreSQL
// then goes silent, so it cannot read the transaction's commit however fast
// it is, and it is killed, which leaves that Kafka transaction open; the next
// relay fences it (aborted) and publishes the PostgreSQL transaction again. The read_committed consumer ends with
// every id exactly once, on both topics; the read_uncommitted one also saw
// the aborted records, which shows there was something to hide.
func TestExactlyOnceReadCommittedVisibility(t *testing.T) {
	t.Parallel()
	const rows = 200000
	f := newFixture(t, "")
	px := newTCPProxy(t, "127.0.0.1:"+strconv.Itoa(pg.Port()))
	committed := consume(t, "^"+f.topicPrefix+`\..*`, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	raw := consume(t, "^"+f.topicPrefix+`\..*`)
	args := f.args("--pg-url", viaProxy(t, px), "--delivery", "exactly-once", "--value-format", "json", "--max-in-flight-events", "5000")
	r := startRelay(t, args)
	r.waitStreaming(60 * time.Second)

	// A first small transaction, so that the topics exist and the
	// consumers have joined them before the large one.
	conn := connect(t)
	ctx := context.Background()
	first, err := f.insertTx(ctx, conn, []event{
		{AggregateType: "Order", AggregateID: "o-0", EventType: "OrderCreated", Payload: `{"n": 0}`},
		{AggregateType: "Invoice", AggregateID: "i-0", EventType: "InvoiceIssued", Payload: `{"n": 0}`},
	})
	if err != nil {
		t.Fatal(err)
	}
	committed.waitIDs(60*time.Second, first)
	if _, err := conn.Exec(ctx, fmt.Sprintf(`INSERT INTO public.%s (aggregate_type, aggregate_id, event_type, payload)
		SELECT CASE WHEN g %% 2 = 0 THEN 'Order' ELSE 'Invoice' END, 'a-' || (g %% 97), 'Happened', jsonb_build_object('n', g)
		FROM generate_series(1, %d) g`, f.table, rows)); err != nil {
		t.Fatal(err)
	}
	var lo, hi int64
	if err := conn.QueryRow(ctx, fmt.Sprintf("SELECT min(id), max(id) FROM public.%s WHERE id > $1", f.table), first[1]).Scan(&lo, &hi); err != nil {
		t.Fatal(err)
	}
	if hi-lo+1 != rows {
		t.Fatalf("ids %d..%d for %d rows", lo, hi, rows)
	}
	inBig := func(recs []record) (n int) {
		for _, rec := range recs {
			if id, err := strconv.ParseInt(rec.Headers["id"], 10, 64); err == nil && id >= lo && id <= hi {
				n++
			}
		}
		return n
	}

	// The Kafka transaction is open: many of its records are acknowledged.
	// The path to PostgreSQL then goes silent. What the relay holds in its
	// socket and in flight (5,000 events) is far less than the 180,000
	// records still to come, so it cannot reach the commit: on a loaded
	// machine it could otherwise finish the transaction before the kill.
	waitFor(t, 120*time.Second, "a read_uncommitted consumer to see 20,000 records of the open transaction", func() bool {
		return inBig(raw.records()) >= 20000
	})
	px.Blackhole()
	if n := inBig(committed.records()); n != 0 {
		t.Fatalf("the read_committed consumer saw %d records of a transaction still open", n)
	}
	r.kill()
	if n := inBig(committed.records()); n != 0 {
		t.Fatalf("the read_committed consumer saw %d records of a transaction still open when the relay was killed", n)
	}
	seenRaw := inBig(raw.records())
	if seenRaw >= rows {
		t.Fatalf("the whole transaction (%d records) was acknowledged before the kill; the test needs it open", seenRaw)
	}
	// The killed relay's held connections close, so PostgreSQL frees the
	// slot for the next one.
	px.Resume()
	px.CutAll()

	r = startRelay(t, args)
	waitFor(t, 180*time.Second, fmt.Sprintf("the read_committed consumer to see all %d events", rows), func() bool {
		return inBig(committed.records()) >= rows
	})
	counts := map[int64]int{}
	topics := map[string]int{}
	for _, rec := range committed.records() {
		id, err := strconv.ParseInt(rec.Headers["id"], 10, 64)
		if err != nil || id < lo || id > hi {
			continue
		}
		counts[id]++
		topics[rec.Topic]++
	}
	for id := lo; id <= hi; id++ {
		if counts[id] != 1 {
			t.Fatalf("id %d read %d times by the read_committed consumer, want once", id, counts[id])
		}
	}
	if topics[f.topic("Order")] != rows/2 || topics[f.topic("Invoice")] != rows/2 {
		t.Fatalf("records per topic %v, want %d on each of the two", topics, rows/2)
	}
	waitFor(t, 60*time.Second, "the read_uncommitted consumer to see the committed records and the aborted ones", func() bool {
		return inBig(raw.records()) >= rows+seenRaw
	})
	t.Logf("%d records of the killed relay's open transaction were acknowledged and never shown to read_committed; %d delivered exactly once over 2 topics", seenRaw, rows)
	stillRunning(t, r)
}
