package relay

import (
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/cdc-relay/cdc-relay/rabbitmq"
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
