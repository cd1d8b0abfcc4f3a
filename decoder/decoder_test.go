package decoder

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

const outboxID = 16385

// newOutbox returns a decoder for public.outbox that has seen the outbox's
// Relation message with the default column order.
func newOutbox(t testing.TB) *Decoder {
	t.Helper()
	d := New("outbox", DefaultColumns())
	var m Message
	if err := d.Decode(relationMsg(outboxID, "public", "outbox", outboxColumns...), &m); err != nil {
		t.Fatalf("relation: %v", err)
	}
	if m.Kind != KindRelation {
		t.Fatalf("relation kind = %v, want relation", m.Kind)
	}
	return d
}

func outboxInsert(id, aggType, aggID, evType, payload string) []byte {
	return insertMsg(outboxID, text(id), text(aggType), text(aggID), text(evType), text(payload), text(`{"h": "v"}`), text("2024-05-01 10:00:00+00"))
}

func TestDecodeBegin(t *testing.T) {
	d := New("outbox", DefaultColumns())
	var m Message
	// 2024-05-01T10:00:00.123456Z in microseconds since 2000-01-01.
	want := time.Date(2024, 5, 1, 10, 0, 0, 123456000, time.UTC)
	micros := want.Sub(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).Microseconds()
	if err := d.Decode(beginMsg(0x1_6B3748, micros, 751), &m); err != nil {
		t.Fatal(err)
	}
	if m.Kind != KindBegin || m.FinalLSN != 0x1_6B3748 || m.Xid != 751 || !m.CommitTime.Equal(want) {
		t.Fatalf("got %+v, want begin final=0x16B3748 xid=751 time=%v", m, want)
	}
	if m.CommitTime.Location() != time.UTC {
		t.Errorf("CommitTime location = %v, want UTC", m.CommitTime.Location())
	}
}

func TestDecodeCommit(t *testing.T) {
	d := New("outbox", DefaultColumns())
	var m Message
	if err := d.Decode(commitMsg(0x10, 0x40, -1), &m); err != nil {
		t.Fatal(err)
	}
	want := time.Date(1999, 12, 31, 23, 59, 59, 999999000, time.UTC)
	if m.Kind != KindCommit || m.CommitLSN != 0x10 || m.EndLSN != 0x40 || !m.CommitTime.Equal(want) {
		t.Fatalf("got %+v, want commit 0x10 end 0x40 at %v", m, want)
	}
}

