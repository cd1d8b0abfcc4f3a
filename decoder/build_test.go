package decoder

import "encoding/binary"

// This file builds pgoutput messages by hand for the unit tests and
// benchmarks, following "Logical Replication Message Formats".

func be16(b []byte, v uint16) []byte { return binary.BigEndian.AppendUint16(b, v) }
func be32(b []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(b, v) }
func be64(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }
func cstr(b []byte, s string) []byte { return append(append(b, s...), 0) }

func beginMsg(finalLSN uint64, micros int64, xid uint32) []byte {
	b := []byte{'B'}
	b = be64(b, finalLSN)
	b = be64(b, uint64(micros))
	return be32(b, xid)
}

func commitMsg(commitLSN, endLSN uint64, micros int64) []byte {
	b := []byte{'C', 0}
	b = be64(b, commitLSN)
	b = be64(b, endLSN)
	return be64(b, uint64(micros))
}

func relationMsg(id uint32, namespace, name string, columns ...string) []byte {
	b := []byte{'R'}
	b = be32(b, id)
	b = cstr(b, namespace)
	b = cstr(b, name)
	b = append(b, 'd') // replica identity default
	b = be16(b, uint16(len(columns)))
	for i, c := range columns {
		flags := byte(0)
		if i == 0 {
			flags = 1
		}
		b = append(b, flags)
		b = cstr(b, c)
		b = be32(b, 25) // text
		b = be32(b, 0xffffffff)
	}
	return b
}

// col is one TupleData column: kind 't', 'b', 'n' or 'u' and its bytes.
type col struct {
	kind byte
	data string
}

func text(s string) col        { return col{'t', s} }
func null() col                { return col{kind: 'n'} }
func unchanged() col           { return col{kind: 'u'} }
func binaryValue(s string) col { return col{'b', s} }

func tuple(b []byte, cols ...col) []byte {
	b = be16(b, uint16(len(cols)))
	for _, c := range cols {
		b = append(b, c.kind)
		if c.kind == 't' || c.kind == 'b' {
			b = be32(b, uint32(len(c.data)))
			b = append(b, c.data...)
		}
	}
	return b
}

func insertMsg(id uint32, cols ...col) []byte {
	b := []byte{'I'}
	b = be32(b, id)
	b = append(b, 'N')
	return tuple(b, cols...)
}

func updateMsg(id uint32, old []col, cols ...col) []byte {
	b := []byte{'U'}
	b = be32(b, id)
	if old != nil {
		b = append(b, 'O')
		b = tuple(b, old...)
	}
	b = append(b, 'N')
	return tuple(b, cols...)
}

func deleteMsg(id uint32, key ...col) []byte {
	b := []byte{'D'}
	b = be32(b, id)
	b = append(b, 'K')
	return tuple(b, key...)
}

func truncateMsg(ids ...uint32) []byte {
	b := []byte{'T'}
	b = be32(b, uint32(len(ids)))
	b = append(b, 0)
	for _, id := range ids {
		b = be32(b, id)
	}
	return b
}

func typeMsg(oid uint32, namespace, name string) []byte {
	b := []byte{'Y'}
	b = be32(b, oid)
	b = cstr(b, namespace)
	return cstr(b, name)
}

func originMsg(lsn uint64, name string) []byte {
	b := []byte{'O'}
	b = be64(b, lsn)
	return cstr(b, name)
}

func logicalMsg(transactional bool, lsn uint64, prefix, content string) []byte {
	b := []byte{'M', 0}
	if transactional {
		b[1] = 1
	}
	b = be64(b, lsn)
	b = cstr(b, prefix)
	b = be32(b, uint32(len(content)))
	return append(b, content...)
}

// outboxColumns is the documented DDL's column order.
var outboxColumns = []string{"id", "aggregate_type", "aggregate_id", "event_type", "payload", "headers", "created_at"}
