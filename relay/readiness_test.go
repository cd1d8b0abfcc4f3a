package relay

import (
	"testing"
	"time"

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
		{"failing for exactly 10s", now.Add(-ProduceFailingLimit), refused, 10 * time.Second, ""},
		{"failing for 14s", now.Add(-14600 * time.Millisecond), refused, 14 * time.Second,
			"kafka: produce requests failing for 14s: " + refused},
		{"failing without a message", now.Add(-11 * time.Second), "", time.Second, "kafka: produce requests failing for 11s"},
		{"failing, nothing in flight", now.Add(-time.Minute), refused, 0, ""},
		{"failure in the future (clock)", now.Add(time.Minute), refused, 0, ""},
		{"oldest 29s", time.Time{}, "", 29 * time.Second, ""},
		{"oldest exactly 30s", time.Time{}, "", InFlightAgeLimit, ""},
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
