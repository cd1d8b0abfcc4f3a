package checkpoint

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/replication"
)

// loadedGuard is a guard whose checkpoint topic has been read: own under
// the relay id, others of the same database and slot elsewhere.
func loadedGuard(own *Record, others ...*Record) *Guard {
	g := NewGuard(Config{Slot: "cdc_relay", RecreateInvalidated: false})
	g.loaded, g.id, g.own, g.others = true, "sys1/app/cdc_relay", own, others
	if own != nil {
		g.written = own.Position()
	}
	return g
}

func ckpt(sys string, lsn string, tli uint32) *Record {
	ct := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	return &Record{Kind: KindCheckpoint, RelayID: sys + "/app/cdc_relay", LSN: lsn, Timeline: tli, SystemID: sys, Database: "app", Slot: "cdc_relay", LastCommitTime: &ct}
}

func TestDecide(t *testing.T) {
	server := replication.Server{SystemID: "sys1", Timeline: 1, Database: "app"}
	slot := func(confirmed replication.LSN) replication.SlotInfo {
		return replication.SlotInfo{Type: "logical", Plugin: "pgoutput", WALStatus: "reserved", Confirmed: confirmed}
	}
	lost := replication.SlotInfo{Type: "logical", Plugin: "pgoutput", WALStatus: "lost", Confirmed: 0x100}
	history := func(h ...replication.TimelineSwitch) func(context.Context) ([]replication.TimelineSwitch, error) {
		return func(context.Context) ([]replication.TimelineSwitch, error) { return h, nil }
	}
	tests := []struct {
		name      string
		g         *Guard
		in        replication.GuardInput
		recreate  bool
		want      replication.Verdict
		wantErr   string // "" no error; else a substring of a fatal *GapError
		wantWarns string // substring of a warning
	}{
		{"first start", loadedGuard(nil), replication.GuardInput{Server: server, First: true}, false, replication.VerdictCreate, "", ""},
		{"no slot, a checkpoint", loadedGuard(ckpt("sys1", "0/200", 1)), replication.GuardInput{Server: server, First: true}, false, 0,
			"does not exist, but the relay's checkpoint (relay id sys1/app/cdc_relay) says it confirmed 0/200, last commit at 2026-12-01T10:00:00Z", ""},
		{"no slot after streaming, no checkpoint", loadedGuard(nil), replication.GuardInput{Server: server, First: false}, false, 0, "no checkpoint to say since when", ""},
		{"invalidated, a checkpoint", loadedGuard(ckpt("sys1", "0/200", 1)), replication.GuardInput{Server: server, Exists: true, Info: lost, First: true}, false, 0, "was invalidated (wal_status lost", ""},
		{"invalidated, no checkpoint", loadedGuard(nil), replication.GuardInput{Server: server, Exists: true, Info: lost, First: true}, false, 0, "was invalidated", ""},
		{"invalidated, --recreate-lost-slot", loadedGuard(ckpt("sys1", "0/200", 1)), replication.GuardInput{Server: server, Exists: true, Info: lost, First: true}, true, replication.VerdictRecreate, "", ""},
		{"conflicting", loadedGuard(nil), replication.GuardInput{Server: server, Exists: true, Info: replication.SlotInfo{Conflicting: true}, First: true}, false, 0, "conflicting with recovery", ""},
		{"no slot, another system's checkpoint", loadedGuard(nil, ckpt("sys0", "0/300", 1)), replication.GuardInput{Server: server, First: true}, false, 0,
			"under system identifier sys0 (relay id sys0/app/cdc_relay", ""},
		{"a slot, no checkpoint", loadedGuard(nil), replication.GuardInput{Server: server, Exists: true, Info: slot(0x100), First: true}, false, replication.VerdictStream, "", ""},
		{"a slot, another system's checkpoint: adopted", loadedGuard(nil, ckpt("sys0", "0/300", 1)), replication.GuardInput{Server: server, Exists: true, Info: slot(0x100), First: true}, false, replication.VerdictStream, "",
			"adopting the checkpoint"},
		{"a slot ahead", loadedGuard(ckpt("sys1", "0/200", 1)), replication.GuardInput{Server: server, Exists: true, Info: slot(0x300), First: true}, false, replication.VerdictStream, "", ""},
		{"a slot behind, same timeline", loadedGuard(ckpt("sys1", "0/200", 1)), replication.GuardInput{Server: server, Exists: true, Info: slot(0x100), First: true}, false, replication.VerdictStream, "",
			"events between 0/100 and 0/200 are published again"},
		{"a slot behind, exactly-once", func() *Guard { g := loadedGuard(ckpt("sys1", "0/200", 1)); g.cfg.ExactlyOnce = true; return g }(),
			replication.GuardInput{Server: server, Exists: true, Info: slot(0x100), First: true}, false, replication.VerdictStream, "",
			"the slot (confirmed 0/100) is behind the checkpoint (0/200): the transactions between them are in Kafka already and are skipped, not published again"},
		{"another timeline, checkpoint before the fork", loadedGuard(ckpt("sys1", "0/200", 1)),
			replication.GuardInput{Server: replication.Server{SystemID: "sys1", Timeline: 2, Database: "app"}, Exists: true, Info: slot(0x180), First: true,
				History: history(replication.TimelineSwitch{TLI: 1, Switch: 0x250})}, false, replication.VerdictStream, "", "behind the checkpoint"},
		{"another timeline, checkpoint beyond the fork", loadedGuard(ckpt("sys1", "0/300", 1)),
			replication.GuardInput{Server: replication.Server{SystemID: "sys1", Timeline: 2, Database: "app"}, Exists: true, Info: slot(0x180), First: true,
				History: history(replication.TimelineSwitch{TLI: 1, Switch: 0x250})}, false, 0, "forked off timeline 1 at 0/250, but the relay's checkpoint (relay id sys1/app/cdc_relay) is at 0/300 on timeline 1", ""},
		{"another timeline, only an idle position beyond the fork", loadedGuard(func() *Record { r := ckpt("sys1", "0/300", 1); r.LastCommitLSN = "0/240"; return r }()),
			replication.GuardInput{Server: replication.Server{SystemID: "sys1", Timeline: 2, Database: "app"}, Exists: true, Info: slot(0x240), First: true,
				History: history(replication.TimelineSwitch{TLI: 1, Switch: 0x250})}, false, replication.VerdictStream, "", "behind the checkpoint"},
		{"a checkpoint timeline not in the history", loadedGuard(ckpt("sys1", "0/300", 3)),
			replication.GuardInput{Server: replication.Server{SystemID: "sys1", Timeline: 2, Database: "app"}, Exists: true, Info: slot(0x400), First: true,
				History: history(replication.TimelineSwitch{TLI: 1, Switch: 0x250})}, false, 0, "timeline 3", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.g.cfg.RecreateInvalidated = tc.recreate
			tc.in.Slot = "cdc_relay"
			got, warns, err := tc.g.Decide(context.Background(), tc.in)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("error %v, want none", err)
				}
				if got != tc.want {
					t.Fatalf("verdict %d, want %d", got, tc.want)
				}
			} else {
				var gap *GapError
				if !errors.As(err, &gap) || !replication.IsFatal(err) {
					t.Fatalf("error %v, want a fatal *GapError", err)
				}
				if !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %q lacks %q", err, tc.wantErr)
				}
			}
			joined := strings.Join(warns, "\n")
			if tc.wantWarns == "" && joined != "" || !strings.Contains(joined, tc.wantWarns) {
				t.Fatalf("warnings %q, want %q", joined, tc.wantWarns)
			}
		})
	}
}

