package replication

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestClassifyNamesTheBroker: a session's failure is the reconnect cause
// "kafka" under Kafka (and when no broker is given), "rabbitmq" under
// RabbitMQ; the other causes do not depend on the broker.
func TestClassifyNamesTheBroker(t *testing.T) {
	session := fmt.Errorf("%w: %w", errSession, errors.New("produce: broker down"))
	tests := []struct {
		name   string
		err    error
		broker string
		want   string
	}{
		{"session under Kafka", session, "Kafka", "kafka"},
		{"session, no broker given", session, "", "kafka"},
		{"session under RabbitMQ", session, "RabbitMQ", "rabbitmq"},
		{"checkpoint under RabbitMQ", fmt.Errorf("read: %w", ErrCheckpointUnavailable), "RabbitMQ", "checkpoint"},
		{"postgres under RabbitMQ", &pgconn.PgError{Code: "57P01"}, "RabbitMQ", "postgres_error"},
		{"silent under RabbitMQ", errStreamSilent, "RabbitMQ", "read_timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Config{Broker: tt.broker}
			c.setDefaults()
			if got := classify(tt.err, c.Broker); got != tt.want {
				t.Fatalf("classify = %q, want %q", got, tt.want)
			}
		})
	}
}

// pendingGuard is a Guard whose checkpoint holds a pending initial replay
// until a fixed instant; nothing else of it is called.
type pendingGuard struct{ until time.Time }

var _ InitialReplayGuard = (*pendingGuard)(nil)

func (g *pendingGuard) Check(context.Context, GuardInput) (Verdict, error) {
	return 0, errors.New("not called")
}
func (g *pendingGuard) SlotCreated(context.Context, GuardInput, SlotInfo, *SlotInfo) error {
	return errors.New("not called")
}
func (g *pendingGuard) Holding(context.Context, GuardInput, SlotInfo) error {
	return errors.New("not called")
}
func (g *pendingGuard) Checkpoint(context.Context, Server, *Tracker) error {
	return errors.New("not called")
}
func (g *pendingGuard) PendingReplay(context.Context, Server) (time.Time, bool, error) {
	return g.until, true, nil
}
func (g *pendingGuard) ReplayDone(context.Context, Server, SlotInfo) error {
	return errors.New("not called")
}

// TestPendingReplayWarningNamesTheBroker: a pending initial replay without
// --initial-replay says the rows may not all be in Kafka, word for word as
// before, or under RabbitMQ in RabbitMQ, never Kafka.
func TestPendingReplayWarningNamesTheBroker(t *testing.T) {
	until := time.Date(2026, 12, 7, 0, 30, 0, 0, time.UTC)
	const kafka = "the checkpoint holds a pending initial replay, but --initial-replay is not set: the rows created before the slot existed may not all be in Kafka; " +
		"publish them with (and run's other settings): cdc-relay replay --table public.outbox --since " + ReplaySince + " --until 2026-12-07T00:30:00Z"
	tests := []struct {
		broker string
		want   string
	}{
		{"", kafka},
		{"Kafka", kafka},
		{"RabbitMQ", strings.Replace(kafka, "in Kafka;", "in RabbitMQ;", 1)},
	}
	for _, tt := range tests {
		t.Run("broker "+tt.broker, func(t *testing.T) {
			var buf bytes.Buffer
			log := slog.New(slog.NewTextHandler(&buf, nil))
			s := NewStream(Config{URL: "postgres://relay@127.0.0.1:1/app", Broker: tt.broker, Logger: log}, Deps{Guard: &pendingGuard{until: until}})
			if err := s.initialReplay(context.Background(), nil, Server{}, SlotInfo{}); err != nil {
				t.Fatalf("initialReplay = %v, want nil (nothing to replay with)", err)
			}
			got := buf.String()
			if want := "msg=" + fmt.Sprintf("%q", tt.want) + " "; !strings.Contains(got, want) {
				t.Fatalf("log = %s\nwant the message %s", got, want)
			}
			if tt.broker == "RabbitMQ" && strings.Contains(got, "Kafka") {
				t.Fatalf("log under RabbitMQ names Kafka: %s", got)
			}
		})
	}
}
