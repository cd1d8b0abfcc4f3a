package record

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/cdc-relay/cdc-relay/decoder"
)

// HeaderOmittedColumns is the header of an unconfigured_table dead letter
// whose row did not fit in a record: a JSON array of the columns left out
// of its value (the largest first). The value keeps the other columns, so
// that it names the row (its id, its created_at) for cdc-relay replay.
// It comes just after the table header.
const HeaderOmittedColumns = "omitted_columns"

// UnconfiguredRow is the row an unconfigured_table dead letter keeps.
type UnconfiguredRow struct {
	// Table is the table's "schema.table", as its Relation message named it.
	Table string
	// Columns are the row's columns in table order; Values their text
	// (nil for NULL).
	Columns []string
	Values  [][]byte
}

// LetterUnconfigured reads the row of an unconfigured_table dead letter:
// the table header and the value's columns, in their order. A letter
// whose row did not fit in a record (its value dropped, or columns
// omitted) cannot be built again: the error says how to publish the row
// (cdc-relay replay). Errors wrap ErrNotRedrivable.
func LetterUnconfigured(l *Letter) (*UnconfiguredRow, error) {
	table, _ := l.Header(HeaderTable)
	if len(table) == 0 {
		return nil, fmt.Errorf("%w: the unconfigured_table letter has no %s header", ErrNotRedrivable, HeaderTable)
	}
	ur := &UnconfiguredRow{Table: string(table)}
	replay := fmt.Sprintf("once %s is in --table, publish the row with cdc-relay replay --table %s --since TIME (TIME a margin before the row's created_at, at the latest its commit time %s), then retire this letter with cdc-relay dlq retire --kind %s --reason TEXT",
		ur.Table, ur.Table, l.Time.UTC().Format("2006-01-02T15:04:05Z"), ReasonUnconfigured)
	if om, ok := l.Header(HeaderOmittedColumns); ok {
		return nil, fmt.Errorf("%w: columns %s of the row did not fit in the dead letter; %s", ErrNotRedrivable, om, replay)
	}
	if l.Value == nil {
		return nil, fmt.Errorf("%w: the row did not fit in the dead letter; %s", ErrNotRedrivable, replay)
	}
	dec := json.NewDecoder(bytes.NewReader(l.Value))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("%w: the value is not a JSON object of the row's columns", ErrNotRedrivable)
	}
	for dec.More() {
		tok, err := dec.Token()
		name, ok := tok.(string)
		if err != nil || !ok {
			return nil, fmt.Errorf("%w: the value is not a JSON object of the row's columns", ErrNotRedrivable)
		}
		if tok, err = dec.Token(); err != nil {
			return nil, fmt.Errorf("%w: column %q: %v", ErrNotRedrivable, name, err)
		}
		var v []byte
		switch x := tok.(type) {
		case nil:
		case string:
			v = []byte(x)
		default:
			return nil, fmt.Errorf("%w: column %q is neither text nor null", ErrNotRedrivable, name)
		}
		ur.Columns, ur.Values = append(ur.Columns, name), append(ur.Values, v)
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("%w: the value is not a JSON object of the row's columns: %v", ErrNotRedrivable, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: the value holds more than the row's columns", ErrNotRedrivable)
	}
	return ur, nil
}

// ColumnType is a column's type oid and modifier, as a Relation message
// carries them.
type ColumnType struct {
	OID    uint32
	Typmod int32
}

// Relation is what a Relation message says of a table: what
// RebuildUnconfigured needs of today's catalog.
type Relation struct {
	OID          uint32
	Schema, Name string
	// Types are the columns' types by name; a column absent is text (oid
	// 25) without a modifier.
	Types map[string]ColumnType
}

// RebuildUnconfigured turns the row of an unconfigured_table letter into
// the row a live insert into its table decodes to, now that the table is
// an outbox table: the row goes through dec, the decoder of the relay's
// tables and extra columns, as a pgoutput Relation message (rel: today's
// catalog) and an Insert of the letter's column values, so that it is read
// exactly as the stream reads it. ok is false when dec does not take the
// table for an outbox table. Errors wrap ErrNotRedrivable.
func RebuildUnconfigured(l *Letter, ur *UnconfiguredRow, dec *decoder.Decoder, rel Relation) (rb *Rebuilt, ok bool, err error) {
	if len(ur.Columns) > 1<<15 {
		return nil, false, fmt.Errorf("%w: %d columns", ErrNotRedrivable, len(ur.Columns))
	}
	be := binary.BigEndian
	msg := []byte{'R'}
	msg = be.AppendUint32(msg, rel.OID)
	msg = append(append(msg, rel.Schema...), 0)
	msg = append(append(msg, rel.Name...), 0)
	msg = append(msg, 'd')
	msg = be.AppendUint16(msg, uint16(len(ur.Columns)))
	for _, c := range ur.Columns {
		t, known := rel.Types[c]
		if !known {
			t = ColumnType{OID: 25, Typmod: -1}
		}
		msg = append(msg, 0)
		msg = append(append(msg, c...), 0)
		msg = be.AppendUint32(msg, t.OID)
		msg = be.AppendUint32(msg, uint32(t.Typmod))
	}
	var m decoder.Message
	if err := dec.Decode(msg, &m); err != nil {
		return nil, false, fmt.Errorf("%w: the row's columns do not make a relation (%v)", ErrNotRedrivable, err)
	}
	ins := []byte{'I'}
	ins = be.AppendUint32(ins, rel.OID)
	ins = append(ins, 'N')
	ins = be.AppendUint16(ins, uint16(len(ur.Columns)))
	for _, v := range ur.Values {
		if v == nil {
			ins = append(ins, 'n')
			continue
		}
		ins = append(ins, 't')
		ins = be.AppendUint32(ins, uint32(len(v)))
		ins = append(ins, v...)
	}
	if err := dec.Decode(ins, &m); err != nil {
		return nil, true, fmt.Errorf("%w: the row does not decode as a row of outbox table %s: %v", ErrNotRedrivable, ur.Table, err)
	}
	if m.Kind != decoder.KindRow {
		return nil, false, nil
	}
	rb = &Rebuilt{Row: m.Row, Table: ur.Table, CommitTime: l.Time}
	rb.Row.Extra = append([][]byte(nil), m.Row.Extra...)
	return rb, true, nil
}

// unconfiguredValue is the value of an unconfigured_table dead letter: a
// JSON object of the columns in table order, leaving out those in omit.
func unconfiguredValue(cols []string, vals [][]byte, omit map[int]bool) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	buf.WriteByte('{')
	first := true
	for i, col := range cols {
		if omit[i] {
			continue
		}
		if !first {
			buf.WriteByte(',')
		}
		first = false
		enc.Encode(col) // a string always encodes
		buf.Truncate(buf.Len() - 1)
		buf.WriteByte(':')
		if v := vals[i]; v == nil {
			buf.WriteString("null")
		} else {
			enc.Encode(string(v))
			buf.Truncate(buf.Len() - 1) // Encode's newline
		}
	}
	buf.WriteByte('}')
	return buf.Bytes()
}

// omittedList is the HeaderOmittedColumns value of cols.
func omittedList(cols []string) []byte {
	out, _ := json.Marshal(cols) // strings always marshal
	return out
}

// quoteList is names as `"a", "b"` for a message.
func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}
