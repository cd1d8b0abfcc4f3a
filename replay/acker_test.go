package replay

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/cdc-relay/cdc-relay/publisher"
	"github.com/cdc-relay/cdc-relay/rabbitmq"
)

// TestReplayLines: replay's per-event lines under Kafka are as they always
// were (topic=… key=…); under RabbitMQ they name the exchange and the
// routing key, or the dead-letter stream, as dlq redrive does, never a
// topic.
func TestReplayLines(t *testing.T) {
	tests := []struct {
		name string
		line replayLine
		want string
	}{
		{"kafka published", replayLine{id: "7", topic: "outbox.event.Order", key: "agg-1"},
			"published id=7 topic=outbox.event.Order key=agg-1"},
		{"kafka dead letter", replayLine{id: "7", topic: "dlq", key: "agg-1", reason: `not "json"`},
			`dead-lettered id=7 topic=dlq key=agg-1 reason="not \"json\""`},
		{"rabbitmq published", replayLine{rabbit: true, id: "7", topic: "outbox.event.Order", key: "agg-1", exchange: "outbox", routingKey: "OrderCreated"},
			"published id=7 exchange=outbox routing_key=OrderCreated"},
		{"rabbitmq dead letter of the record step", replayLine{rabbit: true, id: "7", topic: "outbox.dlq", key: "agg-1", reason: "no schema"},
			`dead-lettered id=7 dlq_stream=outbox.dlq reason="no schema"`},
		{"rabbitmq dead letter of the sink", replayLine{rabbit: true, id: "7", topic: "outbox.dlq", key: "agg-1", exchange: "outbox", routingKey: "OrderCreated", reason: "no queue"},
			`dead-lettered id=7 dlq_stream=outbox.dlq exchange=outbox routing_key=OrderCreated reason="no queue"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.line.String(); got != tt.want {
				t.Fatalf("line %q, want %q", got, tt.want)
			}
		})
	}
}

// TestRabbitLine: under RabbitMQ a record's line takes the exchange and the
// routing key the sink sends it to, a dead letter of the record step none;
// in a dry run a routing key over 255 bytes makes the line a dead letter
// (invalid_routing_key's reason, the dead-letter stream), and the row is
// counted as one; with a session the sink says so later (deadLettered).
func TestRabbitLine(t *testing.T) {
	rk, err := rabbitmq.ParseRoutingKey("{aggregate_type}.{event_type}")
	if err != nil {
		t.Fatal(err)
	}
	f := &rabbitmq.Format{Exchange: "outbox", RoutingKey: rk, DLQStream: "outbox.dlq"}
	rec := func(topic, eventType string) *publisher.Record {
		return &publisher.Record{Topic: topic, ID: []byte("7"), EventType: []byte(eventType), AggregateType: []byte("Order"), AggregateID: []byte("agg-1")}
	}
	long := strings.Repeat("x", rabbitmq.MaxRoutingKeyBytes)
	tests := []struct {
		name     string
		rec      *publisher.Record
		dryRun   bool
		want     string
		wantDead bool
	}{
		{"routed", rec("", "OrderCreated"), false, "published id=7 exchange=outbox routing_key=Order.OrderCreated", false},
		{"routed, dry run", rec("", "OrderCreated"), true, "published id=7 exchange=outbox routing_key=Order.OrderCreated", false},
		{"dead letter of the record step", rec("outbox.dlq", "OrderCreated"), false, `dead-lettered id=7 dlq_stream=outbox.dlq reason="no schema"`, false},
		{"key too long, dry run", rec("", long), true, "dead-lettered id=7 dlq_stream=outbox.dlq exchange=outbox routing_key=Order." + long + ` reason="the routing key is`, true},
		{"key too long, the sink tells", rec("", long), false, "published id=7 exchange=outbox routing_key=Order." + long, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := &replayRows{rabbit: f}
			if !tt.dryRun {
				rs.sess = rabbitSession{}
			}
			line := replayLine{id: "7", topic: tt.rec.Topic, key: "agg-1"}
			dead := rs.rabbitLine(&line, tt.rec)
			if tt.rec.Topic == f.DLQStream {
				line.reason = "no schema" // the record step's Invalid
			}
			if got := line.String(); !strings.HasPrefix(got, tt.want) || strings.Contains(got, "topic=") {
				t.Fatalf("line %q, want it to start with %q", got, tt.want)
			}
			if dead != tt.wantDead {
				t.Fatalf("dead letter %v, want %v", dead, tt.wantDead)
			}
		})
	}
}

// TestReplayAckerStopped: the acker's wait for room names the broker whose
// session stopped: Kafka's text as before.
func TestReplayAckerStopped(t *testing.T) {
	for broker, want := range map[string]string{"Kafka": "kafka session stopped", "RabbitMQ": "rabbitmq session stopped"} {
		a := newReplayAcker(&bytes.Buffer{}, broker, 1, 1, 1<<20)
		a.add(replayLine{seq: 1}, 1)
		done := make(chan struct{})
		close(done)
		if err := a.waitRoom(context.Background(), done); err == nil || err.Error() != want {
			t.Errorf("%s: waitRoom = %v, want %q", broker, err, want)
		}
	}
}
