package slot

import (
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

	got := verdictText("s1", "cdc-relay.checkpoints", 0, gap, false, true)
	for _, want := range []string{"cdc-relay run exits 3", "confirmed 0/1954760", "cdc-relay slot recreate --accept-gap --reason TEXT", "cdc-relay replay --since " + since} {
		if !strings.Contains(got, want) {
			t.Errorf("dropped slot with a checkpoint: %q lacks %q", got, want)
		}
	}
	if strings.Contains(got, "creates it on first start") || strings.Contains(got, "first start, cdc-relay run creates") {
		t.Errorf("dropped slot with a checkpoint: %q promises a first start", got)
	}

	got = verdictText("s1", "cdc-relay.checkpoints", replication.VerdictCreate, nil, false, true)
	if !strings.Contains(got, "holds no checkpoint") || !strings.Contains(got, "first start") {
		t.Errorf("no checkpoint: %q, want a first start", got)
	}

	got = verdictText("s1", "", 0, nil, false, false)
	for _, want := range []string{"exits 3", "slot recreate --accept-gap --reason TEXT", "replay --since TIME", "without a checkpoint, run creates the slot on first start", "--kafka-brokers"} {
		if !strings.Contains(got, want) {
			t.Errorf("no Kafka settings: %q lacks %q", got, want)
		}
	}

	got = verdictText("s1", "ckpt", 0, replication.ErrCheckpointUnavailable, false, true)
	if !strings.Contains(got, "cannot be read") || !strings.Contains(got, "exits 3") {
		t.Errorf("unreadable checkpoint topic: %q", got)
	}

	// A lost slot stops run with or without a checkpoint.
	got = verdictText("s1", "", 0, nil, true, false)
	if !strings.HasPrefix(got, "cdc-relay run exits 3 (unless run has --recreate-lost-slot") || !strings.Contains(got, "slot recreate --accept-gap --reason TEXT") ||
		strings.Contains(got, "first start") || strings.Contains(got, "if the relay has a checkpoint") {
		t.Errorf("lost slot, no Kafka settings: %q", got)
	}
}
