package relay

import (
	"time"

	"github.com/cdc-relay/cdc-relay/checkpoint"
	"github.com/cdc-relay/cdc-relay/publisher"
	"github.com/cdc-relay/cdc-relay/rabbitmq"
	"github.com/cdc-relay/cdc-relay/replication"
)

// The thresholds past which a streaming relay is degraded: /readyz answers
// 503 {"state":"degraded","reason":"kafka: ..."} and cdc_relay_degraded is
// 1. They are the contract of the degraded state, not settings.
const (
	// ProduceFailingLimit: produce requests have failed, with no success
	// in between, for longer than this, while events wait.
	ProduceFailingLimit = 10 * time.Second
	// InFlightAgeLimit: the oldest event read from the slot and not yet
	// acknowledged by Kafka has waited longer than this.
	InFlightAgeLimit = 30 * time.Second
)

// readiness is what /readyz and cdc_relay_degraded read beyond the
// stream's lifecycle state: Kafka's side.
type readiness struct {
	stats *replication.Stats
	// broker names the broker in the reasons.
	broker checkpoint.Broker
	// kafka is the publisher's Health; nil until the publisher exists.
	kafka func() publisher.Health
	// rabbitmq, set instead of kafka under --rabbitmq-url, is the RabbitMQ
	// sink's Health.
	rabbitmq func() rabbitmq.Health
	// checkpoint is the checkpoint writes' health (checkpoint.Guard's
	// WriteHealth): the error of the last and since when they fail.
	checkpoint func() (error, time.Time)
}

// degraded returns why a streaming relay is degraded, or "" when it is not
// streaming or not degraded.
func (r *readiness) degraded(now time.Time) string {
	if r.stats.State() != replication.StateStreaming {
		return ""
	}
	var h publisher.Health
	if r.kafka != nil {
		h = r.kafka()
	}
	if r.rabbitmq != nil {
		if reason := rabbitDegraded(r.rabbitmq(), r.stats.OldestInFlight(now), now); reason != "" {
			return reason
		}
	} else if reason := kafkaDegraded(h.FailingSince, h.LastError, r.stats.OldestInFlight(now), now); reason != "" {
		return reason
	}
	if r.checkpoint != nil {
		err, since := r.checkpoint()
		return checkpointDegraded(err, since, now)
	}
	return ""
}

// checkpointDegraded is the degraded decision for the checkpoint: writes
// that have failed for longer than ProduceFailingLimit hold the slot, as
// nothing is confirmed past the last durable checkpoint, even while no
// event waits.
func checkpointDegraded(err error, since, now time.Time) string {
	if err == nil {
		return ""
	}
	d := now.Sub(since)
	if d <= ProduceFailingLimit {
		return ""
	}
	return "checkpoint: writes failing for " + d.Truncate(time.Second).String() + ", so nothing is confirmed to PostgreSQL and the slot holds WAL: " + Redact(err.Error())
}

// kafkaDegraded is the degraded decision: given since when produce
// requests have failed (zero: the newest succeeded, or none failed), the
// newest failure, the oldest in-flight event's age and now, it returns the
// reason, or "" when Kafka keeps up. Failing produce requests are named
// first: their error says more than the age they cause. They count only
// while an event waits (oldest > 0): a failure nothing retries any more
// (its session ended and nothing was read again yet) blocks nothing.
func kafkaDegraded(failingSince time.Time, lastErr string, oldest time.Duration, now time.Time) string {
	if !failingSince.IsZero() && oldest > 0 {
		if d := now.Sub(failingSince); d > ProduceFailingLimit {
			reason := "kafka: produce requests failing for " + d.Truncate(time.Second).String()
			if lastErr != "" {
				reason += ": " + Redact(lastErr)
			}
			return reason
		}
	}
	if oldest > InFlightAgeLimit {
		return "kafka: oldest in-flight event waiting for " + oldest.Truncate(time.Second).String()
	}
	return ""
}
