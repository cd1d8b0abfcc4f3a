package inbox

import (
	"reflect"
	"testing"
)

func TestOffsetsContiguousPrefix(t *testing.T) {
	o := newOffsets()
	k := tp{"t", 0}
	var e uint64
	for off := int64(10); off < 15; off++ {
		e = o.fetched(k, off)
	}
	// Later offsets finish first: nothing may be committed.
	for _, off := range []int64{12, 14, 11} {
		if o.done(k, e, off) {
			t.Fatalf("done(%d) moved the commit point past the unfinished offset 10", off)
		}
	}
	if got := o.toCommit(); got != nil {
		t.Fatalf("toCommit = %v with offset 10 pending, want nothing", got)
	}
	if !o.done(k, e, 10) {
		t.Fatal("done(10) did not move the commit point")
	}
	if got, want := o.toCommit(), map[tp]int64{k: 12}; !reflect.DeepEqual(got, want) {
		t.Fatalf("toCommit = %v, want %v (13 is pending)", got, want)
	}
	o.committed(map[tp]int64{k: 12})
	if got := o.toCommit(); got != nil {
		t.Fatalf("toCommit after commit = %v, want nothing", got)
	}
	o.done(k, e, 13)
	if got, want := o.toCommit(), map[tp]int64{k: 14}; !reflect.DeepEqual(got, want) {
		t.Fatalf("toCommit = %v, want %v", got, want)
	}
}

func TestOffsetsRewindStartsNewEpoch(t *testing.T) {
	o := newOffsets()
	k := tp{"t", 1}
	old := o.fetched(k, 5)
	o.fetched(k, 6)
	// A rebalance restarts the partition at 5.
	e := o.fetched(k, 5)
	if e == old {
		t.Fatal("a rewind kept the epoch")
	}
	if o.done(k, old, 5) || o.done(k, old, 6) {
		t.Fatal("completions of the old epoch moved the commit point")
	}
	if got := o.toCommit(); got != nil {
		t.Fatalf("toCommit = %v, want nothing", got)
	}
	o.done(k, e, 5)
	if got, want := o.toCommit(), map[tp]int64{k: 5}; !reflect.DeepEqual(got, want) {
		t.Fatalf("toCommit = %v, want %v", got, want)
	}
}

func TestOffsetsPartitionsIndependent(t *testing.T) {
	o := newOffsets()
	a, b := tp{"t", 0}, tp{"t", 1}
	ea := o.fetched(a, 0)
	eb := o.fetched(b, 0)
	o.fetched(b, 1)
	o.done(b, eb, 0)
	o.done(b, eb, 1)
	if got, want := o.toCommit(), map[tp]int64{b: 1}; !reflect.DeepEqual(got, want) {
		t.Fatalf("toCommit = %v, want %v: a stalled partition must not hold another back", got, want)
	}
	o.done(a, ea, 0)
	if got, want := o.toCommit(), map[tp]int64{a: 0, b: 1}; !reflect.DeepEqual(got, want) {
		t.Fatalf("toCommit = %v, want %v", got, want)
	}
}