func TestDecodeRow(t *testing.T) {
	d := newOutbox(t)
	var m Message
	data := outboxInsert("42", "order", "o-1", "OrderPlaced", `{"total": 100}`)
	orig := bytes.Clone(data)
	if err := d.Decode(data, &m); err != nil {
		t.Fatal(err)
	}
	if m.Kind != KindRow {
		t.Fatalf("kind = %v, want row", m.Kind)
	}
	r := m.Row
	for _, c := range []struct{ name, got, want string }{
		{"ID", string(r.ID), "42"},
		{"AggregateType", string(r.AggregateType), "order"},
		{"AggregateID", string(r.AggregateID), "o-1"},
		{"EventType", string(r.EventType), "OrderPlaced"},
		{"Payload", string(r.Payload), `{"total": 100}`},
		{"Headers", string(r.Headers), `{"h": "v"}`},
		{"CreatedAt", string(r.CreatedAt), "2024-05-01 10:00:00+00"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
	if r.RelationID != outboxID || r.NullField() != "" || r.AggregateIDNull {
		t.Errorf("row = %+v, want relation %d and no NULLs", r, outboxID)
	}
	// Zero-copy: the payload aliases the input, and its capacity is clipped
	// so an append cannot overwrite the next column.
	if &r.Payload[0] != &data[bytes.Index(data, []byte(`{"total`))] {
		t.Error("Payload does not alias the input buffer")
	}
	if cap(r.Payload) != len(r.Payload) {
		t.Errorf("cap(Payload) = %d, want %d", cap(r.Payload), len(r.Payload))
	}
	_ = append(r.Payload, "XXXX"...)
	if !bytes.Equal(data, orig) {
		t.Error("Decode or an append to a Row slice modified the input")
	}
}

func TestColumnMapping(t *testing.T) {
	tests := []struct {
		name    string
		cols    Columns
		columns []string
		values  []col
		want    Row
	}{
		{
			name:    "reordered with extra columns",
			cols:    DefaultColumns(),
			columns: []string{"payload", "tenant", "event_type", "created_at", "id", "aggregate_id", "note", "aggregate_type"},
			values:  []col{text("{}"), text("t1"), text("E"), null(), text("7"), text("a-1"), null(), text("A")},
			want:    Row{ID: []byte("7"), AggregateType: []byte("A"), AggregateID: []byte("a-1"), EventType: []byte("E"), Payload: []byte("{}")},
		},
		{
			name:    "no optional columns",
			cols:    DefaultColumns(),
			columns: []string{"id", "aggregate_type", "aggregate_id", "event_type", "payload"},
			values:  []col{text("1"), text("A"), text("k"), text("E"), text("[]")},
			want:    Row{ID: []byte("1"), AggregateType: []byte("A"), AggregateID: []byte("k"), EventType: []byte("E"), Payload: []byte("[]")},
		},
		{
			name:    "custom names, one column feeds two fields",
			cols:    Columns{ID: "event_id", AggregateType: "topic", AggregateID: "event_id", EventType: "type", Payload: "body", Headers: "", CreatedAt: "ts"},
			columns: []string{"event_id", "topic", "type", "body", "headers", "ts"},
			values:  []col{text("u-1"), text("T"), text("E"), text(`"x"`), text(`{"ignored": 1}`), text("now")},
			want:    Row{ID: []byte("u-1"), AggregateType: []byte("T"), AggregateID: []byte("u-1"), EventType: []byte("E"), Payload: []byte(`"x"`), CreatedAt: []byte("now")},
		},
		{
			name:    "empty configured name matches nothing",
			cols:    Columns{ID: "id", AggregateType: "t", AggregateID: "k", EventType: "e", Payload: "p"},
			columns: []string{"id", "t", "k", "e", "p", ""},
			values:  []col{text("1"), text("T"), text("K"), text("E"), text("{}"), text("not headers")},
			want:    Row{ID: []byte("1"), AggregateType: []byte("T"), AggregateID: []byte("K"), EventType: []byte("E"), Payload: []byte("{}")},
		},
		{
			name:    "NULLs and empty strings",
			cols:    DefaultColumns(),
			columns: outboxColumns,
			values:  []col{null(), text(""), null(), null(), null(), null(), null()},
			want:    Row{IDNull: true, AggregateType: []byte{}, AggregateIDNull: true, EventTypeNull: true, PayloadNull: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := New("public.outbox", tt.cols)
			var m Message
			if err := d.Decode(relationMsg(9, "public", "outbox", tt.columns...), &m); err != nil {
				t.Fatal(err)
			}
			if err := d.Decode(insertMsg(9, tt.values...), &m); err != nil {
				t.Fatal(err)
			}
			tt.want.RelationID = 9
			assertRow(t, m, tt.want)
		})
	}
}

// assertRow compares rows, telling nil from empty slices.
func assertRow(t *testing.T, m Message, want Row) {
	t.Helper()
	if m.Kind != KindRow {
		t.Fatalf("kind = %v, want row", m.Kind)
	}
	got := m.Row
	for _, f := range []struct {
		name      string
		got, want []byte
	}{
		{"ID", got.ID, want.ID}, {"AggregateType", got.AggregateType, want.AggregateType},
		{"AggregateID", got.AggregateID, want.AggregateID}, {"EventType", got.EventType, want.EventType},
		{"Payload", got.Payload, want.Payload}, {"Headers", got.Headers, want.Headers},
		{"CreatedAt", got.CreatedAt, want.CreatedAt},
	} {
		if (f.got == nil) != (f.want == nil) || !bytes.Equal(f.got, f.want) {
			t.Errorf("%s = %q (nil %v), want %q (nil %v)", f.name, f.got, f.got == nil, f.want, f.want == nil)
		}
	}
	if got.IDNull != want.IDNull || got.AggregateTypeNull != want.AggregateTypeNull || got.AggregateIDNull != want.AggregateIDNull ||
		got.EventTypeNull != want.EventTypeNull || got.PayloadNull != want.PayloadNull || got.RelationID != want.RelationID {
		t.Errorf("flags/relation: got %+v, want %+v", got, want)
	}
}

func TestNullField(t *testing.T) {
	tests := []struct {
		row  Row
		want string
	}{
		{Row{}, ""},
		{Row{AggregateIDNull: true}, ""},
		{Row{IDNull: true, PayloadNull: true}, "id"},
		{Row{AggregateTypeNull: true}, "aggregate_type"},
		{Row{EventTypeNull: true, PayloadNull: true}, "event_type"},
		{Row{PayloadNull: true}, "payload"},
	}
	for _, tt := range tests {
		if got := tt.row.NullField(); got != tt.want {
			t.Errorf("NullField(%+v) = %q, want %q", tt.row, got, tt.want)
		}
	}
}

func TestRelationChanges(t *testing.T) {
	d := newOutbox(t)
	var m Message
	decode := func(data []byte) error {
		t.Helper()
		return d.Decode(data, &m)
	}
	if err := decode(outboxInsert("1", "A", "k", "E", "{}")); err != nil {
		t.Fatal(err)
	}

	// RENAME headers → meta: Headers disappears for later inserts.
	if err := decode(relationMsg(outboxID, "public", "outbox", "id", "aggregate_type", "aggregate_id", "event_type", "payload", "meta", "created_at")); err != nil {
		t.Fatal(err)
	}
	if err := decode(outboxInsert("2", "A", "k", "E", "{}")); err != nil {
		t.Fatal(err)
	}
	if m.Row.Headers != nil || string(m.Row.ID) != "2" {
		t.Errorf("after rename: Headers = %q, ID = %q; want nil, 2", m.Row.Headers, m.Row.ID)
	}

	// DROP event_type: an insert is a MissingColumnError.
	if err := decode(relationMsg(outboxID, "public", "outbox", "id", "aggregate_type", "aggregate_id", "payload")); err != nil {
		t.Fatal(err)
	}
	err := decode(insertMsg(outboxID, text("3"), text("A"), text("k"), text("{}")))
	var mce *MissingColumnError
	if !errors.As(err, &mce) || mce.Table != "public.outbox" || mce.Column != "event_type" || mce.ID != "3" {
		t.Fatalf("err = %v, want MissingColumnError{public.outbox, event_type, row 3}", err)
	}
	if !errors.Is(err, ErrMissingColumn) {
		t.Error("MissingColumnError does not unwrap to ErrMissingColumn")
	}
	for _, s := range []string{"public.outbox", `"event_type"`, "row id=3", "column-name config"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %s", err, s)
		}
	}

	// ADD it back at the end: inserts work again, mapped by name.
	if err := decode(relationMsg(outboxID, "public", "outbox", "id", "aggregate_type", "aggregate_id", "payload", "event_type")); err != nil {
		t.Fatal(err)
	}
	if err := decode(insertMsg(outboxID, text("4"), text("A"), text("k"), text("{}"), text("E2"))); err != nil {
		t.Fatal(err)
	}
	if string(m.Row.EventType) != "E2" || string(m.Row.Payload) != "{}" {
		t.Errorf("after re-add: %+v", m.Row)
	}

	// The table is renamed away: its inserts are skipped.
	if err := decode(relationMsg(outboxID, "public", "outbox_old", "id", "aggregate_type", "aggregate_id", "payload", "event_type")); err != nil {
		t.Fatal(err)
	}
	if err := decode(insertMsg(outboxID, text("5"), text("A"), text("k"), text("{}"), text("E"))); err != nil || m.Kind != KindSkip {
		t.Fatalf("after table rename: kind %v err %v, want skip", m.Kind, err)
	}
}

func TestMalformedRelationKeepsMapping(t *testing.T) {
	d := newOutbox(t)
	var m Message
	bad := relationMsg(outboxID, "public", "outbox", "id", "payload")
	if err := d.Decode(bad[:len(bad)-3], &m); !errors.Is(err, ErrShort) {
		t.Fatalf("truncated relation: err = %v, want ErrShort", err)
	}
	if err := d.Decode(outboxInsert("1", "A", "k", "E", "{}"), &m); err != nil || m.Kind != KindRow {
		t.Fatalf("insert after bad relation: kind %v err %v, want row", m.Kind, err)
	}
}

func TestTableMatching(t *testing.T) {
	tests := []struct {
		config         string
		namespace, rel string
		want           Kind
	}{
		{"outbox", "public", "outbox", KindRow},
		{"public.outbox", "public", "outbox", KindRow},
		{"app.outbox", "app", "outbox", KindRow},
		{"app.outbox", "public", "outbox", KindSkip},
		{"outbox", "app", "outbox", KindSkip},
		{"outbox", "public", "Outbox", KindSkip},
		{"Outbox", "public", "Outbox", KindRow},
		{`"My Schema"."Out.box"`, "My Schema", "Out.box", KindRow},
		{`"a""b".t`, `a"b`, "t", KindRow},
		{"outbox", "public", "outbox_archive", KindSkip},
	}
	for _, tt := range tests {
		t.Run(tt.config+"/"+tt.namespace+"."+tt.rel, func(t *testing.T) {
			d := New(tt.config, DefaultColumns())
			var m Message
			if err := d.Decode(relationMsg(5, tt.namespace, tt.rel, outboxColumns...), &m); err != nil {
				t.Fatal(err)
			}
			if err := d.Decode(insertMsg(5, text("1"), text("A"), text("k"), text("E"), text("{}"), null(), null()), &m); err != nil {
				t.Fatal(err)
			}
			if m.Kind != tt.want {
				t.Errorf("kind = %v, want %v", m.Kind, tt.want)
			}
		})
	}
}

func TestSkippedMessages(t *testing.T) {
	d := newOutbox(t)
	tests := []struct {
		name string
		data []byte
	}{
		{"update", updateMsg(outboxID, nil, text("1"), text("A"), text("k"), text("E"), text("{}"), null(), null())},
		{"update with old tuple", updateMsg(outboxID, []col{text("1"), null(), unchanged()}, text("1"), unchanged())},
		{"delete", deleteMsg(outboxID, text("1"))},
		{"truncate", truncateMsg(outboxID, 77)},
		{"type", typeMsg(16400, "public", "mood")},
		{"origin", originMsg(0x1234, "upstream")},
		{"logical message", logicalMsg(true, 0x99, "p", "x")},
		{"empty logical message", logicalMsg(false, 0x99, "", "")},
		{"stream start", []byte{'S', 0, 0, 0, 1, 1}},
		{"stream stop", []byte{'E'}},
		{"insert into another table", insertMsg(6, text("x"))},
		{"insert into another table, binary value", insertMsg(6, binaryValue("\x00\x01"))},
	}
	var m Message
	if err := d.Decode(relationMsg(6, "public", "other", "x"), &m); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := Message{Kind: KindRow, Row: Row{ID: []byte("stale")}}
			if err := d.Decode(tt.data, &m); err != nil {
				t.Fatal(err)
			}
			if m.Kind != KindSkip || m.Row.ID != nil {
				t.Errorf("got %+v, want a zero skip message", m)
			}
		})
	}
}