func TestGapErrorSuggestsReplaySince(t *testing.T) {
	err := (&GapError{Slot: "cdc_relay", What: "does not exist", Checkpoint: ckpt("sys1", "0/200", 1)}).Error()
	if !strings.Contains(err, "cdc-relay replay --since 2026-12-01T09:45:00Z") || !strings.Contains(err, "cdc-relay slot recreate --accept-gap") {
		t.Fatalf("message %q does not give both commands with a --since 15 minutes before the last commit", err)
	}
}

func TestRecordRoundTrip(t *testing.T) {
	r := ckpt("sys1", "1/2A", 2)
	r.Tables = []string{"public.outbox"}
	b, err := r.marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"kind":"checkpoint"`, `"relay_id":"sys1/app/cdc_relay"`, `"confirmed_lsn":"1/2A"`, `"timeline":2`, `"last_commit_time":"2026-12-01T10:00:00Z"`,
		`"system_identifier":"sys1"`, `"database":"app"`, `"slot":"cdc_relay"`, `"tables":["public.outbox"]`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("record JSON %s lacks %s", b, key)
		}
	}
	got, err := ParseRecord(b)
	if err != nil || got.Position() != 0x10000002A || got.Key() != "sys1/app/cdc_relay" {
		t.Fatalf("parsed %+v (%v)", got, err)
	}
	gap := &Record{Kind: KindGap, RelayID: "sys1/app/cdc_relay", Gap: &Gap{ToLSN: "0/300"}}
	if gap.Key() != "sys1/app/cdc_relay#gap@0/300" {
		t.Fatalf("gap key %q", gap.Key())
	}
	if _, err := ParseRecord([]byte(`{"confirmed_lsn":"0/1"}`)); err == nil {
		t.Fatal("a record without kind and relay id was accepted")
	}
}

// TestDecideMismatch: a checkpoint under the relay id that is another
// slot's, and an explicit relay id without one while the slot's checkpoint
// is under another id, are fatal *MismatchErrors naming --relay-id.
func TestDecideMismatch(t *testing.T) {
	server := replication.Server{SystemID: "sys1", Timeline: 1, Database: "app"}
	in := replication.GuardInput{Server: server, Slot: "cdc_relay", Exists: true, First: true,
		Info: replication.SlotInfo{Type: "logical", Plugin: "pgoutput", WALStatus: "reserved", Confirmed: 0x100}}
	other := ckpt("sys1", "0/200", 1)
	other.Slot = "billing"
	g := loadedGuard(other)
	renamed := loadedGuard(nil)
	renamed.cfg.RelayID, renamed.id, renamed.renamed = "orders-2", "orders-2", []*Record{ckpt("sys1", "0/200", 1)}
	for _, tc := range []struct {
		name string
		g    *Guard
		want string
	}{
		{"another slot", g, `--relay-id sys1/app/cdc_relay: its checkpoint is of slot "billing" in database app, but the relay is configured for slot "cdc_relay"`},
		{"renamed relay id", renamed, `--relay-id orders-2 has no checkpoint, but slot "cdc_relay" of database app has one under relay id sys1/app/cdc_relay`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := tc.g.Decide(context.Background(), in)
			var me *MismatchError
			if !errors.As(err, &me) || !replication.IsFatal(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want a fatal *MismatchError saying %q", err, tc.want)
			}
		})
	}
}

// TestFinalCheckpointWaitsWithinItsContext: a checkpoint write waiting for
// the one before it (held by Run's write while Kafka is down) gives up
// when its context ends, naming the wait, instead of waiting for that
// write without end.
func TestFinalCheckpointWaitsWithinItsContext(t *testing.T) {
	g := NewGuard(Config{Slot: "cdc_relay"})
	g.wmu <- struct{}{} // the write before it, in progress
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- g.Checkpoint(ctx, replication.Server{}, nil) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "wait for the checkpoint write before this one") || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Checkpoint = %v, want the wait for the write before it to end with the context", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Checkpoint still waits for the write before it 10 s into a 50 ms context")
	}
	<-g.wmu
	if err := g.lockWrites(context.Background()); err != nil {
		t.Fatalf("the lock once released: %v", err)
	}
}
