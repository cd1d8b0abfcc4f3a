package decoder

import (
	"errors"
	"slices"
	"testing"
)

// newReporting is a decoder for public.outbox that reports the inserts of
// other tables (Config.OtherTables), with public.orders (id, body, note)
// announced as relation 7.
func newReporting(t testing.TB) *Decoder {
	t.Helper()
	d := NewDecoder(Config{Tables: []Table{{Name: "outbox", Columns: DefaultColumns()}}, OtherTables: true})
	var m Message
	if err := d.Decode(relationMsg(outboxID, "public", "outbox", outboxColumns...), &m); err != nil {
		t.Fatal(err)
	}
	if err := d.Decode(relationMsg(7, "public", "orders", "id", "body", "note"), &m); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestOtherTableRow: with OtherTables, an insert into a table that is not
// an outbox table is a KindOtherRow with the table's name and every
// column's text, NULL as nil; outbox inserts around it are unchanged.
func TestOtherTableRow(t *testing.T) {
	d := newReporting(t)
	var m Message
	if err := d.Decode(outboxInsert("1", "Order", "o-1", "OrderCreated", "{}"), &m); err != nil || m.Kind != KindRow || m.Row.Other != nil {
		t.Fatalf("outbox insert: kind %v other %v err %v, want a row", m.Kind, m.Row.Other, err)
	}
	if err := d.Decode(insertMsg(7, text("42"), text(`{"a": 1}`), null()), &m); err != nil {
		t.Fatal(err)
	}
	o := m.Row.Other
	if m.Kind != KindOtherRow || o == nil || o.Table != "public.orders" || m.Row.RelationID != 7 {
		t.Fatalf("got kind %v %+v, want other_row of public.orders", m.Kind, m.Row)
	}
	if want := []string{"id", "body", "note"}; !slices.Equal(o.Columns, want) {
		t.Errorf("columns = %q, want %q", o.Columns, want)
	}
	if len(o.Values) != 3 || string(o.Values[0]) != "42" || string(o.Values[1]) != `{"a": 1}` || o.Values[2] != nil {
		t.Errorf("values = %q, want 42, {\"a\": 1}, nil", o.Values)
	}
	if m.Row.ID != nil || m.Row.Payload != nil {
		t.Errorf("outbox fields set on an other row: %+v", m.Row)
	}
	// The next outbox row carries nothing of the other row.
	if err := d.Decode(outboxInsert("2", "Order", "o-1", "OrderCreated", "{}"), &m); err != nil || m.Kind != KindRow {
		t.Fatalf("outbox insert: kind %v err %v", m.Kind, err)
	}
	if m.Row.Other != nil || string(m.Row.ID) != "2" {
		t.Errorf("outbox row after an other row: %+v", m.Row)
	}
	if got := KindOtherRow.String(); got != "other_row" {
		t.Errorf("KindOtherRow.String() = %q", got)
	}
}

// TestOtherTableRowWithoutOption: the default still skips such inserts.
func TestOtherTableRowWithoutOption(t *testing.T) {
	d := newOutbox(t)
	var m Message
	if err := d.Decode(relationMsg(7, "public", "orders", "id"), &m); err != nil {
		t.Fatal(err)
	}
	if err := d.Decode(insertMsg(7, text("1")), &m); err != nil || m.Kind != KindSkip || m.Row.Other != nil {
		t.Fatalf("kind %v err %v, want skip", m.Kind, err)
	}
}

// TestOtherTableRowMalformed: a broken insert into another table is an
// error as before, never a row with made-up values.
func TestOtherTableRowMalformed(t *testing.T) {
	tests := []struct {
		name string
		data []byte
		want error
	}{
		{"too few columns", insertMsg(7, text("1"), text("x")), ErrColumnCount},
		{"truncated value", insertMsg(7, text("1"), text("x"), text("y"))[:20], ErrShort},
		{"trailing bytes", append(insertMsg(7, text("1"), text("x"), null()), 0), ErrTrailingBytes},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newReporting(t)
			var m Message
			if err := d.Decode(tt.data, &m); !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

// TestOtherTableRowAllocs: after the first row, other rows allocate
// nothing, like outbox rows.
func TestOtherTableRowAllocs(t *testing.T) {
	d := newReporting(t)
	data := insertMsg(7, text("42"), text(benchPayload), null())
	var m Message
	if n := testing.AllocsPerRun(100, func() {
		if err := d.Decode(data, &m); err != nil || m.Kind != KindOtherRow {
			t.Fatalf("kind %v err %v", m.Kind, err)
		}
	}); n != 0 {
		t.Errorf("%v allocations per other row, want 0", n)
	}
}

// BenchmarkDecodeInsertOtherTableReported measures inserts into another
// table with Config.OtherTables set.
func BenchmarkDecodeInsertOtherTableReported(b *testing.B) {
	d := newReporting(b)
	data := insertMsg(7, text("1"), text(benchPayload), null())
	var m Message
	b.ReportAllocs()
	for range b.N {
		if err := d.Decode(data, &m); err != nil {
			b.Fatal(err)
		}
	}
	if m.Kind != KindOtherRow {
		b.Fatalf("kind = %v", m.Kind)
	}
}
