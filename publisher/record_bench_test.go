package publisher

import (
	"testing"
	"time"
)

// BenchmarkRecordReuse takes records from the free list, fills them as the
// record builder does (a timestamp, a 700-byte buffer), keeps 2,048 in
// flight and releases them 512 at a time, as produce responses do. Before
// it, a burst of 12,000 records in flight has filled the free list, as the
// start of a drain does. What it measures is where a reused record's memory
// is: a free list that hands out the record released last reuses a small,
// cache-warm set; one that hands out the record released first cycles
// through every record the burst left.
func BenchmarkRecordReuse(b *testing.B) {
	const (
		burst    = 12000
		inFlight = 2048
		batch    = 512
	)
	payload := make([]byte, 700)
	fill := func(r *Record, i int) {
		r.Time = time.Unix(int64(i), 0)
		r.Seq, r.Reserved = uint64(i), len(payload)
		buf := append(r.Buffer(len(payload)), payload...)
		r.Value = buf
		r.KeepBuffer(buf)
	}
	held := make([]*Record, 0, burst)
	for i := range burst {
		r := NewRecord()
		fill(r, i)
		held = append(held, r)
	}
	for _, r := range held {
		Release(r)
	}
	ring := make([]*Record, inFlight)
	head, n := 0, 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		r := NewRecord()
		fill(r, i)
		ring[(head+n)%inFlight] = r
		n++
		if n == inFlight {
			for range batch {
				Release(ring[head])
				ring[head] = nil
				head = (head + 1) % inFlight
			}
			n -= batch
		}
	}
}
