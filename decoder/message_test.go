package decoder

import (
	"strings"
	"testing"
)

func messageMsg(transactional bool, lsn uint64, prefix, content string) []byte {
	flags := byte(0)
	if transactional {
		flags = 1
	}
	b := []byte{'M', flags}
	b = be64(b, lsn)
	b = cstr(b, prefix)
	b = be32(b, uint32(len(content)))
	return append(b, content...)
}

func TestDecodeMessage(t *testing.T) {
	d := NewDecoder(Config{Tables: []Table{{Name: "outbox", Columns: DefaultColumns()}}, Extra: []string{"tenant"}, MessagePrefix: "outbox"})
	var m Message

	content := `{"aggregate_type": "Order", "aggregate_id": "o-\"1\"", "event_type": "OrderCreated",
		"payload": {"a": [1, {"b": null}]}, "headers": {"traceparent": "00-1"}, "ignored": 5}`
	if err := d.Decode(messageMsg(true, 1<<32|0x16B3748, "outbox", content), &m); err != nil {
		t.Fatal(err)
	}
	r := m.Row
	if m.Kind != KindRow || !r.Message || r.NonTransactional || r.Malformed != "" || r.LSN != 1<<32|0x16B3748 {
		t.Fatalf("kind %v row %+v", m.Kind, r)
	}
	if string(r.ID) != "1/16B3748" {
		t.Errorf("id %q, want the LSN text 1/16B3748", r.ID)
	}
	if string(r.AggregateType) != "Order" || string(r.AggregateID) != `o-"1"` || string(r.EventType) != "OrderCreated" ||
		string(r.Payload) != `{"a": [1, {"b": null}]}` || string(r.Headers) != `{"traceparent": "00-1"}` {
		t.Errorf("columns %q %q %q %q %q", r.AggregateType, r.AggregateID, r.EventType, r.Payload, r.Headers)
	}
	if len(r.Extra) != 1 || r.Extra[0] != nil || len(r.ExtraTypes) != 1 {
		t.Errorf("extra %q types %v, want one NULL", r.Extra, r.ExtraTypes)
	}

	for _, tc := range []struct{ content, id string }{
		{`{"id": "e-7", "aggregate_type": "A", "aggregate_id": "1", "event_type": "E", "payload": {}}`, "e-7"},
		{`{"id": 42, "aggregate_type": "A", "aggregate_id": "1", "event_type": "E", "payload": {}}`, "42"},
	} {
		if err := d.Decode(messageMsg(true, 10, "outbox", tc.content), &m); err != nil || m.Row.Malformed != "" || string(m.Row.ID) != tc.id {
			t.Errorf("%s: id %q malformed %q err %v, want %s", tc.content, m.Row.ID, m.Row.Malformed, err, tc.id)
		}
	}

	if err := d.Decode(messageMsg(false, 10, "outbox", content), &m); err != nil || !m.Row.NonTransactional {
		t.Errorf("non-transactional: %+v %v", m.Row, err)
	}
	if err := d.Decode(messageMsg(true, 10, "other", content), &m); err != nil || m.Kind != KindSkip {
		t.Errorf("other prefix: kind %v err %v", m.Kind, err)
	}
	if err := d.Decode(messageMsg(true, 10, "outbox", `{"aggregate_type": "A", "aggregate_id": "1", "event_type": "E", "payload": null}`), &m); err != nil ||
		m.Row.Malformed != "" || !m.Row.PayloadNull {
		t.Errorf("null payload: %+v %v", m.Row, err)
	}

	for _, tc := range []struct{ content, want string }{
		{`not json`, "not a JSON object"},
		{`[1]`, "not a JSON object: got an array"},
		{`null`, "not a JSON object"},
		{`{"aggregate_type": 1, "aggregate_id": "1", "event_type": "E", "payload": {}}`, "aggregate_type must be a string, got a number"},
		{`{"aggregate_type": "A", "aggregate_id": null, "event_type": "E", "payload": {}}`, "aggregate_id must be a string, got null"},
		{`{"aggregate_type": "A", "aggregate_id": "1", "payload": {}}`, "no event_type"},
		{`{"aggregate_type": "A", "aggregate_id": "1", "event_type": "E"}`, "no payload"},
		{`{"aggregate_type": "A", "aggregate_id": "1", "event_type": "E", "payload": [1]}`, "payload must be a JSON object, got an array"},
		{`{"aggregate_type": "A", "aggregate_id": "1", "event_type": "E", "payload": {}, "headers": "x"}`, "headers must be a JSON object"},
		{`{"id": true, "aggregate_type": "A", "aggregate_id": "1", "event_type": "E", "payload": {}}`, "id must be a string or a number"},
		{`{"aggregate_type": "A", "aggregate_id": "1", "event_type": "E", "payload": {}`, "not valid JSON"},
	} {
		if err := d.Decode(messageMsg(true, 0xAB, "outbox", tc.content), &m); err != nil {
			t.Fatalf("%s: %v", tc.content, err)
		}
		if m.Kind != KindRow || !strings.Contains(m.Row.Malformed, tc.want) || string(m.Row.ID) != "0/AB" {
			t.Errorf("%s: malformed %q id %q, want %q and the LSN id", tc.content, m.Row.Malformed, m.Row.ID, tc.want)
		}
	}

	// Without a prefix every message is skipped; a truncated one is still an error.
	plain := New("outbox", DefaultColumns())
	if err := plain.Decode(messageMsg(true, 10, "outbox", content), &m); err != nil || m.Kind != KindSkip {
		t.Errorf("no prefix: kind %v err %v", m.Kind, err)
	}
	if err := d.Decode(messageMsg(true, 10, "outbox", content)[:20], &m); err == nil {
		t.Error("truncated message decoded")
	}
}

