package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/publisher"
	"github.com/cdc-relay/cdc-relay/replication"
)

// TestKafkaDegraded is the degraded decision without services: failing
// produce requests count from the first failure after the last success and
// must last longer than 10 s, the oldest in-flight event longer than 30 s.
func TestKafkaDegraded(t *testing.T) {
	now := time.Now()
	const refused = "produce to t.Order[0]: dial tcp 127.0.0.1:9092: connect: connection refused"
	tests := []struct {
		name         string
		failingSince time.Time
		lastErr      string
		oldest       time.Duration
		want         string
	}{
		{"healthy", time.Time{}, "", 0, ""},
		{"events in flight, young", time.Time{}, "", 2 * time.Second, ""},
		{"failing for 5s", now.Add(-5 * time.Second), refused, 5 * time.Second, ""},
		{"failing for exactly 10s", now.Add(-produceFailingLimit), refused, 10 * time.Second, ""},
		{"failing for 14s", now.Add(-14600 * time.Millisecond), refused, 14 * time.Second,
			"kafka: produce requests failing for 14s: " + refused},
		{"failing without a message", now.Add(-11 * time.Second), "", time.Second, "kafka: produce requests failing for 11s"},
		{"failing, nothing in flight", now.Add(-time.Minute), refused, 0, ""},
		{"failure in the future (clock)", now.Add(time.Minute), refused, 0, ""},
		{"oldest 29s", time.Time{}, "", 29 * time.Second, ""},
		{"oldest exactly 30s", time.Time{}, "", inFlightAgeLimit, ""},
		{"oldest 35s", time.Time{}, "", 35400 * time.Millisecond, "kafka: oldest in-flight event waiting for 35s"},
		{"oldest 35s, failing for 3s", now.Add(-3 * time.Second), refused, 35 * time.Second, "kafka: oldest in-flight event waiting for 35s"},
		{"both: the failure is named", now.Add(-40 * time.Second), refused, 40 * time.Second,
			"kafka: produce requests failing for 40s: " + refused},
		{"a password in the error is redacted", now.Add(-12 * time.Second), "sasl postgres://relay:secret@db/app", time.Second,
			"kafka: produce requests failing for 12s: sasl postgres://relay:xxxxx@db/app"},
		{"over a minute", now.Add(-75 * time.Second), "EOF", 75 * time.Second, "kafka: produce requests failing for 1m15s: EOF"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := kafkaDegraded(tc.failingSince, tc.lastErr, tc.oldest, now); got != tc.want {
				t.Errorf("kafkaDegraded = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestReadinessOnlyWhileStreaming: a relay that is not streaming answers
// its own state, never degraded, however long Kafka has failed.
func TestReadinessOnlyWhileStreaming(t *testing.T) {
	r := &readiness{stats: &replication.Stats{}, kafka: func() publisher.Health {
		return publisher.Health{FailingSince: time.Now().Add(-time.Hour), LastError: "EOF"}
	}}
	if got := r.degraded(time.Now()); got != "" {
		t.Fatalf("degraded while %s = %q, want \"\"", r.stats.State(), got)
	}
}

// TestReadyzDegradedWhileKafkaIsDown: the broker stops while the relay
// streams; /readyz turns 503 degraded with a kafka reason (while /healthz
// stays 200: liveness must not restart a relay that waits for Kafka), the
// oldest in-flight event's age shows in the metric, and once the broker is
// back /readyz is 200 streaming again by itself and every row is in Kafka.
func TestReadyzDegradedWhileKafkaIsDown(t *testing.T) {
	f := newFixture(t, "")
	c := consume(t, "^"+f.topicPrefix+`\..*`)
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

	restartBroker := stopBroker(t)
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
	if v, err := r.metric("cdc_relay_oldest_in_flight_seconds"); err != nil || v <= inFlightAgeLimit.Seconds() {
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