func TestMessageFieldsReset(t *testing.T) {
	d := newOutbox(t)
	var m Message
	if err := d.Decode(outboxInsert("1", "A", "k", "E", "{}"), &m); err != nil {
		t.Fatal(err)
	}
	if err := d.Decode(commitMsg(1, 2, 3), &m); err != nil {
		t.Fatal(err)
	}
	if m.Row.ID != nil || m.Row.RelationID != 0 {
		t.Errorf("commit left row fields: %+v", m.Row)
	}
	if err := d.Decode(beginMsg(5, 3, 9), &m); err != nil {
		t.Fatal(err)
	}
	if m.EndLSN != 0 || m.CommitLSN != 0 {
		t.Errorf("begin left commit fields: %+v", m)
	}
}

// TestErrors covers malformed input, message by message.
func TestErrors(t *testing.T) {
	outbox := func(cols ...col) []byte {
		return insertMsg(outboxID, append([]col{text("1"), text("A"), text("k"), text("E")}, cols...)...)
	}
	withMarker := func(b []byte, marker byte) []byte { b[5] = marker; return b }
	tests := []struct {
		name       string
		data       []byte
		want       error
		wantColumn string // for *ColumnError
	}{
		{"empty", nil, ErrShort, ""},
		{"unknown type", []byte{'X', 1, 2}, ErrUnknownMessage, ""},
		{"type byte zero", []byte{0}, ErrUnknownMessage, ""},
		{"XLogData header instead of WALData", []byte{'w', 0, 0}, ErrUnknownMessage, ""},
		{"insert before relation", insertMsg(99, text("1")), ErrUnknownRelation, ""},
		{"insert without N marker", withMarker(outbox(text("{}"), null(), null()), 'K'), ErrTupleFormat, ""},
		{"unchanged toast", outbox(unchanged(), null(), null()), ErrUnchangedToast, "payload"},
		{"binary value", outbox(text("{}"), binaryValue("\x01"), null()), ErrBinaryColumn, "headers"},
		{"unknown tuple kind", outbox(text("{}"), null(), col{'x', ""}), ErrTupleFormat, ""},
		{"too few columns", outbox(text("{}"), null()), ErrColumnCount, ""},
		{"too many columns", outbox(text("{}"), null(), null(), null()), ErrColumnCount, ""},
		{"begin trailing byte", append(beginMsg(1, 2, 3), 0), ErrTrailingBytes, ""},
		{"commit trailing byte", append(commitMsg(1, 2, 3), 0), ErrTrailingBytes, ""},
		{"insert trailing byte", append(outbox(text("{}"), null(), null()), 0), ErrTrailingBytes, ""},
		{"relation trailing byte", append(relationMsg(1, "s", "t", "a"), 0), ErrTrailingBytes, ""},
		{"update trailing byte", append(updateMsg(1, nil, text("a")), 0), ErrTrailingBytes, ""},
		{"update bad marker", withMarker(updateMsg(1, nil, text("a")), 'X'), ErrTupleFormat, ""},
		{"delete bad kind", deleteMsg(1, col{'z', ""}), ErrTupleFormat, ""},
		{"truncate huge count", []byte{'T', 0xff, 0xff, 0xff, 0xff, 0}, ErrShort, ""},
		{"relation huge column count", []byte{'R', 0, 0, 0, 1, 's', 0, 't', 0, 'd', 0xff, 0xff}, ErrShort, ""},
		{"value length past end", []byte{'I', 0, 0, 0x40, 0x01, 'N', 0, 7, 't', 0x7f, 0xff, 0xff, 0xff, 'x'}, ErrShort, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newOutbox(t)
			var m Message
			err := d.Decode(tt.data, &m)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if tt.wantColumn != "" {
				var ce *ColumnError
				if !errors.As(err, &ce) || ce.Column != tt.wantColumn || ce.Table != "public.outbox" {
					t.Fatalf("err = %#v, want ColumnError for column %q of public.outbox", err, tt.wantColumn)
				}
				if !strings.Contains(err.Error(), tt.wantColumn) {
					t.Errorf("error text %q does not name the column", err)
				}
			}
		})
	}
}

