package decoder

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"time"
)

// insertHeaderLen is 'I', Int32 relation id, Byte1 'N', Int16 column count.
const insertHeaderLen = 1 + 4 + 1 + 2

// decodeInsert decodes 'I': Int32 relation id, Byte1 'N' (new tuple), then
// TupleData. Inserts into other tables are checked and return KindSkip.
func (d *Decoder) decodeInsert(data []byte, m *Message) error {
	if len(data) < insertHeaderLen {
		return short("insert")
	}
	id := binary.BigEndian.Uint32(data[1:])
	rel := d.last
	if rel == nil || rel.id != id {
		rel = d.rels[id]
		if rel == nil {
			return fmt.Errorf("decode insert: relation id %d: %w", id, ErrUnknownRelation)
		}
		d.last = rel
	}
	if data[5] != 'N' {
		return fmt.Errorf("decode insert: tuple marker 0x%02x, want 'N': %w", data[5], ErrTupleFormat)
	}
	if !rel.outbox && d.other {
		return d.decodeOther(rel, data, m)
	}
	if !rel.outbox {
		off, err := skipTuple(data, insertHeaderLen-2, "insert")
		if err != nil {
			return err
		}
		if off != len(data) {
			return trailing("insert", len(data)-off)
		}
		*m = Message{}
		return nil
	}
	if rel.missing != nil {
		// Name the row when its id is still there (an error path: the
		// copy's allocation does not matter).
		e := *rel.missing
		if id := rowID(rel, data); id != nil {
			e.ID = string(id)
		}
		return &e
	}
	if n := int(binary.BigEndian.Uint16(data[6:])); n != len(rel.slots) {
		return fmt.Errorf("decode insert: %d columns, relation %d has %d: %w", n, id, len(rel.slots), ErrColumnCount)
	}

	// TupleData: per column Byte1 kind, and for 't' and 'b' Int32 length and
	// the bytes.
	var vals [numFields][]byte
	var nulls uint8
	extra := d.extraVals
	clear(extra)
	off := insertHeaderLen
	for i, slot := range rel.slots {
		if off >= len(data) {
			return short("insert tuple")
		}
		kind := data[off]
		off++
		switch kind {
		case 't':
			if len(data)-off < 4 {
				return short("insert tuple")
			}
			n := binary.BigEndian.Uint32(data[off:])
			off += 4
			if uint64(n) > uint64(len(data)-off) {
				return short("insert tuple value")
			}
			end := off + int(n)
			v := data[off:end:end]
			off = end
			for s := slot; s != 0; s &= s - 1 {
				vals[bits.TrailingZeros8(s)] = v
			}
			if x := rel.extra[i]; x >= 0 {
				extra[x] = v
			}
		case 'n':
			nulls |= slot
		case 'u':
			return &ColumnError{Table: rel.table.qualified, Column: rel.columns[i], Err: ErrUnchangedToast}
		case 'b':
			return &ColumnError{Table: rel.table.qualified, Column: rel.columns[i], Err: ErrBinaryColumn}
		default:
			return fmt.Errorf("decode insert: column %q kind 0x%02x: %w", rel.columns[i], kind, ErrTupleFormat)
		}
	}
	if off != len(data) {
		return trailing("insert", len(data)-off)
	}
	m.Kind = KindRow
	m.FinalLSN, m.CommitLSN, m.EndLSN, m.Xid = 0, 0, 0, 0
	m.CommitTime = time.Time{}
	m.Row = Row{
		ID:                vals[fieldID],
		IDNull:            nulls&(1<<fieldID) != 0,
		AggregateType:     vals[fieldAggregateType],
		AggregateTypeNull: nulls&(1<<fieldAggregateType) != 0,
		AggregateID:       vals[fieldAggregateID],
		AggregateIDNull:   nulls&(1<<fieldAggregateID) != 0,
		EventType:         vals[fieldEventType],
		EventTypeNull:     nulls&(1<<fieldEventType) != 0,
		Payload:           vals[fieldPayload],
		PayloadNull:       nulls&(1<<fieldPayload) != 0,
		Headers:           vals[fieldHeaders],
		CreatedAt:         vals[fieldCreatedAt],
		RelationID:        id,
		Extra:             extra,
		ExtraTypes:        rel.types,
		ExtraTypmods:      rel.typmods,
	}
	return nil
}

// decodeOther decodes the TupleData of an insert into another table into
// Row.Values, as KindOtherRow.
func (d *Decoder) decodeOther(rel *relation, data []byte, m *Message) error {
	n := int(binary.BigEndian.Uint16(data[6:]))
	if n != len(rel.names) {
		return fmt.Errorf("decode insert: %d columns, relation %d has %d: %w", n, rel.id, len(rel.names), ErrColumnCount)
	}
	if cap(d.otherVals) < n {
		d.otherVals = make([][]byte, n)
	}
	vals := d.otherVals[:n]
	off := insertHeaderLen
	for i := range vals {
		if off >= len(data) {
			return short("insert tuple")
		}
		kind := data[off]
		off++
		switch kind {
		case 't', 'b':
			if len(data)-off < 4 {
				return short("insert tuple")
			}
			l := binary.BigEndian.Uint32(data[off:])
			off += 4
			if uint64(l) > uint64(len(data)-off) {
				return short("insert tuple value")
			}
			end := off + int(l)
			vals[i] = data[off:end:end]
			off = end
		case 'n', 'u':
			vals[i] = nil
		default:
			return fmt.Errorf("decode insert: column %q kind 0x%02x: %w", rel.names[i], kind, ErrTupleFormat)
		}
	}
	if off != len(data) {
		return trailing("insert", len(data)-off)
	}
	d.otherRow = OtherRow{Table: rel.qualified, Columns: rel.names, Values: vals}
	*m = Message{Kind: KindOtherRow, Row: Row{Other: &d.otherRow, RelationID: rel.id}}
	return nil
}

// rowID returns the id column's text from an outbox insert, or nil when the
// relation has no id column or the tuple does not parse.
func rowID(rel *relation, data []byte) []byte {
	if len(data) < insertHeaderLen || int(binary.BigEndian.Uint16(data[6:])) != len(rel.slots) {
		return nil
	}
	off := insertHeaderLen
	for _, slot := range rel.slots {
		if off >= len(data) {
			return nil
		}
		kind := data[off]
		off++
		switch kind {
		case 't', 'b':
			if len(data)-off < 4 {
				return nil
			}
			n := binary.BigEndian.Uint32(data[off:])
			off += 4
			if uint64(n) > uint64(len(data)-off) {
				return nil
			}
			if kind == 't' && slot&(1<<fieldID) != 0 {
				return data[off : off+int(n)]
			}
			off += int(n)
		case 'n', 'u':
		default:
			return nil
		}
	}
	return nil
}
