package inbox

import "sync"

// tp is a topic partition.
type tp struct {
	topic     string
	partition int
}

// partition tracks one partition's fetched offsets. Only the contiguous
// prefix of done offsets may be committed: an offset is committed only
// when it and every offset fetched before it are done.
type partition struct {
	epoch    uint64
	pending  []int64 // fetched, in fetch order (increasing within an epoch)
	head     int     // pending[head:] are not yet popped
	done     map[int64]bool
	last     int64 // last fetched offset, -1 before the first
	commitTo int64 // the highest offset whose whole prefix is done; -1 for none
}

// offsets is the per-partition ledger the fetch loop, the workers and the
// committer share.
type offsets struct {
	mu     sync.Mutex
	parts  map[tp]*partition
	commit map[tp]int64 // last offset committed to Kafka per partition
	epochs uint64
}

func newOffsets() *offsets {
	return &offsets{parts: map[tp]*partition{}, commit: map[tp]int64{}}
}

// fetched records an offset handed out by the reader and returns the
// partition's epoch, which done must quote. An offset at or below the last
// one fetched means the group rewound the partition (a rebalance restarted
// it from the committed offset): the partition starts a new epoch, and the
// completions of the old one no longer move its commit point (those events
// come again and are skipped as duplicates).
func (o *offsets) fetched(k tp, off int64) uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	p := o.parts[k]
	if p == nil || off <= p.last {
		o.epochs++
		p = &partition{epoch: o.epochs, done: map[int64]bool{}, commitTo: -1}
		o.parts[k] = p
	}
	p.last = off
	p.pending = append(p.pending, off)
	return p.epoch
}

// done marks an offset processed (its transaction committed, or it went to
// the dead-letter topic) and reports whether the commit point moved.
func (o *offsets) done(k tp, epoch uint64, off int64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	p := o.parts[k]
	if p == nil || p.epoch != epoch {
		return false
	}
	p.done[off] = true
	moved := false
	for p.head < len(p.pending) && p.done[p.pending[p.head]] {
		off := p.pending[p.head]
		delete(p.done, off)
		p.commitTo = off
		p.head++
		moved = true
	}
	if p.head > 1024 && p.head*2 > len(p.pending) {
		p.pending = append(p.pending[:0], p.pending[p.head:]...)
		p.head = 0
	}
	return moved
}

// toCommit returns, per partition, the highest offset whose prefix is done
// and that is not yet committed.
func (o *offsets) toCommit() map[tp]int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out map[tp]int64
	for k, p := range o.parts {
		if p.commitTo < 0 {
			continue
		}
		if c, ok := o.commit[k]; ok && c >= p.commitTo {
			continue
		}
		if out == nil {
			out = map[tp]int64{}
		}
		out[k] = p.commitTo
	}
	return out
}

// committed records what Kafka accepted.
func (o *offsets) committed(m map[tp]int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for k, off := range m {
		o.commit[k] = off
	}
}

// forget drops the partitions the group took away: their completions no
// longer move a commit point, so this member never commits over the next
// owner's progress (those events come again and are skipped as
// duplicates). A partition given back starts a new epoch.
func (o *offsets) forget(parts map[string][]int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for topic, ps := range parts {
		for _, p := range ps {
			k := tp{topic, int(p)}
			delete(o.parts, k)
			delete(o.commit, k)
		}
	}
}