// TestDecodeSeveralTables: two outbox tables with their own column names;
// other tables are skipped.
func TestDecodeSeveralTables(t *testing.T) {
	other := Columns{ID: "event_id", AggregateType: "kind", AggregateID: "key", EventType: "type", Payload: "body"}
	d := NewDecoder(Config{Tables: []Table{{Name: "public.outbox", Columns: DefaultColumns()}, {Name: "billing.events", Columns: other}}})
	var m Message
	for _, msg := range [][]byte{
		relationMsg(1, "public", "outbox", outboxColumns...),
		relationMsg(2, "billing", "events", "event_id", "kind", "key", "type", "body"),
		relationMsg(3, "public", "events", "event_id", "kind", "key", "type", "body"),
	} {
		if err := d.Decode(msg, &m); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Decode(insertMsg(2, text("9"), text("Invoice"), text("i-1"), text("InvoiceSent"), text(`{}`)), &m); err != nil {
		t.Fatal(err)
	}
	if m.Kind != KindRow || string(m.Row.ID) != "9" || string(m.Row.AggregateType) != "Invoice" || string(m.Row.EventType) != "InvoiceSent" || m.Row.Headers != nil {
		t.Errorf("billing.events row %+v", m.Row)
	}
	if err := d.Decode(outboxInsertFor(1), &m); err != nil || m.Kind != KindRow || string(m.Row.AggregateType) != "Order" {
		t.Errorf("public.outbox row %+v %v", m.Row, err)
	}
	if err := d.Decode(insertMsg(3, text("9"), text("Invoice"), text("i-1"), text("InvoiceSent"), text(`{}`)), &m); err != nil || m.Kind != KindSkip {
		t.Errorf("public.events: kind %v err %v", m.Kind, err)
	}
}

func outboxInsertFor(rel uint32) []byte {
	return insertMsg(rel, text("1"), text("Order"), text("o-1"), text("OrderCreated"), text(`{}`), text(`{}`), text("2024-05-01 10:00:00+00"))
}
