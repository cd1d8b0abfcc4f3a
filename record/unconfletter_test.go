package record

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/decoder"
	"github.com/cdc-relay/cdc-relay/publisher"
	"github.com/cdc-relay/cdc-relay/router"
)

// letterOfRecord is rec read back as a dead letter.
func letterOfRecord(rec *publisher.Record) *Letter {
	l := &Letter{Key: rec.Key, Value: rec.Value, Time: rec.Time}
	for _, h := range rec.Headers {
		l.Headers = append(l.Headers, LetterHeader{Key: h.Key, Value: h.Value})
	}
	return l
}

// TestUnconfiguredOmitsLargestColumns: a row too large for its dead letter
// keeps its smaller columns (they name the row: id, created_at), lists the
// ones left out in omitted_columns and says to replay it; such a letter
// is not built again.
func TestUnconfiguredOmitsLargestColumns(t *testing.T) {
	var calls atomic.Int32
	b, err := New(Config{Router: testRouter(t), Registry: fakeRegistry(t, &calls), Builtin: router.AllBuiltin, MaxRecordBytes: 2000, DLQTopic: "dlq"})
	if err != nil {
		t.Fatal(err)
	}
	src := &decoder.OtherRow{Table: "public.orders", Columns: []string{"id", "payload", "note", "created_at", "gone"},
		Values: [][]byte{[]byte("7"), []byte(`{"a": "` + strings.Repeat("x", 3000) + `"}`), []byte(strings.Repeat("n", 900)), []byte("2026-12-01 10:00:00+00"), nil}}
	rec := publisher.NewRecord()
	commit := time.Date(2026, 12, 1, 10, 0, 1, 0, time.UTC)
	if _, err := b.Build(context.Background(), rec, commit, &decoder.Row{Other: src, RelationID: 16500}); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, h := range rec.Headers {
		keys = append(keys, h.Key)
	}
	if strings.Join(keys, ",") != "table,omitted_columns,error_kind,error" || string(rec.Headers[1].Value) != `["payload"]` {
		t.Fatalf("headers %q (omitted %s)", keys, rec.Headers[1].Value)
	}
	if e := string(rec.Headers[3].Value); !strings.Contains(e, `the 3009-byte column "payload" is omitted`) || !strings.Contains(e, "cdc-relay replay --table public.orders --since TIME") {
		t.Errorf("error header %q", e)
	}
	if string(rec.Value) != `{"id":"7","note":"`+strings.Repeat("n", 900)+`","created_at":"2026-12-01 10:00:00+00","gone":null}` {
		t.Errorf("value %s", rec.Value)
	}
	_, err = LetterUnconfigured(letterOfRecord(rec))
	if !errors.Is(err, ErrNotRedrivable) || !strings.Contains(err.Error(), `columns ["payload"]`) || !strings.Contains(err.Error(), "cdc-relay replay --table public.orders --since TIME") ||
		!strings.Contains(err.Error(), "2026-12-01T10:00:01Z") {
		t.Errorf("LetterUnconfigured: %v", err)
	}
}

// TestRebuildUnconfigured: the row of an unconfigured_table letter goes
// through the decoder as a Relation and an Insert: with the table
// configured it is the outbox row (columns mapped by name, extra columns
// with today's types); without, ok is false.
func TestRebuildUnconfigured(t *testing.T) {
	var calls atomic.Int32
	b, err := New(Config{Router: testRouter(t), Registry: fakeRegistry(t, &calls), Builtin: router.AllBuiltin, MaxRecordBytes: 1 << 20, DLQTopic: "dlq"})
	if err != nil {
		t.Fatal(err)
	}
	agg := "00000000-0000-4000-8000-000000000001"
	cols := []string{"id", "aggregate_type", "aggregate_id", "event_type", "payload", "headers", "tenant", "created_at"}
	vals := [][]byte{[]byte("41"), []byte("Order"), []byte(agg), []byte("OrderCreated"), []byte(orderCreated(agg, 1)), []byte(`{"traceparent": "x"}`), nil, []byte("2026-12-01 10:00:00+00")}
	rec := publisher.NewRecord()
	commit := time.Date(2026, 12, 1, 10, 0, 1, 0, time.UTC)
	if _, err := b.Build(context.Background(), rec, commit, &decoder.Row{Other: &decoder.OtherRow{Table: "s.orders", Columns: cols, Values: vals}}); err != nil {
		t.Fatal(err)
	}
	l := letterOfRecord(rec)
	ur, err := LetterUnconfigured(l)
	if err != nil || ur.Table != "s.orders" || strings.Join(ur.Columns, ",") != strings.Join(cols, ",") || ur.Values[6] != nil || string(ur.Values[4]) != string(vals[4]) {
		t.Fatalf("LetterUnconfigured = %+v, %v", ur, err)
	}
	rel := Relation{OID: 16600, Schema: "s", Name: "orders", Types: map[string]ColumnType{"tenant": {OID: 1043, Typmod: 36}}}
	dec := decoder.NewDecoder(decoder.Config{Tables: []decoder.Table{{Name: "s.orders", Columns: decoder.DefaultColumns()}}, Extra: []string{"tenant"}})
	rb, ok, err := RebuildUnconfigured(l, ur, dec, rel)
	if err != nil || !ok {
		t.Fatalf("RebuildUnconfigured: %v, ok %v", err, ok)
	}
	r := rb.Row
	if string(r.ID) != "41" || string(r.AggregateID) != agg || string(r.EventType) != "OrderCreated" || string(r.Headers) != string(vals[5]) || r.RelationID != 16600 ||
		len(r.Extra) != 1 || r.Extra[0] != nil || r.ExtraTypes[0] != 1043 || r.ExtraTypmods[0] != 36 || !rb.CommitTime.Equal(commit) || rb.Table != "s.orders" {
		t.Errorf("row %+v", rb)
	}
	var v map[string]any
	if json.Unmarshal(r.Payload, &v) != nil || v["order_id"] != agg {
		t.Errorf("payload %s", r.Payload)
	}
	other := decoder.NewDecoder(decoder.Config{Tables: []decoder.Table{{Name: "public.outbox", Columns: decoder.DefaultColumns()}}})
	if _, ok, err := RebuildUnconfigured(l, ur, other, rel); ok || err != nil {
		t.Errorf("a decoder without the table: ok %v, %v", ok, err)
	}
}
