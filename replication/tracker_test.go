package replication

import (
	"testing"
	"time"
)

func TestTrackerConfirmsOnlyAcknowledgedPrefix(t *testing.T) {
	tr := NewTracker(100, 1000, 1<<20)
	now := time.Now()
	// tx A: 2 rows, ends at 200; tx B: 1 row, ends at 300; tx C: no rows, ends at 400.
	a1, _ := tr.Reserve(10, time.Now())
	a2, _ := tr.Reserve(10, time.Now())
	tr.Commit(200, now)
	b1, _ := tr.Reserve(10, time.Now())
	tr.Commit(300, now)
	tr.Commit(400, now)
	if got := tr.Confirmed(); got != 100 {
		t.Fatalf("before acks: Confirmed = %v, want 100", got)
	}
	tr.Ack(a1, 1, 10)
	if got := tr.Confirmed(); got != 100 {
		t.Fatalf("after half of A: Confirmed = %v, want 100", got)
	}
	tr.Ack(a2, 1, 10)
	if got := tr.Confirmed(); got != 200 {
		t.Fatalf("after A: Confirmed = %v, want 200", got)
	}
	if tr.AdvanceIdle(1000) {
		t.Fatal("AdvanceIdle succeeded with B in flight")
	}
	tr.Ack(b1, 1, 10)
	if got := tr.Confirmed(); got != 400 {
		t.Fatalf("after B: Confirmed = %v, want 400 (C has no rows)", got)
	}
	if !tr.AdvanceIdle(1000) || tr.Confirmed() != 1000 {
		t.Fatalf("idle advance: Confirmed = %v, want 1000", tr.Confirmed())
	}
	if tr.AdvanceIdle(900) || tr.Confirmed() != 1000 {
		t.Fatalf("idle advance went backwards: %v", tr.Confirmed())
	}
}

func TestTrackerRowsAckedBeforeCommitWaitForCommit(t *testing.T) {
	tr := NewTracker(0, 10, 1000)
	s, _ := tr.Reserve(1, time.Now())
	tr.Ack(s, 1, 1)
	if got := tr.Confirmed(); got != 0 {
		t.Fatalf("open transaction confirmed: %v", got)
	}
	tr.Commit(50, time.Now())
	if got := tr.Confirmed(); got != 50 {
		t.Fatalf("Confirmed = %v, want 50", got)
	}
}

func TestTrackerBoundsInFlight(t *testing.T) {
	tests := []struct {
		name      string
		maxEvents int
		maxBytes  int64
		sizes     []int
		wantOK    []bool
	}{
		{"events", 2, 1000, []int{1, 1, 1}, []bool{true, true, false}},
		{"bytes", 100, 100, []int{60, 50, 40}, []bool{true, false, true}},
		{"oversized first event admitted", 100, 10, []int{50, 1}, []bool{true, false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewTracker(0, tc.maxEvents, tc.maxBytes)
			for i, size := range tc.sizes {
				_, got := tr.Reserve(size, time.Now())
				if got != tc.wantOK[i] {
					t.Fatalf("Reserve #%d(%d) = %v, want %v", i, size, got, tc.wantOK[i])
				}
			}
		})
	}
}

func TestTrackerAckSignalsRoom(t *testing.T) {
	tr := NewTracker(0, 1, 100)
	s, _ := tr.Reserve(1, time.Now())
	if _, ok := tr.Reserve(1, time.Now()); ok {
		t.Fatal("second reserve should fail")
	}
	tr.Ack(s, 1, 1)
	select {
	case <-tr.Room():
	default:
		t.Fatal("Ack did not signal Room")
	}
	if _, ok := tr.Reserve(1, time.Now()); !ok {
		t.Fatal("reserve after ack failed")
	}
}

func BenchmarkTracker(b *testing.B) {
	b.ReportAllocs()
	tr := NewTracker(0, 1<<20, 1<<40)
	now := time.Now()
	for i := 0; i < b.N; i++ {
		s, _ := tr.Reserve(300, now)
		if i%10 == 9 {
			tr.Commit(LSN(i), now)
		}
		tr.Ack(s, 1, 300)
	}
}

// TestTrackerOldestInFlight: the age is that of the first unacknowledged
// event, through acks and through the ring of read times growing past its
// first size while events are in flight.
func TestTrackerOldestInFlight(t *testing.T) {
	tr := NewTracker(0, 10*initialReads, 1<<30)
	t0 := time.Now()
	if got := tr.OldestInFlight(t0); got != 0 {
		t.Fatalf("nothing in flight: OldestInFlight = %v, want 0", got)
	}
	n := 3*initialReads + 7 // grows the ring twice
	for i := 0; i < n; i++ {
		if _, ok := tr.Reserve(1, t0.Add(time.Duration(i)*time.Millisecond)); !ok {
			t.Fatalf("Reserve #%d refused", i)
		}
	}
	now := t0.Add(time.Hour)
	if got, want := tr.OldestInFlight(now), time.Hour; got != want {
		t.Fatalf("OldestInFlight = %v, want %v", got, want)
	}
	for _, acked := range []int{1, initialReads - 1, initialReads, 2*initialReads + 5, n - 1} {
		tr.Ack(uint64(acked), 0, 0)
		want := time.Hour - time.Duration(acked)*time.Millisecond
		if got := tr.OldestInFlight(now); got != want {
			t.Fatalf("after acking %d: OldestInFlight = %v, want %v", acked, got, want)
		}
	}
	tr.Ack(uint64(n), n, int64(n))
	if got := tr.OldestInFlight(now); got != 0 {
		t.Fatalf("all acknowledged: OldestInFlight = %v, want 0", got)
	}
	// The ring keeps working after the window wrapped around it.
	s, _ := tr.Reserve(1, now)
	if got, want := tr.OldestInFlight(now.Add(5*time.Second)), 5*time.Second; got != want {
		t.Fatalf("after wrap-around: OldestInFlight = %v, want %v (seq %d)", got, want, s)
	}
	// A read time after now (a caller's clock reading taken later) is no age.
	if got := tr.OldestInFlight(now.Add(-time.Second)); got != 0 {
		t.Fatalf("read after now: OldestInFlight = %v, want 0", got)
	}
}

