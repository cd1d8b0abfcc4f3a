package replication

import (
	"testing"
	"time"
)

func TestTrackerConfirmsOnlyAcknowledgedPrefix(t *testing.T) {
	tr := NewTracker(100, 1000, 1<<20)
	now := time.Now()
	// tx A: 2 rows, ends at 200; tx B: 1 row, ends at 300; tx C: no rows, ends at 400.
	a1, _ := tr.Reserve(10)
	a2, _ := tr.Reserve(10)
	tr.Commit(200, now)
	b1, _ := tr.Reserve(10)
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
	s, _ := tr.Reserve(1)
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
				_, got := tr.Reserve(size)
				if got != tc.wantOK[i] {
					t.Fatalf("Reserve #%d(%d) = %v, want %v", i, size, got, tc.wantOK[i])
				}
			}
		})
	}
}

func TestTrackerAckSignalsRoom(t *testing.T) {
	tr := NewTracker(0, 1, 100)
	s, _ := tr.Reserve(1)
	if _, ok := tr.Reserve(1); ok {
		t.Fatal("second reserve should fail")
	}
	tr.Ack(s, 1, 1)
	select {
	case <-tr.Room():
	default:
		t.Fatal("Ack did not signal Room")
	}
	if _, ok := tr.Reserve(1); !ok {
		t.Fatal("reserve after ack failed")
	}
}

func BenchmarkTracker(b *testing.B) {
	b.ReportAllocs()
	tr := NewTracker(0, 1<<20, 1<<40)
	now := time.Now()
	for i := 0; i < b.N; i++ {
		s, _ := tr.Reserve(300)
		if i%10 == 9 {
			tr.Commit(LSN(i), now)
		}
		tr.Ack(s, 1, 300)
	}
}
