package relay

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cdc-relay/cdc-relay/checkpoint"
	recordpkg "github.com/cdc-relay/cdc-relay/record"
	"github.com/cdc-relay/cdc-relay/replication"
)

// TestMetricHelpNamesTheBroker: under Kafka every metric's help is byte
// for byte the golden one, captured before the help learned of RabbitMQ;
// under RabbitMQ no help but the Kafka transactions' names Kafka or a
// dead-letter topic.
func TestMetricHelpNamesTheBroker(t *testing.T) {
	var stats replication.Stats
	want, err := os.ReadFile(filepath.Join("..", "testdata", "texts", "metrics-help-kafka.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []*Metrics{NewMetrics(&stats, NewLagRate(stats.LagBytes)), newMetrics(&stats, NewLagRate(stats.LagBytes), checkpoint.Kafka)} {
		if got := helps(t, m); got != string(want) {
			t.Errorf("Kafka's help:\n got %s\nwant %s", got, want)
		}
	}
	got := helps(t, newMetrics(&stats, NewLagRate(stats.LagBytes), checkpoint.RabbitMQ))
	for _, line := range strings.Split(strings.TrimSpace(got), "\n") {
		name, help, _ := strings.Cut(line, "\t")
		if strings.HasPrefix(name, "cdc_relay_kafka_") {
			continue
		}
		if strings.Contains(help, "Kafka") || strings.Contains(help, "dead-letter topic") || strings.Contains(help, "DLQ topic") {
			t.Errorf("under RabbitMQ %s's help names Kafka or a topic: %s", name, help)
		}
	}
	for _, want := range []string{
		"cdc_relay_dlq_events_total\tInvalid events sent to the dead-letter stream, by reason.",
		"cdc_relay_inflight_events\tEvents read and not yet confirmed by RabbitMQ.",
		"cdc_relay_backpressure\t1 while the reader waits for in-flight room: RabbitMQ is slower than the WAL and PostgreSQL holds the WAL.",
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("under RabbitMQ the help lacks %q", want)
		}
	}
}

// logLine is one JSON log line.
type logLine map[string]any

func jsonLines(t *testing.T, b *bytes.Buffer) []logLine {
	t.Helper()
	var lines []logLine
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		var m logLine
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		lines = append(lines, m)
	}
	return lines
}

// TestDeadLetterLogsNameTheBroker: the WARNs for an invalid event, a row
// of an unconfigured table and an unknown field sent to the dead letters
// say the dead-letter topic (key dlq_topic) under Kafka, word for word as
// before, and the dead-letter stream (key dlq_stream) under RabbitMQ,
// never Kafka or a topic.
func TestDeadLetterLogsNameTheBroker(t *testing.T) {
	kafka := []string{
		"invalid event sent to the dead-letter topic",
		"a row of a table that is not a configured outbox table arrived (the publication publishes it): sent to the dead-letter topic with its columns as text. " +
			"To publish such rows as events, configure the table as an outbox table (add --table public.other and restart), then send the dead letters on with cdc-relay dlq redrive --kind unconfigured_table; " +
			"otherwise drop the table from the publication (ALTER PUBLICATION … DROP TABLE public.other). Logged once a minute per table; counted in cdc_relay_unconfigured_rows_total",
		"payload field not in the event type's schema: sent to the dead-letter topic (--unknown-fields dlq, kind unknown_field): deploy a schema with the field, then run cdc-relay dlq redrive; " +
			"counted in cdc_relay_unknown_fields_total, logged once per event type and field",
	}
	for _, b := range []checkpoint.Broker{checkpoint.Kafka, checkpoint.RabbitMQ} {
		t.Run(b.String(), func(t *testing.T) {
			var buf bytes.Buffer
			log := slog.New(slog.NewJSONHandler(&buf, nil))
			var stats replication.Stats
			m := newMetrics(&stats, NewLagRate(stats.LagBytes), b)
			m.logUnknownFields(log, "dlq")
			h := handler{dlq: "outbox.dlq", broker: b, metrics: m, log: log}
			h.invalid(&recordpkg.Invalid{ID: "7", EventType: "OrderCreated", Reason: "bad", Kind: recordpkg.ReasonSchema}, 1)
			h.invalid(&recordpkg.Invalid{ID: "8", Table: "public.other", Reason: "unconfigured", Kind: recordpkg.ReasonUnconfigured}, 2)
			m.UnknownField("OrderCreated", "coupon")
			lines := jsonLines(t, &buf)
			if len(lines) != 3 {
				t.Fatalf("%d log lines, want 3:\n%s", len(lines), buf.String())
			}
			for i, l := range lines {
				msg, _ := l["msg"].(string)
				switch b {
				case checkpoint.Kafka:
					if msg != kafka[i] {
						t.Errorf("line %d under Kafka:\n got %s\nwant %s", i, msg, kafka[i])
					}
					if i < 2 && l["dlq_topic"] != "outbox.dlq" {
						t.Errorf("line %d under Kafka: dlq_topic = %v", i, l["dlq_topic"])
					}
				default:
					if want := strings.ReplaceAll(kafka[i], "the dead-letter topic", "the dead-letter stream"); msg != want {
						t.Errorf("line %d under RabbitMQ:\n got %s\nwant %s", i, msg, want)
					}
					if strings.Contains(msg, "Kafka") || strings.Contains(msg, "topic") {
						t.Errorf("line %d under RabbitMQ names Kafka or a topic: %s", i, msg)
					}
					if _, ok := l["dlq_topic"]; ok || (i < 2 && l["dlq_stream"] != "outbox.dlq") {
						t.Errorf("line %d under RabbitMQ: dlq_topic %v, dlq_stream %v; want dlq_stream only", i, l["dlq_topic"], l["dlq_stream"])
					}
				}
			}
		})
	}
}

// TestUndrainedMessage: the ERROR of a stop with events in flight names
// the broker they wait for; Kafka's texts are as before.
func TestUndrainedMessage(t *testing.T) {
	for _, tc := range []struct {
		exactlyOnce bool
		broker      checkpoint.Broker
		want        string
	}{
		{false, checkpoint.Kafka, "stopped on request before Kafka acknowledged every event in flight (--shutdown-timeout): " +
			"their LSN is not confirmed, so they are read from the slot and published again at the next start"},
		{false, "", "stopped on request before Kafka acknowledged every event in flight (--shutdown-timeout): " +
			"their LSN is not confirmed, so they are read from the slot and published again at the next start"},
		{true, checkpoint.Kafka, "stopped on request before every event in flight was committed to Kafka: " +
			"the open Kafka transaction is aborted, and its events are read again from the checkpoint at the next start"},
		{false, checkpoint.RabbitMQ, "stopped on request before RabbitMQ confirmed every event in flight (--shutdown-timeout): " +
			"their LSN is not confirmed, so they are read from the slot and published again at the next start"},
	} {
		if got := undrainedMessage(tc.exactlyOnce, tc.broker); got != tc.want {
			t.Errorf("undrainedMessage(%v, %q):\n got %s\nwant %s", tc.exactlyOnce, tc.broker, got, tc.want)
		}
	}
}
