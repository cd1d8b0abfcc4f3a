package checkpoint

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kgo"
)

// reading is one Load of the checkpoint topic, read uncommitted with the
// control records: the newest record of each key among the records written
// outside transactions and those of committed transactions. A
// transaction's records wait for its marker: a commit takes them, at their
// own offsets, an abort drops them, and those of a transaction still open
// when the reading ends are not taken: their keys are listed (openKeys),
// with the newest checkpoint among them, for the guard to wait for the one
// that matters to it. So a transaction left open hides its own records
// only, never a later one.
type reading struct {
	byKey map[string]read
	open  map[producer][]*kgo.Record // an open transaction's records
}

// read is a key's newest record; a nil rec is a tombstone.
type read struct {
	partition int32
	offset    int64
	rec       *Record
}

// producer is a transactional producer on one partition; its markers
// there end its transactions.
type producer struct {
	partition int32
	id        int64
}

func newReading() *reading {
	return &reading{byKey: map[string]read{}, open: map[producer][]*kgo.Record{}}
}

// add takes the partition's records in offset order.
func (rd *reading) add(r *kgo.Record) {
	p := producer{r.Partition, r.ProducerID}
	switch {
	case r.Attrs.IsControl():
		recs := rd.open[p]
		delete(rd.open, p)
		if committed(r.Key) {
			for _, t := range recs {
				rd.take(t)
			}
		}
	case r.Attrs.IsTransactional():
		rd.open[p] = append(rd.open[p], r)
	default:
		rd.take(r)
	}
}

// committed reports whether a control record's key is a commit marker: a
// version, then the type, 1 for a commit (0 for an abort), both int16.
func committed(key []byte) bool {
	return len(key) >= 4 && binary.BigEndian.Uint16(key[2:4]) == 1
}

// take makes r its key's newest record unless a later one on the partition
// was taken already (a committed transaction's records are taken at its
// marker, after records written while it was open). A value that is not a
// checkpoint record is skipped.
func (rd *reading) take(r *kgo.Record) {
	k := string(r.Key)
	if cur, ok := rd.byKey[k]; ok && cur.partition == r.Partition && cur.offset > r.Offset {
		return
	}
	var rec *Record
	if r.Value != nil {
		var err error
		if rec, err = ParseRecord(r.Value); err != nil {
			return
		}
	}
	rd.byKey[k] = read{partition: r.Partition, offset: r.Offset, rec: rec}
}

// openKeys maps each key with a record in a transaction still open where
// the reading ended to the newest checkpoint record among them (nil when
// none parses); nil when there is none.
func (rd *reading) openKeys() map[string]*Record {
	var out map[string]*Record
	for _, recs := range rd.open {
		for _, r := range recs {
			if out == nil {
				out = map[string]*Record{}
			}
			k := string(r.Key)
			cur := out[k]
			if rec, err := ParseRecord(r.Value); err == nil && (cur == nil || rec.Position() > cur.Position()) {
				cur = rec
			}
			out[k] = cur
		}
	}
	return out
}

// newest is every key's newest record, tombstoned keys left out.
func (rd *reading) newest() map[string]*Record {
	out := make(map[string]*Record, len(rd.byKey))
	for k, r := range rd.byKey {
		if r.rec != nil {
			out[k] = r.rec
		}
	}
	return out
}
