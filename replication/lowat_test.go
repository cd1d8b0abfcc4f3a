package replication

import (
	"testing"
	"time"
)

// testGather is the Gather of the gatherer tests.
const testGather = 2 * time.Millisecond

// feedGatherer starts g at start, then notes a read every gap for span,
// each finding txs transactions of size bytes; it returns the last read's
// time.
func feedGatherer(g *gatherer, start time.Time, gap time.Duration, txs, size int, span time.Duration) time.Time {
	g.read(start, testGather)
	at := start
	for at.Sub(start) < span {
		at = at.Add(gap)
		g.read(at, testGather)
		g.bytes += txs * size
		g.commits += txs
	}
	return at
}

// TestGathererRate: the wake-up size is the bytes of the transactions a
// Gather brings and the one that began the wait, at the rate a window
// measured; off where a Gather brings less than one.
func TestGathererRate(t *testing.T) {
	cases := []struct {
		name string
		gap  time.Duration
		txs  int
		size int
		want int // 0: wakes on the first bytes
	}{
		// 1k/s of 600-byte transactions: two a Gather, and the first.
		{name: "1k/s", gap: time.Millisecond, txs: 1, size: 600, want: 1800},
		// 300/s: less than a transaction a Gather.
		{name: "300/s", gap: 3300 * time.Microsecond, txs: 1, size: 600, want: 0},
		// 20k/s: 40 transactions a Gather, and the first.
		{name: "20k/s", gap: time.Millisecond, txs: 20, size: 600, want: 41 * 600},
		// A 200 KB transaction a millisecond: capped.
		{name: "large", gap: time.Millisecond, txs: 1, size: 200 << 10, want: streamLowat},
		// A 200 KB transaction every 5 ms: less than one a Gather.
		{name: "large and slow", gap: 5 * time.Millisecond, txs: 1, size: 200 << 10, want: 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var g gatherer
			feedGatherer(&g, time.Unix(1_700_000_000, 0), c.gap, c.txs, c.size, 20*testGather)
			if g.lowat != c.want {
				t.Fatalf("lowat %d, want %d", g.lowat, c.want)
			}
		})
	}
}

// TestGathererQuiet: a read after a silence of more than four Gathers
// wakes on the first bytes again, until a new window has measured.
func TestGathererQuiet(t *testing.T) {
	var g gatherer
	at := feedGatherer(&g, time.Unix(1_700_000_000, 0), time.Millisecond, 1, 600, 10*time.Millisecond)
	if g.lowat == 0 {
		t.Fatal("lowat 0 at 1k/s, want the bytes of a Gather")
	}
	at = at.Add(5 * testGather)
	g.read(at, testGather)
	if g.lowat != 0 {
		t.Fatalf("lowat %d after a silence, want 0", g.lowat)
	}
	at = at.Add(time.Millisecond)
	g.read(at, testGather)
	if g.lowat != 0 {
		t.Fatalf("lowat %d before a window measured, want 0", g.lowat)
	}
}
