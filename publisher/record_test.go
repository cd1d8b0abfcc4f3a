package publisher

import "testing"

// TestFreeListReusesLastReleased checks that NewRecord hands out the record
// released last, with its buffer, and that a trim drops the records
// released longest ago, keeping keepFreeRecords.
func TestFreeListReusesLastReleased(t *testing.T) {
	free.mu.Lock()
	saved := free.recs
	free.recs, free.low = nil, 0
	free.mu.Unlock()
	t.Cleanup(func() {
		free.mu.Lock()
		free.recs, free.low = saved, 0
		free.mu.Unlock()
	})

	a, b := NewRecord(), NewRecord()
	a.buf = make([]byte, 0, 100)
	b.buf = make([]byte, 0, 200)
	a.Seq, b.Seq = 1, 2
	Release(a)
	Release(b)
	if r := NewRecord(); r != b || cap(r.Buffer(0)) != 200 || r.Seq != 0 {
		t.Fatalf("NewRecord after releasing a then b: got %p (seq %d, buffer %d), want b (%p) emptied, its 200-byte buffer kept", r, r.Seq, cap(r.buf), b)
	}
	if r := NewRecord(); r != a {
		t.Fatalf("second NewRecord: got %p, want a (%p)", r, a)
	}

	const total = keepFreeRecords + 1000
	recs := make([]*Record, total)
	for i := range recs {
		recs[i] = NewRecord()
	}
	for _, r := range recs {
		Release(r)
	}
	NewRecord()
	// As if total-1 records had stayed unused since the last trim (under
	// the lock: the relay's own trim runs in the background): the trim
	// drops half of those above keepFreeRecords, from the bottom.
	free.mu.Lock()
	free.low = total - 1
	trimFreeLocked()
	n, bottom, top := len(free.recs), free.recs[0], free.recs[len(free.recs)-1]
	free.mu.Unlock()
	drop := (total - 1 - keepFreeRecords) / 2
	if n != total-1-drop {
		t.Fatalf("after the trim the list holds %d records, want %d", n, total-1-drop)
	}
	if bottom != recs[drop] || top != recs[total-2] {
		t.Fatalf("the trim kept the wrong records: bottom is not the %dth released, or top is not the %dth", drop, total-2)
	}
}