// TestTruncated cuts valid messages of every kind at every length: each
// prefix must fail with ErrShort.
func TestTruncated(t *testing.T) {
	messages := map[string][]byte{
		"begin":        beginMsg(0x100, 1, 2),
		"commit":       commitMsg(0x100, 0x200, 3),
		"relation":     relationMsg(outboxID, "public", "outbox", outboxColumns...),
		"insert":       outboxInsert("1", "A", "k", "E", `{"a": 1}`),
		"insert nulls": insertMsg(outboxID, text("1"), text("A"), null(), text("E"), null(), null(), null()),
		"update":       updateMsg(outboxID, []col{text("1")}, text("1"), null(), unchanged()),
		"delete":       deleteMsg(outboxID, text("1"), null()),
		"truncate":     truncateMsg(1, 2, 3),
		"type":         typeMsg(1, "public", "mood"),
		"origin":       originMsg(1, "o"),
		"message":      logicalMsg(true, 1, "p", "hello"),
		"other insert": insertMsg(6, text("x"), null()),
	}
	for name, full := range messages {
		t.Run(name, func(t *testing.T) {
			d := newOutbox(t)
			var m Message
			if err := d.Decode(relationMsg(6, "public", "other", "x", "y"), &m); err != nil {
				t.Fatal(err)
			}
			if err := d.Decode(full, &m); err != nil {
				t.Fatalf("full message: %v", err)
			}
			for n := 0; n < len(full); n++ {
				if err := d.Decode(full[:n], &m); !errors.Is(err, ErrShort) {
					t.Errorf("prefix of %d/%d bytes: err = %v, want ErrShort", n, len(full), err)
				}
			}
		})
	}
}

