package outbox

import (
	"regexp"
	"testing"
	"time"
)

var uuidV7 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestNewIDFormat(t *testing.T) {
	before := time.Now().UnixMilli()
	id := NewID()
	after := time.Now().UnixMilli()
	if !uuidV7.MatchString(id) {
		t.Fatalf("NewID() = %q, not a UUIDv7 in lowercase text form", id)
	}
	var ms int64
	for _, c := range id[:8] + id[9:13] {
		ms = ms<<4 | int64(hexVal(c))
	}
	if ms < before || ms > after {
		t.Errorf("timestamp of %s is %d ms, want within [%d, %d]", id, ms, before, after)
	}
}

func hexVal(c rune) int {
	if c >= 'a' {
		return int(c-'a') + 10
	}
	return int(c - '0')
}

func TestNewIDIncreases(t *testing.T) {
	prev := NewID()
	seen := map[string]bool{prev: true}
	for i := 0; i < 100000; i++ {
		id := NewID()
		if id <= prev {
			t.Fatalf("id %d: %s is not after %s", i, id, prev)
		}
		if seen[id] {
			t.Fatalf("duplicate id %s", id)
		}
		seen[id] = true
		prev = id
	}
}

func TestV7ClockGoesBack(t *testing.T) {
	var g v7
	var a, b [16]byte
	now := time.UnixMilli(1_700_000_000_000)
	g.fill(&a, now)
	g.fill(&b, now.Add(-time.Second)) // the clock stepped back
	if format(&b) <= format(&a) {
		t.Fatalf("after a clock step back %s is not after %s", format(&b), format(&a))
	}
	// The example from RFC 9562 appendix A.6: 0x017F22E279B0 ms.
	g = v7{}
	g.fill(&a, time.UnixMilli(0x017F22E279B0))
	if got := format(&a)[:13]; got != "017f22e2-79b0" {
		t.Errorf("timestamp bits = %s, want 017f22e2-79b0", got)
	}
}

// TestV7SameMillisecond: ids made while the clock stands still (more than
// the 4096 the sub-millisecond bits hold) still increase, carrying into the
// millisecond field; the outbox relies on this for ids in write order.
func TestV7SameMillisecond(t *testing.T) {
	var g v7
	now := time.UnixMilli(1_700_000_000_000)
	var b [16]byte
	prev := ""
	for i := range 5000 {
		g.fill(&b, now)
		id := format(&b)
		if id <= prev {
			t.Fatalf("id %d: %s is not after %s", i, id, prev)
		}
		prev = id
	}
	// 5000 ids from one sub-millisecond slot: the last is 4999 steps on,
	// in the next millisecond.
	if got, want := prev[:13], "018bcfe5-6801"; got != want {
		t.Errorf("last timestamp bits = %s, want %s", got, want)
	}
}

// BenchmarkNewID is the figure docs/DESIGN.md compares with google/uuid's
// NewV7().String().
func BenchmarkNewID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = NewID()
	}
}
