package relay

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/cdc-relay/cdc-relay/publisher"
	"github.com/cdc-relay/cdc-relay/rabbitmq"
	"github.com/cdc-relay/cdc-relay/replication"
)

// TestHandlerSpansRabbitMQ: under --rabbitmq-url a record's span follows
// OpenTelemetry's conventions for RabbitMQ: messaging.system rabbitmq, the
// exchange as the destination and the routing key in
// messaging.rabbitmq.destination.routing_key, no partition or offset (a
// confirm has none), and nothing names Kafka. A dead letter goes through
// the default exchange ("") to the dead-letter stream, and a routing key
// over 255 bytes makes one (error.type invalid_routing_key).
func TestHandlerSpansRabbitMQ(t *testing.T) {
	rk, err := rabbitmq.ParseRoutingKey("{aggregate_type}.{event_type}")
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", rabbitmq.MaxRoutingKeyBytes)
	tests := []struct {
		name      string
		payload   string
		eventType string
		wantName  string
		wantAttrs map[string]string
		wantError string // error.type, "" for none
		returned  bool   // the broker returns it (basic.return) before the confirm
	}{
		{"routed", `{"order_id": "agg-1"}`, "OrderCreated", "send outbox",
			map[string]string{"messaging.destination.name": "outbox", "messaging.rabbitmq.destination.routing_key": "Order.OrderCreated"}, "", false},
		{"returned unroutable", `{"order_id": "agg-1"}`, "OrderCreated", "send",
			map[string]string{"messaging.destination.name": "", "messaging.rabbitmq.destination.routing_key": "dlq"}, rabbitmq.KindUnroutable, true},
		{"routing key too long", `{"order_id": "agg-1"}`, long, "send",
			map[string]string{"messaging.destination.name": "", "messaging.rabbitmq.destination.routing_key": "dlq"}, rabbitmq.KindInvalidRouteKey, false},
		{"invalid event", `{"order_id": `, "OrderCreated", "send",
			map[string]string{"messaging.destination.name": "", "messaging.rabbitmq.destination.routing_key": "dlq"}, "invalid_payload", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			exp := tracetest.NewInMemoryExporter()
			p := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
			defer p.Shutdown(context.Background())
			sink := &fakeSink{}
			tr := &tracing{provider: p, tracer: p.Tracer("test"),
				rabbit: &rabbitmq.Format{Exchange: "outbox", RoutingKey: rk, DLQStream: "dlq"}}
			h := jsonHandler(t, sink, tr)
			stats := new(replication.Stats)
			h.metrics, h.log = NewMetrics(stats, NewLagRate(stats.LagBytes)), slog.New(slog.DiscardHandler)
			row := tracedRow(tracedRowHdr)
			row.Payload, row.EventType = []byte(tt.payload), []byte(tt.eventType)
			if err := h.Row(context.Background(), 1, 100, &replication.Tx{CommitTime: time.Now()}, row); err != nil {
				t.Fatal(err)
			}
			rec := sink.enqueued[0]
			if rec.OnAck == nil {
				t.Fatal("the record has no OnAck")
			}
			if tt.returned {
				h, ok := rec.OnAck.(publisher.ReturnHook)
				if !ok {
					t.Fatalf("the record's OnAck %T is no publisher.ReturnHook", rec.OnAck)
				}
				h.Returned(rabbitmq.KindUnroutable, "dlq") // as rabbitmq.Session on a basic.return
			}
			rec.OnAck.Acked(-1, -1) // as rabbitmq.Session confirms
			s, got := oneSpan(t, exp)
			if s.Name != tt.wantName {
				t.Errorf("span name %q, want %q", s.Name, tt.wantName)
			}
			want := map[string]string{"messaging.system": "rabbitmq", "messaging.operation.type": "send", "messaging.operation.name": "send",
				"messaging.message.id": "7", "error.type": tt.wantError}
			for k, v := range tt.wantAttrs {
				want[k] = v
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("attribute %s = %q, want %q", k, got[k], v)
				}
			}
			if _, ok := got["messaging.destination.name"]; !ok {
				t.Error("no messaging.destination.name: the exchange is required, \"\" for the default one")
			}
			for k, v := range got {
				if strings.Contains(k, "kafka") || strings.Contains(k, "partition") || strings.Contains(strings.ToLower(v), "kafka") {
					t.Errorf("attribute %s = %q under RabbitMQ", k, v)
				}
			}
			if wantErr := tt.wantError != ""; (s.Status.Code == codes.Error) != wantErr {
				t.Errorf("status %v, want an error: %v", s.Status, wantErr)
			}
		})
	}
}

// oneSpan is the one span exp holds, and its attributes as text.
func oneSpan(t *testing.T, exp *tracetest.InMemoryExporter) (tracetest.SpanStub, map[string]string) {
	t.Helper()
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans exported, want 1", len(spans))
	}
	got := map[string]string{}
	for _, a := range spans[0].Attributes {
		got[string(a.Key)] = a.Value.Emit()
	}
	return spans[0], got
}
