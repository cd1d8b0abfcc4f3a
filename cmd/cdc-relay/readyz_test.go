package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	relaypkg "github.com/cdc-relay/cdc-relay/relay"
)

// TestReadyzDegradedWhileKafkaIsDown: the broker stops while the relay
// streams; /readyz turns 503 degraded with a kafka reason (while /healthz
// stays 200: liveness must not restart a relay that waits for Kafka), the
// oldest in-flight event's age shows in the metric, and once the broker is
// back /readyz is 200 streaming again by itself and every row is in Kafka.
func TestReadyzDegradedWhileKafkaIsDown(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	f.ownBroker() // stopped below
	c := f.consume("^" + f.topicPrefix + `\..*`)
	r := startRelay(t, f.args())
	r.waitStreaming(60 * time.Second)
	conn := connect(t)
	insert := func(from, to int) []int64 { t.Helper(); return insertOrders(t, f, conn, from, to) }
	before := insert(0, 10)
	c.waitIDs(60*time.Second, before)
	waitFor(t, 30*time.Second, "/readyz 200 streaming", func() bool {
		code, body := r.getJSON("/readyz")
		return code == 200 && body["state"] == "streaming"
	})
	if v, err := r.metric("cdc_relay_degraded"); err != nil || v != 0 {
		t.Fatalf("cdc_relay_degraded = %v (%v) while Kafka is up, want 0", v, err)
	}

	restartBroker := f.stopBroker()
	during := insert(10, 20)
	var body map[string]string
	waitFor(t, 90*time.Second, "/readyz 503 degraded", func() bool {
		var code int
		code, body = r.getJSON("/readyz")
		return code == 503 && body["state"] == "degraded"
	})
	if !strings.HasPrefix(body["reason"], "kafka: ") {
		t.Fatalf("degraded reason = %q, want it to start with \"kafka: \"", body["reason"])
	}
	t.Logf("while the broker is down: %v", body)
	if code, _ := r.getJSON("/healthz"); code != 200 {
		t.Fatalf("/healthz = %d while degraded, want 200: a liveness probe would restart a relay that only waits for Kafka", code)
	}
	if v, err := r.metric("cdc_relay_oldest_in_flight_seconds"); err != nil || v <= 0 {
		t.Fatalf("cdc_relay_oldest_in_flight_seconds = %v (%v) with events waiting for Kafka, want > 0", v, err)
	}
	if v, err := r.metric("cdc_relay_degraded"); err != nil || v != 1 {
		t.Fatalf("cdc_relay_degraded = %v (%v) while /readyz answers degraded, want 1", v, err)
	}
	if v, err := r.metric("cdc_relay_active"); err != nil || v != 1 {
		t.Fatalf("cdc_relay_active = %v (%v) while degraded, want 1: the relay still holds the slot", v, err)
	}

	restartBroker()
	waitFor(t, 120*time.Second, "/readyz 200 streaming after the broker is back", func() bool {
		code, b := r.getJSON("/readyz")
		body = b
		return code == 200 && b["state"] == "streaming"
	})
	c.waitIDs(120*time.Second, append(before, during...))
	r.waitMetric("cdc_relay_oldest_in_flight_seconds", 30*time.Second, func(v float64) bool { return v == 0 })
	if v, err := r.metric("cdc_relay_degraded"); err != nil || v != 0 {
		t.Fatalf("cdc_relay_degraded = %v (%v) after recovery, want 0", v, err)
	}
	if code := r.terminate(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// insertOrders inserts OrderCreated rows from..to-1, one transaction each,
// and returns their ids.
func insertOrders(t *testing.T, f *fixture, conn *pgx.Conn, from, to int) []int64 {
	t.Helper()
	var ids []int64
	for i := from; i < to; i++ {
		agg := uuidFor(i % 5)
		got, err := f.insertTx(context.Background(), conn, []event{{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, i)}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, got...)
	}
	return ids
}

// TestReadyzDegradedByOldestInFlight: a broker that accepts produce
// requests and never answers them (blackholed behind a proxy) fails no
// request for 30 s (the request timeout), yet events wait: once the oldest
// has waited the real 30 s, /readyz says so, and the metric agrees. When
// the broker answers again, /readyz is 200 by itself and every row is in
// Kafka.
func TestReadyzDegradedByOldestInFlight(t *testing.T) {
	t.Parallel()
	px, b := proxiedBroker(t, nil)

	f := newFixture(t, "")
	c := consumeFrom(t, b.Addr(), "^"+f.topicPrefix+`\..*`)
	r := startRelay(t, f.args("--kafka-brokers", px.Addr()))
	r.waitStreaming(60 * time.Second)
	conn := connect(t)
	before := insertOrders(t, f, conn, 0, 5)
	c.waitIDs(90*time.Second, before)

	px.Blackhole()
	during := insertOrders(t, f, conn, 5, 10)
	var code int
	var body map[string]string
	waitFor(t, 90*time.Second, "/readyz 503 degraded by the oldest in-flight event", func() bool {
		code, body = r.getJSON("/readyz")
		return code == 503 && body["state"] == "degraded" && strings.HasPrefix(body["reason"], "kafka: oldest in-flight event waiting for ")
	})
	t.Logf("while the broker is blackholed: %v", body)
	if v, err := r.metric("cdc_relay_oldest_in_flight_seconds"); err != nil || v <= relaypkg.InFlightAgeLimit.Seconds() {
		t.Fatalf("cdc_relay_oldest_in_flight_seconds = %v (%v) while /readyz says %q, want > 30", v, err, body["reason"])
	}
	if code, _ := r.getJSON("/healthz"); code != 200 {
		t.Fatalf("/healthz = %d while degraded, want 200", code)
	}

	px.Resume()
	waitFor(t, 120*time.Second, "/readyz 200 streaming after the broker answers again", func() bool {
		code, body = r.getJSON("/readyz")
		return code == 200 && body["state"] == "streaming"
	})
	c.waitIDs(120*time.Second, append(before, during...))
	if code := r.terminate(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}
