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
		{`not json`, "message content is not valid JSON: invalid literal, want null at offset 0"},
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
		{`{"aggregate_type": "A", "aggregate_id": "1", "aggregate_id": "2", "event_type": "E", "payload": {}}`, "message content has aggregate_id twice"},
		{`{"aggregate_type": "A", "aggregate_id": "1", "event_type": "E", "payload": {}, "payload": null}`, "message content has payload twice"},
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

// TestDecodeMessageInvalidJSON: content that is not valid JSON (RFC 8259)
// is malformed wherever the fault is, even deep in the payload or after
// the object, and names nothing: the id is the LSN even when the content
// gave one before the fault, and no column is set.
func TestDecodeMessageInvalidJSON(t *testing.T) {
	d := NewDecoder(Config{Tables: []Table{{Name: "outbox", Columns: DefaultColumns()}}, MessagePrefix: "outbox"})
	head := `{"id": "e-1", "aggregate_type": "Order", "aggregate_id": "o-1", "event_type": "E", "headers": {"h": "v"}, "payload": `
	for _, tc := range []struct{ name, content, want string }{
		{"leading zero", head + `{"n": 007}}`, "leading zero in number"},
		{"hex float", head + `{"n": 0x1.8p1}}`, "invalid character 'x'"},
		{"NaN", head + `{"n": NaN}}`, "invalid character 'N'"},
		{"Infinity", head + `{"n": [-Infinity]}}`, "invalid character 'I'"},
		{"trailing comma", head + `{"a": [1, 2,]}}`, "invalid character ']'"},
		{"single quotes", head + `{'a': 1}}`, "want a member name"},
		{"control character", head + "{\"s\": \"a\tb\"}}", "control character in string"},
		{"bad escape", head + `{"s": "\q"}}`, "invalid escape"},
		{"lone surrogate", head + `{"s": "\udc00"}}`, "unpaired \\u surrogate"},
		{"invalid UTF-8", head + "{\"s\": \"\xc3\x28\"}}", "invalid UTF-8"},
		{"trailing garbage", head + `{}} x`, "after the value"},
		{"two objects", head + `{}}{}`, "after the value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m Message
			if err := d.Decode(messageMsg(true, 0xAB, "outbox", tc.content), &m); err != nil {
				t.Fatal(err)
			}
			r := m.Row
			if !strings.HasPrefix(r.Malformed, "message content is not valid JSON: ") || !strings.Contains(r.Malformed, tc.want) {
				t.Errorf("malformed %q, want not valid JSON: ...%s", r.Malformed, tc.want)
			}
			if m.Kind != KindRow || !r.Message || string(r.ID) != "0/AB" || string(r.Content) != tc.content {
				t.Errorf("kind %v id %q content %q, want the LSN id and the raw content", m.Kind, r.ID, r.Content)
			}
			if r.AggregateType != nil || r.AggregateID != nil || r.EventType != nil || r.Payload != nil || r.Headers != nil || r.PayloadNull {
				t.Errorf("columns %q %q %q %q %q set from invalid content", r.AggregateType, r.AggregateID, r.EventType, r.Payload, r.Headers)
			}
		})
	}
}