func TestSplitTable(t *testing.T) {
	tests := []struct{ in, schema, table string }{
		{"outbox", "public", "outbox"},
		{"app.outbox", "app", "outbox"},
		{`"App"."Out Box"`, "App", "Out Box"},
		{`"a.b".c`, "a.b", "c"},
		{`"x""y"`, "public", `x"y`},
	}
	for _, tt := range tests {
		if s, tb := splitTable(tt.in); s != tt.schema || tb != tt.table {
			t.Errorf("splitTable(%q) = %q, %q; want %q, %q", tt.in, s, tb, tt.schema, tt.table)
		}
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{KindSkip: "skip", KindRelation: "relation", KindBegin: "begin", KindCommit: "commit", KindRow: "row", 9: "Kind(9)"} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", uint8(k), got, want)
		}
	}
}

func TestZeroDecoder(t *testing.T) {
	var d Decoder
	var m Message
	if err := d.Decode(relationMsg(1, "public", "outbox", outboxColumns...), &m); err != nil {
		t.Fatal(err)
	}
	if err := d.Decode(insertMsg(1, text("1"), text("A"), text("k"), text("E"), text("{}"), null(), null()), &m); err != nil || m.Kind != KindSkip {
		t.Fatalf("kind %v err %v, want skip: a zero Decoder matches no table", m.Kind, err)
	}
}

