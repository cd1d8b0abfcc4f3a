package checkpoint

import (
	"encoding/json"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestReading feeds one partition's records, as a read_uncommitted fetch
// with the control records gives them, and checks what read_committed
// would read once every decided transaction is in, without waiting for the
// open ones.
func TestReading(t *testing.T) {
	var offset int64
	next := func(r *kgo.Record) *kgo.Record { r.Offset = offset; offset++; return r }
	value := func(relay, lsn string) []byte {
		b, err := json.Marshal(&Record{Kind: KindCheckpoint, RelayID: relay, LSN: lsn})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	plain := func(relay, lsn string) *kgo.Record {
		return next(&kgo.Record{Key: []byte(relay), Value: value(relay, lsn)})
	}
	inTxn := func(pid int64, relay, lsn string) *kgo.Record {
		r := plain(relay, lsn)
		r.ProducerID, r.Attrs = pid, kgo.NewRecordAttrs(kgo.RecordAttrsOpts{Transactional: true})
		return r
	}
	marker := func(pid int64, commit bool) *kgo.Record {
		key := []byte{0, 0, 0, 0}
		if commit {
			key[3] = 1
		}
		return next(&kgo.Record{Key: key, Value: []byte{0, 0, 0, 0, 0, 0}, ProducerID: pid,
			Attrs: kgo.NewRecordAttrs(kgo.RecordAttrsOpts{Transactional: true, Control: true})})
	}
	tombstone := func(relay string) *kgo.Record { return next(&kgo.Record{Key: []byte(relay)}) }

	rd := newReading()
	for _, r := range []*kgo.Record{
		plain("a", "0/1"),
		inTxn(7, "b", "0/2"), // committed after a's later plain write
		inTxn(7, "a", "0/2"), // committed, but older than a's 0/3
		inTxn(8, "a", "0/9"), // left open: hidden, hides nothing after it
		plain("a", "0/3"),
		marker(7, true),
		inTxn(9, "c", "0/4"),
		marker(9, false),     // aborted
		inTxn(9, "c", "0/5"), // the same producer's next transaction
		marker(9, true),
		plain("d", "0/6"),
		tombstone("d"),
		next(&kgo.Record{Key: []byte("e"), Value: []byte("not json")}),
		plain("f", "0/7"),
		next(&kgo.Record{Key: []byte("f"), Value: []byte("not json")}), // skipped: f keeps 0/7
	} {
		rd.add(r)
	}
	got := map[string]string{}
	for k, r := range rd.newest() {
		got[k] = r.LSN
	}
	want := map[string]string{"a": "0/3", "b": "0/2", "c": "0/5", "f": "0/7"}
	if len(got) != len(want) {
		t.Errorf("read %v, want %v", got, want)
	}
	for k, lsn := range want {
		if got[k] != lsn {
			t.Errorf("key %s: read %q, want %q (all: %v)", k, got[k], lsn, got)
		}
	}
	if open := rd.openKeys(); len(open) != 1 || !hasKey(open, "a") {
		t.Errorf("keys of open transactions: %v, want a alone (producer 8's)", open)
	}
	if open := newReading().openKeys(); open != nil {
		t.Errorf("keys of open transactions in an empty reading: %v, want none", open)
	}
}

func hasKey(m map[string]*Record, k string) bool {
	_, ok := m[k]
	return ok
}
