package relay

import (
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/cdc-relay/cdc-relay/checkpoint"
	"github.com/cdc-relay/cdc-relay/rabbitmq"
	"github.com/cdc-relay/cdc-relay/replication"
)

var amqp406 = amqp.Error{Code: amqp.PreconditionFailed, Reason: "PRECONDITION_FAILED - inequivalent arg 'type'"}

// TestRabbitDegraded: a memory or disk alarm degrades after 10 s even with
// nothing in flight; a failing connection only while events wait; an old
// in-flight event after 30 s.
func TestRabbitDegraded(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name   string
		h      rabbitmq.Health
		oldest time.Duration
		want   string
	}{
		{"healthy", rabbitmq.Health{}, 0, ""},
		{"blocked 5s", rabbitmq.Health{BlockedSince: now.Add(-5 * time.Second), BlockReason: "low on memory"}, 0, ""},
		{"blocked 12s, idle", rabbitmq.Health{BlockedSince: now.Add(-12 * time.Second), BlockReason: "low on memory"}, 0,
			"rabbitmq: the broker has blocked publishing for 12s (connection.blocked, a memory or disk alarm: low on memory)"},
		{"failing 20s, idle", rabbitmq.Health{FailingSince: now.Add(-20 * time.Second), LastError: "refused"}, 0, ""},
		{"failing 20s, events wait", rabbitmq.Health{FailingSince: now.Add(-20 * time.Second), LastError: "amqp://u:pw@h/ refused"}, time.Second,
			"rabbitmq: cannot connect for 20s: amqp://u:xxxxx@h/ refused"},
		{"oldest 31s", rabbitmq.Health{}, 31 * time.Second, "rabbitmq: oldest in-flight event waiting for 31s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := rabbitDegraded(tt.h, tt.oldest, now); got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

// TestRabbitConfigErr: the errors no reconnect fixes name the setting.
func TestRabbitConfigErr(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{&rabbitmq.ExchangeError{Exchange: "outbox", Err: &amqp406}, "--rabbitmq-exchange: exchange \"outbox\" exists with another type"},
		{&rabbitmq.StreamError{Stream: "outbox.dlq", Err: &amqp406}, "--rabbitmq-dlq-stream: queue \"outbox.dlq\" exists with other arguments"},
		{&rabbitmq.MissingError{Kind: "exchange", Name: "outbox", Err: &amqp406}, "--rabbitmq-exchange: exchange \"outbox\" does not exist"},
		{rabbitmq.ErrDeadLetterUnroutable, "--rabbitmq-dlq-stream: the broker returned a dead letter"},
	}
	for _, tt := range tests {
		err := rabbitErr(tt.err)
		if got, ok := ConfigExit(err); !ok || len(got) < len(tt.want) || got[:len(tt.want)] != tt.want {
			t.Errorf("%v: got %q (a configuration exit: %v), want %q…", tt.err, got, ok, tt.want)
		}
	}
	if rabbitErr(nil) != nil {
		t.Error("nil is an error")
	}
}

// blockedStore is a checkpoint.Backend whose connection is blocked since
// since (zero: not blocked).
type blockedStore struct {
	checkpoint.Backend
	since  time.Time
	reason string
}

func (b *blockedStore) Blocked() (time.Time, string) { return b.since, b.reason }

// TestRabbitHealthBlocked: the gauge and /readyz see the broker's alarm
// when either the publisher's connection or the checkpoint store's is
// blocked, since the earlier; a store of another kind adds nothing.
func TestRabbitHealthBlocked(t *testing.T) {
	now := time.Now()
	early, late := now.Add(-20*time.Second), now.Add(-5*time.Second)
	sink := func(since time.Time) func() rabbitmq.Health {
		return func() rabbitmq.Health {
			if since.IsZero() {
				return rabbitmq.Health{}
			}
			return rabbitmq.Health{BlockedSince: since, BlockReason: "publisher: low on memory"}
		}
	}
	tests := []struct {
		name       string
		sink       time.Time
		store      checkpoint.Backend
		wantSince  time.Time
		wantReason string
	}{
		{"neither", time.Time{}, &blockedStore{}, time.Time{}, ""},
		{"the checkpoint store only", time.Time{}, &blockedStore{since: late, reason: "store: low on memory"}, late, "store: low on memory"},
		{"the publisher only", late, &blockedStore{}, late, "publisher: low on memory"},
		{"both, the store first", late, &blockedStore{since: early, reason: "store: low on memory"}, early, "store: low on memory"},
		{"both, the publisher first", early, &blockedStore{since: late, reason: "store: low on memory"}, early, "publisher: low on memory"},
		{"a Kafka store", time.Time{}, checkpoint.NewStore(nil, nil, "ckpt"), time.Time{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := rabbitHealth(sink(tt.sink), tt.store)()
			if !h.BlockedSince.Equal(tt.wantSince) || h.BlockReason != tt.wantReason {
				t.Errorf("got blocked since %v (%q), want %v (%q)", h.BlockedSince, h.BlockReason, tt.wantSince, tt.wantReason)
			}
		})
	}

	// The gauge reads it.
	var stats replication.Stats
	m := newMetrics(&stats, NewLagRate(stats.LagBytes), checkpoint.RabbitMQ)
	store := &blockedStore{}
	m.ready.rabbitmq = rabbitHealth(sink(time.Time{}), store)
	gauge := func() float64 {
		t.Helper()
		families, err := m.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() == "cdc_relay_rabbitmq_blocked" {
				return f.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("no cdc_relay_rabbitmq_blocked")
		return 0
	}
	if got := gauge(); got != 0 {
		t.Errorf("cdc_relay_rabbitmq_blocked = %v with nothing blocked, want 0", got)
	}
	store.since, store.reason = late, "low on memory"
	if got := gauge(); got != 1 {
		t.Errorf("cdc_relay_rabbitmq_blocked = %v with the checkpoint store blocked, want 1", got)
	}
}
