package slot

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/checkpoint"
	"github.com/cdc-relay/cdc-relay/replication"
)

// TestStatusVerdictText: what status says run does with a missing slot.
// With a checkpoint (a *checkpoint.GapError from the guard): run exits 3,
// and the repair names slot recreate --accept-gap --reason TEXT and the
// replay --since of the checkpoint. Without Kafka settings it cannot tell,
// and says both cases, never just "the relay creates it on first start".
func TestStatusVerdictText(t *testing.T) {
	commit := time.Date(2026, 12, 1, 10, 30, 0, 0, time.UTC)
	rec := &checkpoint.Record{RelayID: "7/db/s1", LSN: "0/1954760", LastCommitTime: &commit, WrittenAt: commit}
	gap := replication.Fatal(&checkpoint.GapError{Slot: "s1", What: "does not exist", Checkpoint: rec})
	since := checkpoint.ReplaySince(rec).Format(time.RFC3339)

	got := verdictText("s1", "cdc-relay.checkpoints", checkpoint.Kafka, 0, gap, false, true)
	for _, want := range []string{"cdc-relay run exits 3", "confirmed 0/1954760", "cdc-relay slot recreate --accept-gap --reason TEXT", "cdc-relay replay --since " + since} {
		if !strings.Contains(got, want) {
			t.Errorf("dropped slot with a checkpoint: %q lacks %q", got, want)
		}
	}
	if strings.Contains(got, "creates it on first start") || strings.Contains(got, "first start, cdc-relay run creates") {
		t.Errorf("dropped slot with a checkpoint: %q promises a first start", got)
	}

	got = verdictText("s1", "cdc-relay.checkpoints", checkpoint.Kafka, replication.VerdictCreate, nil, false, true)
	if !strings.Contains(got, "holds no checkpoint") || !strings.Contains(got, "first start") {
		t.Errorf("no checkpoint: %q, want a first start", got)
	}

	got = verdictText("s1", "", checkpoint.Kafka, 0, nil, false, false)
	for _, want := range []string{"exits 3", "slot recreate --accept-gap --reason TEXT", "replay --since TIME", "without a checkpoint, run creates the slot on first start", "--kafka-brokers"} {
		if !strings.Contains(got, want) {
			t.Errorf("no Kafka settings: %q lacks %q", got, want)
		}
	}

	got = verdictText("s1", "ckpt", checkpoint.Kafka, 0, replication.ErrCheckpointUnavailable, false, true)
	if !strings.Contains(got, "cannot be read") || !strings.Contains(got, "exits 3") {
		t.Errorf("unreadable checkpoint topic: %q", got)
	}

	// A lost slot stops run with or without a checkpoint.
	got = verdictText("s1", "", checkpoint.Kafka, 0, nil, true, false)
	if !strings.HasPrefix(got, "cdc-relay run exits 3 (unless run has --recreate-lost-slot") || !strings.Contains(got, "slot recreate --accept-gap --reason TEXT") ||
		strings.Contains(got, "first start") || strings.Contains(got, "if the relay has a checkpoint") {
		t.Errorf("lost slot, no Kafka settings: %q", got)
	}
}

var update = flag.Bool("update", false, "rewrite testdata/texts/status-*-rabbitmq.txt from the texts as they are now (the Kafka ones are the contract and are never rewritten)")

// TestStatusVerdictGolden: under Kafka each of status's verdicts is byte
// for byte the golden one, captured before the texts learned of RabbitMQ;
// given no broker, the Kafka text is kept whole and the RabbitMQ settings
// follow it. Under RabbitMQ each names RabbitMQ or its checkpoint
// streams, never Kafka or a topic.
func TestStatusVerdictGolden(t *testing.T) {
	for _, c := range verdictCases() {
		t.Run(c.name, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join("..", "testdata", "texts", "status-"+c.name+"-kafka.txt"))
			if err != nil {
				t.Fatal(err)
			}
			got := verdictText("s1", c.topic, checkpoint.Kafka, c.verdict, c.err(checkpoint.Kafka), c.lost, c.read) + "\n"
			if !c.read {
				want = []byte(strings.TrimSuffix(string(want), "\n") + rabbitSettings + "\n")
			}
			if got != string(want) {
				t.Errorf("Kafka:\n got %s\nwant %s", got, want)
			}
			if !c.read {
				return
			}

			got = verdictText("s1", "cdc-relay.checkpoints.*", checkpoint.RabbitMQ, c.verdict, c.err(checkpoint.RabbitMQ), c.lost, c.read)
			if strings.Contains(got, "Kafka") || strings.Contains(got, "topic") {
				t.Errorf("under RabbitMQ the verdict names Kafka or a topic: %s", got)
			}
			if !strings.Contains(got, "RabbitMQ") && !strings.Contains(got, "the checkpoint streams cdc-relay.checkpoints.*") {
				t.Errorf("under RabbitMQ the verdict names neither RabbitMQ nor the checkpoint streams: %s", got)
			}
			golden := filepath.Join("..", "testdata", "texts", "status-"+c.name+"-rabbitmq.txt")
			if *update {
				if err := os.WriteFile(golden, []byte(got+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if want, err = os.ReadFile(golden); err != nil {
				t.Fatal(err)
			}
			if got+"\n" != string(want) {
				t.Errorf("RabbitMQ:\n got %s\nwant %s", got, want)
			}
		})
	}
}
