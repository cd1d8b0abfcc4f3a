package main

// The relay narrows GOMAXPROCS while it is quiet (internal/procs), unless
// GOMAXPROCS is set. relaytest starts every other test's relay with
// GOMAXPROCS=2; this one clears it.

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestProcsNarrowWhenQuiet: a relay without GOMAXPROCS in its environment
// runs on one processor once it has been quiet for a few seconds, and a
// burst that comes then, one single-row transaction and a 20,000-row one,
// reaches Kafka whole and in order.
func TestProcsNarrowWhenQuiet(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	r := startRelayEnv(t, f.args("--log-level", "debug"), []string{"GOMAXPROCS="})
	r.waitStreaming(60 * time.Second)
	r.waitMetric("go_sched_gomaxprocs_threads", 60*time.Second, func(v float64) bool { return v == 1 })
	if !strings.Contains(r.Output(), "gomaxprocs narrowed") {
		t.Fatalf("GOMAXPROCS is 1 but the relay did not log narrowing:\n%s", r.Output())
	}

	c := f.consume("^" + f.topic("Order") + "$")
	agg := uuidFor(1)
	one, err := f.insertTx(context.Background(), f.connect(), []event{{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	want := append(one, f.bigTx(20000)...)
	recs := c.waitIDs(2*time.Minute, want)
	checkAggregateOrder(t, recs, f.topic("Order"))
	if n := len(distinctIDs(recs)); n != len(want) {
		t.Fatalf("%d distinct ids in Kafka, want %d", n, len(want))
	}
}
