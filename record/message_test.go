package record

import (
	"context"
	"encoding/binary"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/decoder"
	"github.com/cdc-relay/cdc-relay/publisher"
	"github.com/cdc-relay/cdc-relay/router"
)

// logicalMessage is pgoutput's 'M' message: transactional, at lsn, with
// the prefix "outbox" and content.
func logicalMessage(lsn uint64, content string) []byte {
	b := []byte{'M', 1}
	b = binary.BigEndian.AppendUint64(b, lsn)
	b = append(b, "outbox\x00"...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(content)))
	return append(b, content...)
}

// TestInvalidJSONMessage: a logical message whose content is not valid
// JSON is a dead letter in both value formats, never a record for a topic,
// even where the fault lies in the payload a value writer would take as
// it is (a leading zero) or read as Go does (a hex float): reason
// invalid_message, the LSN as id, the raw content as value, no key.
func TestInvalidJSONMessage(t *testing.T) {
	var calls atomic.Int32
	reg := fakeRegistry(t, &calls)
	const head = `{"id": "e-1", "aggregate_type": "Order", "aggregate_id": "o-1", "event_type": "OrderCreated", "headers": {"h": "v"}, "payload": `
	contents := []string{
		head + `{"n": 007}}`,
		head + `{"n": 0x1.8p1}}`,
		head + `{"n": NaN}}`,
		head + `{"a": [1,]}}`,
		head + `{"s": "\udc00"}}`,
		head + "{\"s\": \"\xff\"}}",
		head + `{}} trailing`,
	}
	for _, format := range []ValueFormat{ValueAvro, ValueJSON} {
		b, err := New(Config{Router: testRouter(t), Registry: reg, ValueFormat: format, Builtin: router.AllBuiltin, MaxRecordBytes: 1 << 20, DLQTopic: "dlq"})
		if err != nil {
			t.Fatal(err)
		}
		d := decoder.NewDecoder(decoder.Config{Tables: []decoder.Table{{Name: "public.outbox", Columns: decoder.DefaultColumns()}}, MessagePrefix: "outbox"})
		for _, content := range contents {
			var m decoder.Message
			if err := d.Decode(logicalMessage(0x1_0000ABCD, content), &m); err != nil {
				t.Fatal(err)
			}
			rec := publisher.NewRecord()
			inv, err := b.Build(context.Background(), rec, time.Now(), &m.Row)
			if err != nil {
				t.Fatal(err)
			}
			if inv == nil || inv.Kind != ReasonMessage || inv.ID != "1/ABCD" {
				t.Fatalf("%s %q: invalid %+v, want invalid_message with id 1/ABCD", format, content, inv)
			}
			id, _ := header(rec.Headers, router.HeaderID)
			kind, _ := header(rec.Headers, HeaderErrorKind)
			reason, _ := header(rec.Headers, HeaderError)
			if rec.Topic != "dlq" || rec.Key != nil || string(rec.Value) != content || id != "1/ABCD" || kind != ReasonMessage {
				t.Errorf("%s %q: topic %q key %q value %q id %q error_kind %q, want the DLQ, no key, the content, the LSN", format, content, rec.Topic, rec.Key, rec.Value, id, kind)
			}
			if _, ok := header(rec.Headers, "h"); ok {
				t.Errorf("%s %q: the content's headers travel: %v", format, content, rec.Headers)
			}
			if want := "message content is not valid JSON: "; len(reason) < len(want) || reason[:len(want)] != want {
				t.Errorf("%s %q: error %q", format, content, reason)
			}
			publisher.Release(rec)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("%d registry calls for invalid content, want none", n)
	}
}