// TestDecodeExtraColumns: extra columns arrive in Row.Extra in the order
// given to New, with their type oids from the Relation, NULL as nil; a
// column that is also an outbox field feeds both; a Relation without an
// extra column fails the table's inserts naming it.
func TestDecodeExtraColumns(t *testing.T) {
	d := New("outbox", DefaultColumns(), "tenant", "created_at", "seq")
	var m Message
	rel := relationMsg(outboxID, "public", "outbox", append(append([]string{}, outboxColumns...), "seq", "tenant")...)
	if err := d.Decode(rel, &m); err != nil {
		t.Fatal(err)
	}
	ins := insertMsg(outboxID, text("1"), text("Order"), text("o-1"), text("OrderCreated"), text(`{}`), text(`{}`),
		text("2024-05-01 10:00:00+00"), null(), text("tenant-a"))
	if err := d.Decode(ins, &m); err != nil {
		t.Fatal(err)
	}
	if m.Kind != KindRow || len(m.Row.Extra) != 3 {
		t.Fatalf("kind %v extra %q", m.Kind, m.Row.Extra)
	}
	if string(m.Row.Extra[0]) != "tenant-a" || string(m.Row.Extra[1]) != "2024-05-01 10:00:00+00" || m.Row.Extra[2] != nil {
		t.Errorf("extra %q, want [tenant-a, the created_at text, nil]", m.Row.Extra)
	}
	if string(m.Row.CreatedAt) != "2024-05-01 10:00:00+00" {
		t.Errorf("created_at %q: an extra column must still feed its field", m.Row.CreatedAt)
	}
	if len(m.Row.ExtraTypes) != 3 || m.Row.ExtraTypes[0] != 25 {
		t.Errorf("extra types %v, want the Relation's oids (25)", m.Row.ExtraTypes)
	}

	// Without the seq column the table's inserts fail, naming it.
	rel = relationMsg(outboxID, "public", "outbox", append(append([]string{}, outboxColumns...), "tenant")...)
	if err := d.Decode(rel, &m); err != nil {
		t.Fatal(err)
	}
	err := d.Decode(insertMsg(outboxID, text("2"), text("Order"), text("o-1"), text("OrderCreated"), text(`{}`), text(`{}`),
		text("2024-05-01 10:00:00+00"), text("tenant-a")), &m)
	var missing *MissingColumnError
	if !errors.As(err, &missing) || missing.Column != "seq" || missing.ID != "2" {
		t.Fatalf("err %v, want a MissingColumnError for seq naming row 2", err)
	}
}
