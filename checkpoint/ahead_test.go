package checkpoint

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/replication"
)

// scriptedBackend is a Kafka Backend whose Loads return states in turn,
// the last one for ever after.
type scriptedBackend struct {
	fakeBackend
	states []*State
	loads  int
}

func (s *scriptedBackend) Load(context.Context) (*State, error) {
	st := s.states[min(s.loads, len(s.states)-1)]
	s.loads++
	return st, nil
}

// TestAheadWaitsForItsOwnOpenTransactionOnly: a slot past the relay's own
// checkpoint is a gap, decided at once even while other relays' Kafka
// transactions on the shared topic are open (one killed leaves its own
// open for a minute). Only a transaction still open with a record under the
// relay's own key can hide a newer checkpoint: the guard reads the topic
// again until it is decided, a commit then covering the slot and an abort
// leaving the gap, and while it stays open the answer is unknown, never a
// gap. Its error tells an operator whether aborting that transaction is
// safe: not when the slot was confirmed into it, as the relay confirms
// only after Kafka acknowledged the commit (Kafka left a committed
// transaction hanging).
func TestAheadWaitsForItsOwnOpenTransactionOnly(t *testing.T) {
	server := replication.Server{SystemID: "sys1", Timeline: 1, Database: "app"}
	in := replication.GuardInput{Server: server, Slot: "cdc_relay"}
	const slot = replication.LSN(0x300)
	at := func(lsn string) *Record {
		r := ckpt("sys1", lsn, 1)
		r.Format = FormatFollows
		return r
	}
	own := at("0/0").RelayID
	// state has own's checkpoint at lsn, and transactions still open with
	// records under the keys open, none of them a checkpoint.
	state := func(lsn string, open ...string) *State {
		st := NewState(map[string]*Record{own: at(lsn)})
		for _, k := range open {
			if st.Open == nil {
				st.Open = map[string]*Record{}
			}
			st.Open[k] = nil
		}
		return st
	}
	// ownOpenAt is state with own's open transaction holding a checkpoint
	// at openLSN.
	ownOpenAt := func(lsn, openLSN string) *State {
		st := state(lsn, own)
		st.Open[own] = at(openLSN)
		return st
	}
	for _, tc := range []struct {
		name   string
		states []*State
		gap    bool
		// unknown: the answer stays unknown until the context (300 ms)
		// ends, not a gap.
		unknown bool
		loads   int    // Loads by Ahead, at least
		says    string // in the error of an unknown answer
	}{
		{"others' open transactions", []*State{state("0/200", "other/app/cdc_relay", "sys1/app/cdc_relay#gap@0/1")}, true, false, 1, ""},
		{"own open, then committed", []*State{state("0/200", own), state("0/200", own), state("0/300")}, false, false, 3, ""},
		{"own open, then aborted", []*State{state("0/200", own), state("0/200")}, true, false, 2, ""},
		{"no own checkpoint", []*State{{Checkpoints: map[string]*Record{}, Open: map[string]*Record{own: nil}}}, false, false, 1, ""},
		{"own stays open", []*State{ownOpenAt("0/200", "0/400")}, false, true, 2, "aborting it (kafka-transactions.sh abort) loses nothing"},
		{"own stays open, without a checkpoint", []*State{state("0/200", own)}, false, true, 2, "loses nothing"},
		{"own stays open, the slot confirmed into it", []*State{ownOpenAt("0/200", "0/300")}, false, true, 2, "Kafka left a committed transaction hanging, without its commit markers (kafka-transactions.sh find-hanging lists it). Do not abort it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &scriptedBackend{fakeBackend: fakeBackend{broker: Kafka}, states: tc.states}
			g := NewGuard(Config{Slot: "cdc_relay", Store: b})
			within := 30 * time.Second
			if tc.unknown {
				within = 300 * time.Millisecond
			}
			ctx, cancel := context.WithTimeout(context.Background(), within)
			defer cancel()
			in := in
			in.Info.Confirmed = slot
			err := g.Ahead(ctx, in)
			var gap *GapError
			switch {
			case tc.unknown:
				if errors.As(err, &gap) || !errors.Is(err, replication.ErrCheckpointUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("Ahead while the relay's own transaction stays open = %v, want the checkpoint unknown until its context ends, not a gap", err)
				}
				if !strings.Contains(err.Error(), tc.says) {
					t.Fatalf("Ahead while the relay's own transaction stays open = %v, want it to say %q", err, tc.says)
				}
			case errors.As(err, &gap) != tc.gap || (!tc.gap && err != nil):
				t.Fatalf("Ahead = %v, want a gap: %v", err, tc.gap)
			case ctx.Err() != nil:
				t.Errorf("Ahead waited for its whole context")
			}
			if tc.gap && gap.Ahead != slot {
				t.Errorf("the gap's slot position is %s, want %s", gap.Ahead, slot)
			}
			if b.loads < tc.loads {
				t.Errorf("the topic was read %d times, want at least %d", b.loads, tc.loads)
			}
		})
	}
}
