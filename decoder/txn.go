package decoder

import (
	"encoding/binary"
	"time"
)

const (
	beginLen  = 1 + 8 + 8 + 4     // type, final LSN, commit time, xid
	commitLen = 1 + 1 + 8 + 8 + 8 // type, flags, commit LSN, end LSN, commit time
)

// decodeBegin and decodeCommit assign m field by field: assigning a whole
// Message composite literal is copied through a temporary and made Begin and
// Commit twice as slow.

// decodeBegin decodes 'B': Int64 final LSN, Int64 commit time, Int32 xid.
func decodeBegin(data []byte, m *Message) error {
	if len(data) != beginLen {
		if len(data) < beginLen {
			return short("begin")
		}
		return trailing("begin", len(data)-beginLen)
	}
	m.Kind = KindBegin
	m.FinalLSN = binary.BigEndian.Uint64(data[1:])
	m.CommitLSN, m.EndLSN = 0, 0
	m.CommitTime = pgTime(int64(binary.BigEndian.Uint64(data[9:])))
	m.Xid = binary.BigEndian.Uint32(data[17:])
	m.Row = Row{}
	return nil
}

// decodeCommit decodes 'C': Int8 flags (unused), Int64 commit LSN, Int64 end
// LSN, Int64 commit time.
func decodeCommit(data []byte, m *Message) error {
	if len(data) != commitLen {
		if len(data) < commitLen {
			return short("commit")
		}
		return trailing("commit", len(data)-commitLen)
	}
	m.Kind = KindCommit
	m.FinalLSN = 0
	m.CommitLSN = binary.BigEndian.Uint64(data[2:])
	m.EndLSN = binary.BigEndian.Uint64(data[10:])
	m.CommitTime = pgTime(int64(binary.BigEndian.Uint64(data[18:])))
	m.Xid = 0
	m.Row = Row{}
	return nil
}

// pgEpochUnix is 2000-01-01T00:00:00Z, PostgreSQL's timestamp epoch, in Unix seconds.
const pgEpochUnix = 946684800

// pgTime converts PostgreSQL's microseconds since 2000-01-01 UTC to a UTC
// time.Time. It does not overflow for any input.
func pgTime(us int64) time.Time {
	return time.Unix(us/1e6+pgEpochUnix, us%1e6*1e3).UTC()
}
