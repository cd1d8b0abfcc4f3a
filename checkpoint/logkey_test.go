package checkpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/cdc-relay/cdc-relay/replication"
)

// TestCheckpointLogKey: the guard's lines name where the checkpoint lives
// under checkpoint_topic, as they always did, or under RabbitMQ under
// checkpoint_stream (its streams' prefix), never checkpoint_topic.
func TestCheckpointLogKey(t *testing.T) {
	server := replication.Server{SystemID: "sys1", Timeline: 1, Database: "app"}
	for b, want := range map[Broker]string{Kafka: "checkpoint_topic", RabbitMQ: "checkpoint_stream"} {
		t.Run(b.String(), func(t *testing.T) {
			if got := b.LogKey(); got != want {
				t.Fatalf("LogKey = %q, want %q", got, want)
			}
			// The ERROR of a gap accepted under --recreate-lost-slot.
			var buf bytes.Buffer
			g := NewGuard(Config{Slot: "cdc_relay", Store: &fakeBackend{broker: b}, Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
			g.loaded, g.id = true, "sys1/app/cdc_relay"
			if err := g.SlotCreated(context.Background(), replication.GuardInput{Server: server, Slot: "cdc_relay"}, replication.SlotInfo{Confirmed: 0x300}, &replication.SlotInfo{Confirmed: 0x200}); err != nil {
				t.Fatal(err)
			}
			var line map[string]any
			if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
				t.Fatalf("%v: %s", err, buf.String())
			}
			if line[want] != "ckpt" {
				t.Errorf("%s = %v, want ckpt: %s", want, line[want], buf.String())
			}
			if b == RabbitMQ && line["checkpoint_topic"] != nil {
				t.Errorf("checkpoint_topic under RabbitMQ: %s", buf.String())
			}
		})
	}
}