// BenchmarkTrackerWindow reserves and acknowledges with thousands of events
// in flight, as under load: the ring of read times is indexed, never grown.
func BenchmarkTrackerWindow(b *testing.B) {
	b.ReportAllocs()
	const window = 4096
	tr := NewTracker(0, 1<<20, 1<<40)
	now := time.Now()
	for i := 0; i < window; i++ {
		tr.Reserve(300, now)
	}
	var acked uint64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tr.Reserve(300, now)
		acked++
		tr.Ack(acked, 1, 300)
		if i%10 == 9 {
			tr.Commit(LSN(i), now)
		}
	}
}

// TestTrackerConfirmsOnlyWhatACheckpointCovers: with RequireCheckpoint the
// acknowledged prefix is only Ready; Confirmed follows Checkpointed, never
// past Ready, and idle positions wait for a checkpoint the same way.
func TestTrackerConfirmsOnlyWhatACheckpointCovers(t *testing.T) {
	tr := NewTracker(100, 10, 1000)
	tr.RequireCheckpoint()
	ct := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	s, _ := tr.Reserve(1, time.Now())
	tr.Commit(200, ct)
	if _, _, _, ok := tr.Unwritten(); ok {
		t.Fatal("Unwritten before the row was acknowledged")
	}
	tr.Ack(s, 1, 1)
	select {
	case <-tr.Pending():
	default:
		t.Fatal("Pending not signalled when the prefix moved")
	}
	if got := tr.Confirmed(); got != 100 {
		t.Fatalf("Confirmed = %v before a checkpoint, want 100", got)
	}
	pos, end, at, ok := tr.Unwritten()
	if !ok || pos != 200 || end != 200 || !at.Equal(ct) {
		t.Fatalf("Unwritten = %v %v %v %v, want 200 200 %v true", pos, end, at, ok, ct)
	}
	tr.Checkpointed(150, 0, time.Time{})
	if got := tr.Confirmed(); got != 150 {
		t.Fatalf("Confirmed = %v after a checkpoint at 150, want 150", got)
	}
	tr.Checkpointed(pos, end, at)
	select {
	case <-tr.Progress():
	default:
		t.Fatal("Progress not signalled when the confirmed LSN moved")
	}
	if got := tr.Confirmed(); got != 200 {
		t.Fatalf("Confirmed = %v, want 200", got)
	}
	if e, c := tr.ConfirmedCommit(); e != 200 || !c.Equal(ct) {
		t.Fatalf("ConfirmedCommit = %v %v", e, c)
	}
	if _, _, _, ok := tr.Unwritten(); ok {
		t.Fatal("Unwritten after the checkpoint covered the prefix")
	}
	// An idle position waits for its checkpoint too, and keeps the last
	// transaction's end and time.
	if !tr.AdvanceIdle(500) || tr.Confirmed() != 200 || tr.Ready() != 500 {
		t.Fatalf("idle advance: Confirmed %v Ready %v, want 200 and 500", tr.Confirmed(), tr.Ready())
	}
	pos, end, at, ok = tr.Unwritten()
	if !ok || pos != 500 || end != 200 || !at.Equal(ct) {
		t.Fatalf("Unwritten = %v %v %v %v, want 500 200 %v true", pos, end, at, ok, ct)
	}
	tr.Checkpointed(900, end, at) // a checkpoint past Ready confirms only Ready
	if got := tr.Confirmed(); got != 500 {
		t.Fatalf("Confirmed = %v, want 500", got)
	}
}

// TestTrackerRetireWakesTheCheckpointWriter checks that Retire marks the
// tracker and signals Pending once more, so that a writer waiting on it
// wakes up and polls for the next connection's tracker.
func TestTrackerRetireWakesTheCheckpointWriter(t *testing.T) {
	tr := NewTracker(100, 10, 1000)
	if tr.Retired() {
		t.Fatal("Retired before Retire")
	}
	tr.Retire()
	if !tr.Retired() {
		t.Fatal("not Retired after Retire")
	}
	select {
	case <-tr.Pending():
	default:
		t.Fatal("Pending not signalled by Retire")
	}
	if _, _, _, ok := tr.Unwritten(); ok {
		t.Fatal("Unwritten reports progress that never was")
	}
}
