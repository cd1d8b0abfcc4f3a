package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/checkpoint"
	"github.com/cdc-relay/cdc-relay/internal/rabbittest"
)

func ckpt(relay string, lsn uint64) *checkpoint.Record {
	return &checkpoint.Record{Kind: checkpoint.KindCheckpoint, RelayID: relay, Format: checkpoint.FormatFollows,
		LSN: fmt.Sprintf("0/%X", lsn), Timeline: 1, SystemID: "7300000000000000001", Database: "app",
		Slot: "slot", Publication: "pub", Version: "test", WrittenAt: time.Now().UTC(),
		// Some weight, so that retention has whole segments to drop.
		Tables: []string{"public.outbox", strings.Repeat("x", 400)}}
}

// TestCheckpointStreams: a relay stopped long ago keeps its checkpoint while
// another writes enough to make its own stream drop segments; gaps stay;
// everything survives a broker restart and is found by a new store.
func TestCheckpointStreams(t *testing.T) {
	sfx := fresh()
	n := startNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg := CheckpointConfig{URL: n.URL(), Name: "ckpt" + sfx, MaxBytes: 64 << 10, SegmentBytes: 16 << 10}
	s := NewCheckpointStore(cfg)
	defer s.Close()
	if exists, err := s.Ensure(ctx, false); err != nil || exists {
		t.Fatalf("Ensure(create=false) before any: %v, %v; want false, nil", exists, err)
	}
	if _, err := s.Load(ctx); err == nil {
		t.Fatal("Load of missing streams: no error; unreadable must be unknown, never empty")
	}
	if exists, err := s.Ensure(ctx, true); err != nil || !exists {
		t.Fatalf("Ensure(create=true): %v, %v", exists, err)
	}
	st, err := s.Load(ctx)
	if err != nil || len(st.Checkpoints) != 0 || len(st.Gaps) != 0 {
		t.Fatalf("Load of new streams: %+v, %v", st, err)
	}
	if err := s.Write(ctx, ckpt("quiet/relay", 0x100)); err != nil {
		t.Fatal(err)
	}
	gap := ckpt("quiet/relay", 0x200)
	gap.Kind, gap.Gap = checkpoint.KindGap, &checkpoint.Gap{FromLSN: "0/100", ToLSN: "0/200", Reason: "test", Via: "slot recreate"}
	if err := s.Write(ctx, gap); err != nil {
		t.Fatal(err)
	}
	const busy = 1500 // ~750 KB into a stream of at most 64 KB
	for i := uint64(1); i <= busy; i++ {
		if err := s.Write(ctx, ckpt("busy", 0x1000+i)); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string, s *CheckpointStore) {
		t.Helper()
		// Right after a restart the streams come up one by one; until then
		// Load fails (unknown), as the relay's Guard expects, and is asked
		// again.
		st, err := s.Load(ctx)
		for deadline := time.Now().Add(time.Minute); err != nil && time.Now().Before(deadline); {
			time.Sleep(200 * time.Millisecond)
			st, err = s.Load(ctx)
		}
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if r := st.Checkpoints["quiet/relay"]; r == nil || r.LSN != "0/100" {
			t.Fatalf("%s: the quiet relay's checkpoint is %+v, want 0/100", when, r)
		}
		if r := st.Checkpoints["busy"]; r == nil || r.LSN != fmt.Sprintf("0/%X", 0x1000+busy) {
			t.Fatalf("%s: the busy relay's checkpoint is %+v, want its last", when, r)
		}
		if len(st.Gaps) != 1 || st.Gaps[0].Gap.ToLSN != "0/200" {
			t.Fatalf("%s: gaps %+v", when, st.Gaps)
		}
	}
	check("after the writes", s)
	out, err := n.Ctl("list_queues", "-q", "--no-table-headers", "name", "messages")
	if err != nil {
		t.Fatal(err)
	}
	busyStream := s.relayStream("busy")
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == busyStream {
			if c, _ := strconv.Atoi(f[1]); c >= busy {
				t.Fatalf("%s holds %d messages: retention never dropped a segment, so the test shows nothing", busyStream, c)
			}
		}
	}
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	fresh := NewCheckpointStore(cfg)
	defer fresh.Close()
	check("after a broker restart, by a new store", fresh)
}

// TestCheckpointStoreBlocked: during a memory alarm (a node of the test's
// own: the alarm is node-wide) a checkpoint write and a load give up at
// once with ErrBlocked, naming the alarm, instead of waiting silently for
// it to clear, and a blocked store closes at once; once the alarm clears,
// both work again and the newest checkpoint is the one written last.
func TestCheckpointStoreBlocked(t *testing.T) {
	n := rabbittest.Own(t, rabbittest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := NewCheckpointStore(CheckpointConfig{URL: n.URL(), Name: "ckpt-blocked"})
	defer s.Close()
	if _, err := s.Ensure(ctx, true); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, ckpt("r", 0x100)); err != nil {
		t.Fatal(err)
	}
	if err := n.MemoryAlarm(true); err != nil {
		t.Fatal(err)
	}
	bctx, bcancel := context.WithTimeout(ctx, 30*time.Second)
	defer bcancel()
	began := time.Now()
	err := s.Write(bctx, ckpt("r", 0x200))
	if !errors.Is(err, ErrBlocked) || !strings.Contains(err.Error(), "low on memory") {
		t.Fatalf("Write during a memory alarm, after %s: %v; want ErrBlocked naming the alarm", time.Since(began).Round(time.Millisecond), err)
	}
	if _, err := s.Load(bctx); !errors.Is(err, ErrBlocked) {
		t.Fatalf("Load during a memory alarm: %v; want ErrBlocked", err)
	}
	if since, reason := s.Blocked(); since.IsZero() || since.Before(began.Add(-time.Second)) || !strings.Contains(reason, "low on memory") {
		t.Fatalf("Blocked during a memory alarm = %v, %q; want since the write, naming the alarm", since, reason)
	}
	// A declare waits for the alarm like a publish: Ensure gives up too.
	began = time.Now()
	if _, err := s.Ensure(bctx, true); !errors.Is(err, ErrBlocked) || time.Since(began) > 5*time.Second {
		t.Fatalf("Ensure during a memory alarm: %v after %s; want ErrBlocked at once", err, time.Since(began).Round(time.Millisecond))
	}
	// A blocked store closes at once: the broker reads nothing from a
	// blocked connection, its close included, until the alarm clears.
	other := NewCheckpointStore(CheckpointConfig{URL: n.URL(), Name: "ckpt-blocked"})
	if err := other.Write(bctx, ckpt("r2", 0x100)); !errors.Is(err, ErrBlocked) {
		t.Fatalf("Write of a second store during the alarm: %v; want ErrBlocked", err)
	}
	closed := make(chan struct{})
	go func() { other.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close of a blocked store still waits after 10 s")
	}
	if err := n.MemoryAlarm(false); err != nil {
		t.Fatal(err)
	}
	// The store learns from connection.unblocked that the alarm cleared,
	// idle as it is: Blocked applies the notification itself.
	waitFor(t, "Blocked to say the alarm cleared", time.Minute, func() bool {
		since, _ := s.Blocked()
		return since.IsZero()
	})
	waitFor(t, "a write once the alarm cleared", time.Minute, func() bool {
		err := s.Write(ctx, ckpt("r", 0x300))
		if err != nil && !errors.Is(err, ErrBlocked) {
			t.Fatal(err)
		}
		return err == nil
	})
	st, err := s.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Checkpoints["r"]; got == nil || got.LSN != "0/300" {
		t.Fatalf("newest checkpoint after the alarm: %+v, want 0/300", got)
	}
}
