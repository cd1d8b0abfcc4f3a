package slot

import (
	"errors"
	"fmt"
	"time"

	"github.com/cdc-relay/cdc-relay/checkpoint"
	"github.com/cdc-relay/cdc-relay/replication"
)

// verdictCase is one call of verdictText: the golden texts are
// testdata/texts/status-<name>-<broker>.txt.
type verdictCase struct {
	name    string
	topic   string // the checkpoint's place as Verdict names it under Kafka
	verdict replication.Verdict
	err     func(b checkpoint.Broker) error
	lost    bool
	read    bool // status has a broker's settings and read the checkpoint
}

func verdictCases() []verdictCase {
	commit := time.Date(2026, 12, 1, 10, 30, 0, 0, time.UTC)
	rec := &checkpoint.Record{RelayID: "7/db/s1", LSN: "0/1954760", LastCommitTime: &commit, WrittenAt: commit}
	gap := func(what string) func(b checkpoint.Broker) error {
		return func(b checkpoint.Broker) error {
			return replication.Fatal(&checkpoint.GapError{Broker: b, Slot: "s1", What: what, Checkpoint: rec})
		}
	}
	none := func(checkpoint.Broker) error { return nil }
	unavailable := func(checkpoint.Broker) error {
		return fmt.Errorf("%w: identify the server (a replication connection): connection refused", replication.ErrCheckpointUnavailable)
	}
	return []verdictCase{
		{"dropped-gap", "cdc-relay.checkpoints", 0, gap("does not exist"), false, true},
		{"lost-gap", "cdc-relay.checkpoints", 0, gap("was invalidated (wal_status lost)"), true, true},
		{"first-start", "cdc-relay.checkpoints", replication.VerdictCreate, none, false, true},
		{"dropped-unreadable", "cdc-relay.checkpoints", 0, unavailable, false, true},
		{"lost-unreadable", "cdc-relay.checkpoints", 0, unavailable, true, true},
		{"dropped-error", "cdc-relay.checkpoints", 0, func(checkpoint.Broker) error { return errors.New("--relay-id x: its checkpoint is of slot \"s2\"") }, false, true},
		{"dropped-unknown", "cdc-relay.checkpoints", replication.VerdictStream, none, false, true},
		{"dropped-no-broker", "", 0, none, false, false},
		{"lost-no-broker", "", 0, none, true, false},
	}
}
