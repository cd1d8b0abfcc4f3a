package decoder

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"testing"
)

// FuzzDecode feeds arbitrary bytes to Decode, both as one message to a
// decoder that already knows every relation of testdata/pgoutput and as a
// messages.bin-style stream to a fresh decoder. Decode must not panic, must
// not modify its input, and must either fail or return a valid Kind whose Row
// is consistent.
func FuzzDecode(f *testing.F) {
	files, err := filepath.Glob(filepath.Join(goldenDir, "*", "messages.bin"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seeds in %s: %v", goldenDir, err)
	}
	var relations [][]byte
	for _, file := range files {
		msgs, err := readMessages(file)
		if err != nil {
			f.Fatal(err)
		}
		for _, m := range msgs {
			f.Add(m)
			if m[0] == 'R' {
				relations = append(relations, m)
			}
		}
		whole, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(whole)
	}
	f.Add(messageMsg(true, 7, "outbox", `{"aggregate_type": "A", "aggregate_id": "1", "event_type": "E", "payload": {"x": "\u00e9"}}`))
	f.Add(messageMsg(false, 7, "outbox", `{"id": 1}`))
	f.Add(messageMsg(true, 7, "outbox", `{"aggregate_type": "A", "aggregate_id": "1", "event_type": "E", "payload": {"n": 007}}`))
	f.Add(messageMsg(true, 7, "outbox", `{"aggregate_type": "A", "aggregate_id": "1", "event_type": "E", "payload": {"n": 0x1.8p1}, "headers": {"h": "\ud800"}}`))
	primed := New("public.outbox", DefaultColumns())
	var m Message
	for _, r := range relations {
		if err := primed.Decode(r, &m); err != nil {
			f.Fatalf("seed relation: %v", err)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		orig := bytes.Clone(data)

		// A copy of the primed decoder; cached relations are never
		// modified, only replaced, so they can be shared. It reads
		// logical messages too.
		d := NewDecoder(Config{Tables: []Table{{Name: "public.outbox", Columns: DefaultColumns()}}, MessagePrefix: "outbox"})
		d.rels = maps.Clone(primed.rels)
		var m Message
		if err := d.Decode(data, &m); err == nil {
			checkMessage(t, data, &m)
		} else {
			checkError(t, err)
		}

		// The same bytes as a length-prefixed stream, to a decoder that
		// reports other tables' rows, as the relay's does.
		d = NewDecoder(Config{Tables: []Table{{Name: "public.outbox", Columns: DefaultColumns()}}, OtherTables: true})
		for b := data; len(b) >= 4; {
			n := binary.BigEndian.Uint32(b)
			if uint64(n) > uint64(len(b)-4) {
				break
			}
			msg := b[4 : 4+n]
			b = b[4+n:]
			if err := d.Decode(msg, &m); err == nil {
				checkMessage(t, msg, &m)
			} else {
				checkError(t, err)
			}
		}
		if !bytes.Equal(data, orig) {
			t.Fatal("Decode modified its input")
		}
	})
}

// checkError checks that a Decode error is one Decode documents: a sentinel
// (wrapped), a *MissingColumnError or a *ColumnError.
func checkError(t *testing.T, err error) {
	t.Helper()
	for _, sentinel := range []error{ErrShort, ErrTrailingBytes, ErrUnknownMessage, ErrUnknownRelation, ErrColumnCount,
		ErrTupleFormat, ErrUnchangedToast, ErrBinaryColumn, ErrMissingColumn} {
		if errors.Is(err, sentinel) {
			return
		}
	}
	t.Fatalf("undocumented error %T: %v", err, err)
}

// checkMessage checks a successfully decoded message.
func checkMessage(t *testing.T, data []byte, m *Message) {
	t.Helper()
	if m.Kind > KindOtherRow {
		t.Fatalf("invalid kind %d", m.Kind)
	}
	if m.Kind == KindOtherRow {
		o := m.Row.Other
		if o == nil || o.Table == "" || len(o.Values) != len(o.Columns) || m.Row.ID != nil || m.Row.Payload != nil {
			t.Fatalf("other row %+v, other %+v", m.Row, o)
		}
		for _, v := range o.Values {
			if cap(v) != len(v) || !bytes.Contains(data, v) {
				t.Fatalf("value %q (cap %d) is not a clipped part of the input", v, cap(v))
			}
		}
		return
	}
	if m.Row.Other != nil {
		t.Fatalf("%v message with Row.Other set", m.Kind)
	}
	if m.Kind != KindRow {
		if m.Row.ID != nil || m.Row.Payload != nil || m.Row.RelationID != 0 {
			t.Fatalf("%v message with row fields set: %+v", m.Kind, m.Row)
		}
		return
	}
	r := &m.Row
	if r.Message {
		// Its columns come from JSON content (unescaped, or the LSN as id).
		if r.Malformed == "" && (r.ID == nil || r.AggregateType == nil || r.AggregateID == nil || r.EventType == nil || (r.Payload == nil) != r.PayloadNull) {
			t.Fatalf("well-formed message with a missing column: %+v", r)
		}
		// Content the decoder accepts is valid JSON, and so are the
		// payload and headers it takes from it; content that is not
		// names nothing.
		if r.Malformed == "" && (!json.Valid(r.Content) || (r.Payload != nil && !json.Valid(r.Payload)) || (r.Headers != nil && !json.Valid(r.Headers))) {
			t.Fatalf("invalid JSON accepted: content %q payload %q headers %q", r.Content, r.Payload, r.Headers)
		}
		if !json.Valid(r.Content) && (r.AggregateType != nil || r.AggregateID != nil || r.EventType != nil || r.Payload != nil || r.Headers != nil) {
			t.Fatalf("columns taken from invalid JSON %q: %+v", r.Content, r)
		}
		return
	}
	for _, c := range []struct {
		null bool
		v    []byte
	}{{r.IDNull, r.ID}, {r.AggregateTypeNull, r.AggregateType}, {r.AggregateIDNull, r.AggregateID}, {r.EventTypeNull, r.EventType}, {r.PayloadNull, r.Payload}} {
		if c.null != (c.v == nil) {
			t.Fatalf("null flag %v with value %q", c.null, c.v)
		}
	}
	for _, v := range [][]byte{r.ID, r.AggregateType, r.AggregateID, r.EventType, r.Payload, r.Headers, r.CreatedAt} {
		if cap(v) != len(v) || !bytes.Contains(data, v) {
			t.Fatalf("value %q (cap %d) is not a clipped part of the input", v, cap(v))
		}
	}
}
