package decoder

import (
	"strings"
	"testing"
)

// benchPayload is a ~300 byte jsonb text value, the payload size of the
// throughput figures in docs/BENCHMARKS.md.
var benchPayload = `{"order_id": "ord_7f3a9c2e", "customer": {"id": 918273, "email": "someone@example.com", "tier": "gold"}, ` +
	`"lines": [{"sku": "SKU-1001", "qty": 2, "price_minor": 1999}, {"sku": "SKU-2002", "qty": 1, "price_minor": 4999}], ` +
	`"total_minor": 8997, "currency": "EUR", "placed_at": "2024-05-01T10:00:00Z", "note": "` + strings.Repeat("x", 20) + `"}`

func BenchmarkDecodeInsert(b *testing.B) {
	d := newOutbox(b)
	data := insertMsg(outboxID, text("123456789"), text("order"), text("ord_7f3a9c2e"), text("OrderPlaced"),
		text(benchPayload), text(`{"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736"}`), text("2024-05-01 10:00:00.123456+00"))
	var m Message
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := d.Decode(data, &m); err != nil {
			b.Fatal(err)
		}
	}
	if m.Kind != KindRow || len(m.Row.Payload) != len(benchPayload) {
		b.Fatalf("got %+v", m)
	}
}

func BenchmarkDecodeBegin(b *testing.B) {
	d := New("outbox", DefaultColumns())
	data := beginMsg(0x1_6B3748, 768_000_000_000_000, 751)
	var m Message
	b.ReportAllocs()
	for range b.N {
		if err := d.Decode(data, &m); err != nil {
			b.Fatal(err)
		}
	}
	if m.Kind != KindBegin {
		b.Fatalf("kind = %v", m.Kind)
	}
}

func BenchmarkDecodeCommit(b *testing.B) {
	d := New("outbox", DefaultColumns())
	data := commitMsg(0x1_6B3748, 0x1_6B3780, 768_000_000_000_000)
	var m Message
	b.ReportAllocs()
	for range b.N {
		if err := d.Decode(data, &m); err != nil {
			b.Fatal(err)
		}
	}
	if m.Kind != KindCommit {
		b.Fatalf("kind = %v", m.Kind)
	}
}

// BenchmarkDecodeInsertOtherTable measures inserts the relay skips.
func BenchmarkDecodeInsertOtherTable(b *testing.B) {
	d := newOutbox(b)
	var m Message
	if err := d.Decode(relationMsg(7, "public", "orders", "id", "body"), &m); err != nil {
		b.Fatal(err)
	}
	data := insertMsg(7, text("1"), text(benchPayload))
	b.ReportAllocs()
	for range b.N {
		if err := d.Decode(data, &m); err != nil {
			b.Fatal(err)
		}
	}
	if m.Kind != KindSkip {
		b.Fatalf("kind = %v", m.Kind)
	}
}

// BenchmarkDecodeStream is one 100-row transaction, as the relay sees it.
func BenchmarkDecodeStream(b *testing.B) {
	d := newOutbox(b)
	msgs := [][]byte{beginMsg(0x200, 1, 2)}
	for i := range 100 {
		msgs = append(msgs, insertMsg(outboxID, text(strings.Repeat("1", i%9+1)), text("order"), text("ord_7f3a9c2e"),
			text("OrderPlaced"), text(benchPayload), text("{}"), text("2024-05-01 10:00:00+00")))
	}
	msgs = append(msgs, commitMsg(0x200, 0x240, 1))
	var m Message
	b.ReportAllocs()
	for range b.N {
		for _, data := range msgs {
			if err := d.Decode(data, &m); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*100), "ns/row")
}

// BenchmarkDecodeMessage decodes a logical decoding message of the
// table-less outbox: its JSON content (the bench payload, headers and an
// id) read into the outbox columns.
func BenchmarkDecodeMessage(b *testing.B) {
	d := NewDecoder(Config{Tables: []Table{{Name: "outbox", Columns: DefaultColumns()}}, MessagePrefix: "outbox"})
	content := `{"id": "123456789", "aggregate_type": "order", "aggregate_id": "ord_7f3a9c2e", "event_type": "OrderPlaced", "payload": ` +
		benchPayload + `, "headers": {"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736"}}`
	data := messageMsg(true, 0x1_6B3748, "outbox", content)
	var m Message
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if err := d.Decode(data, &m); err != nil {
			b.Fatal(err)
		}
	}
	if m.Kind != KindRow || m.Row.Malformed != "" || len(m.Row.Payload) != len(benchPayload) {
		b.Fatalf("got %+v", m.Row)
	}
}
