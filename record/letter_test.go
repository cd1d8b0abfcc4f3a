package record

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/decoder"
	"github.com/cdc-relay/cdc-relay/publisher"
	"github.com/cdc-relay/cdc-relay/router"
)

// unknownObserver records the unknown fields the builder reports.
type unknownObserver struct{ got []string }

func (*unknownObserver) SchemaLookup(bool) {}
func (o *unknownObserver) UnknownField(eventType, field string) {
	o.got = append(o.got, eventType+":"+field)
}

var _ UnknownFieldObserver = (*unknownObserver)(nil)

// withExtra is an OrderCreated payload with a member the schema lacks at
// the top and one inside an array item.
const withExtra = `{"order_id": "00000000-0000-4000-8000-000000000001", "customer_id": "c-1", "status": "PENDING", "amount_cents": 5,
	"items": [{"sku": "s", "quantity": 1, "unit_price_cents": 5, "colour": "red"}], "created_at": 1700000000000, "extra_field": "surprise"}`

// TestUnknownFields: members the schema lacks are reported under both
// modes (with their schema path), published without them under ignore,
// and make the event invalid (unknown_field) under dlq.
func TestUnknownFields(t *testing.T) {
	var calls atomic.Int32
	agg := "00000000-0000-4000-8000-000000000001"
	for _, mode := range []UnknownFields{UnknownIgnore, UnknownDLQ} {
		obs := &unknownObserver{}
		b, err := New(Config{Router: testRouter(t), Registry: fakeRegistry(t, &calls), Builtin: router.AllBuiltin, MaxRecordBytes: 1 << 20,
			DLQTopic: "dlq", Observer: obs, UnknownFields: mode})
		if err != nil {
			t.Fatal(err)
		}
		for _, payload := range []string{orderCreated(agg, 1), withExtra} {
			obs.got = nil
			rec := &publisher.Record{}
			row := &decoder.Row{ID: []byte("1"), AggregateType: []byte("Order"), AggregateID: []byte(agg), EventType: []byte("OrderCreated"), Payload: []byte(payload)}
			inv, err := b.Build(context.Background(), rec, time.Now(), row)
			if err != nil {
				t.Fatal(err)
			}
			extra := payload == withExtra
			if want := []string{"OrderCreated:extra_field", "OrderCreated:items.colour"}; extra && !slices.Equal(obs.got, want) || !extra && len(obs.got) > 0 {
				t.Errorf("mode %d: reported %v", mode, obs.got)
			}
			switch {
			case extra && mode == UnknownDLQ:
				if inv == nil || inv.Kind != ReasonUnknownField || !strings.Contains(inv.Reason, `"extra_field"`) || rec.Topic != "dlq" {
					t.Errorf("dlq mode: invalid %+v topic %q, want unknown_field naming extra_field", inv, rec.Topic)
				}
			case inv != nil:
				t.Errorf("mode %d extra %v: invalid %v", mode, extra, inv)
			case rec.Topic != "outbox.event.Order":
				t.Errorf("topic %q", rec.Topic)
			}
		}
	}
}

// letterOf is rec as dlq redrive reads it back from Kafka.
func letterOf(rec *publisher.Record) *Letter {
	l := &Letter{Key: bytes.Clone(rec.Key), Value: bytes.Clone(rec.Value), Time: rec.Time}
	for _, h := range rec.Headers {
		l.Headers = append(l.Headers, LetterHeader{Key: h.Key, Value: bytes.Clone(h.Value)})
	}
	return l
}

// TestLetterRebuild: a dead letter rebuilds into the row it came from:
// redriven through a builder that accepts it, it gives the record the
// original row gives, with the header and timestamp columns, the row's
// headers and the commit time.
func TestLetterRebuild(t *testing.T) {
	var calls atomic.Int32
	agg := "00000000-0000-4000-8000-000000000001"
	commit := time.Date(2026, 12, 1, 6, 11, 25, 987654000, time.UTC)
	cfg := Config{Router: testRouter(t), Registry: fakeRegistry(t, &calls), Builtin: router.AllBuiltin, MaxRecordBytes: 1 << 20, DLQTopic: "dlq",
		Tables:        []Table{{Name: "public.outbox", OID: 777, AggregateID: "aggregate_id", Columns: outboxTable}},
		HeaderColumns: []HeaderColumn{{"tenant", "tenant"}}, TimestampColumn: "occurred_ms", UnknownFields: UnknownDLQ}
	strict, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.UnknownFields = UnknownIgnore
	lenient, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	row := func() *decoder.Row {
		return &decoder.Row{ID: []byte("42"), AggregateType: []byte("Order"), AggregateID: []byte(agg), EventType: []byte("OrderCreated"),
			Payload: []byte(withExtra), Headers: []byte(`{"traceparent": "00-ab", "attempt": 2}`), RelationID: 777,
			Extra: [][]byte{[]byte("5d9e1d7a-6b1f-4c4e-9a57-1f0e0a3c2b11"), nil}, ExtraTypes: []uint32{90001, oidInt8}, ExtraTypmods: []int32{-1, -1}}
	}
	dead := &publisher.Record{}
	inv, err := strict.Build(context.Background(), dead, commit, row())
	if err != nil || inv == nil || inv.Kind != ReasonUnknownField {
		t.Fatalf("strict build: %v %v", inv, err)
	}
	rb, err := Rebuild(letterOf(dead), lenient.ExtraColumns(), nil, "outbox")
	if err != nil {
		t.Fatal(err)
	}
	if rb.Table != "public.outbox" || !rb.CommitTime.Equal(commit) {
		t.Errorf("table %q commit time %v", rb.Table, rb.CommitTime)
	}
	rb.Row.ExtraTypes, rb.Row.ExtraTypmods = []uint32{90001, oidInt8}, []int32{-1, -1}
	got, want := &publisher.Record{}, &publisher.Record{}
	if inv, err := lenient.Build(context.Background(), got, rb.CommitTime, &rb.Row); inv != nil || err != nil {
		t.Fatalf("redrive build: %v %v", inv, err)
	}
	if inv, err := lenient.Build(context.Background(), want, commit, row()); inv != nil || err != nil {
		t.Fatal(inv, err)
	}
	if got.Topic != want.Topic || !bytes.Equal(got.Key, want.Key) || !bytes.Equal(got.Value, want.Value) || !got.Time.Equal(want.Time) ||
		!sameHeaders(got, want) {
		t.Errorf("rebuilt record differs:\n got %s %q %v %v\nwant %s %q %v %v", got.Topic, got.Key, got.Headers, got.Time, want.Topic, want.Key, want.Headers, want.Time)
	}

	t.Run("NULL columns stay NULL", func(t *testing.T) {
		src := row()
		src.Payload, src.PayloadNull = nil, true
		dead := &publisher.Record{}
		if inv, _ := strict.Build(context.Background(), dead, commit, src); inv == nil || inv.Kind != ReasonNull {
			t.Fatalf("want null_column, got %v", inv)
		}
		rb, err := Rebuild(letterOf(dead), lenient.ExtraColumns(), nil, "outbox")
		if err != nil || !rb.Row.PayloadNull || rb.Row.Payload != nil {
			t.Fatalf("rebuilt payload null=%v %q, %v", rb.Row.PayloadNull, rb.Row.Payload, err)
		}
	})
	t.Run("a letter that lost part of its row is not redrivable", func(t *testing.T) {
		small := cfg
		small.MaxRecordBytes = 1024
		b, err := New(small)
		if err != nil {
			t.Fatal(err)
		}
		src := row()
		src.EventType = []byte("NoSuchType")
		src.Payload = bytes.Repeat([]byte("x"), 2000)
		dead := &publisher.Record{}
		if inv, _ := b.Build(context.Background(), dead, commit, src); inv == nil {
			t.Fatal("want a dead letter")
		}
		if _, err := Rebuild(letterOf(dead), b.ExtraColumns(), nil, "outbox"); !errors.Is(err, ErrNotRedrivable) {
			t.Errorf("Rebuild = %v, want ErrNotRedrivable", err)
		}
	})
	t.Run("a logical message goes through the decoder again", func(t *testing.T) {
		content := `{"id": "m-1", "aggregate_type": "Order", "aggregate_id": "` + agg + `", "event_type": "OrderCreated", "payload": ` + withExtra + `, "headers": {"traceparent": "00-cd"}}`
		src := &decoder.Row{Message: true, LSN: 0x16B3748, Content: []byte(content), ID: []byte("m-1"), AggregateType: []byte("Order"),
			AggregateID: []byte(agg), EventType: []byte("OrderCreated"), Payload: []byte(withExtra), Headers: []byte(`{"traceparent": "00-cd"}`),
			Extra: make([][]byte, 2), ExtraTypes: make([]uint32, 2), ExtraTypmods: make([]int32, 2)}
		dead := &publisher.Record{}
		if inv, _ := strict.Build(context.Background(), dead, commit, src); inv == nil || inv.Kind != ReasonUnknownField {
			t.Fatalf("want unknown_field, got %v", inv)
		}
		dec := decoder.NewDecoder(decoder.Config{MessagePrefix: "outbox", Extra: lenient.ExtraColumns()})
		rb, err := Rebuild(letterOf(dead), lenient.ExtraColumns(), dec, "outbox")
		if err != nil {
			t.Fatal(err)
		}
		if !rb.Row.Message || string(rb.Row.ID) != "m-1" || rb.Row.LSN != 0x16B3748 || string(rb.Row.Payload) != withExtra {
			t.Errorf("rebuilt message %+v", rb.Row)
		}
	})
}

func sameHeaders(a, b *publisher.Record) bool {
	if len(a.Headers) != len(b.Headers) {
		return false
	}
	for i := range a.Headers {
		if a.Headers[i].Key != b.Headers[i].Key || !bytes.Equal(a.Headers[i].Value, b.Headers[i].Value) {
			return false
		}
	}
	return true
}

// TestUnknownFieldSinkAllocatesNothing: watching for unknown fields (the
// relay's observer is always one) costs no allocation per event whose
// payload has none.
func TestUnknownFieldSinkAllocatesNothing(t *testing.T) {
	var calls atomic.Int32
	b, err := New(Config{Router: testRouter(t), Registry: fakeRegistry(t, &calls), Builtin: router.AllBuiltin, MaxRecordBytes: 1 << 20,
		DLQTopic: "dlq", Observer: &unknownObserver{}, UnknownFields: UnknownDLQ})
	if err != nil {
		t.Fatal(err)
	}
	agg := "7c4f7d6e-2f55-4c4e-9f4e-0d9b8a3c1e21"
	row := decoder.Row{ID: []byte("1"), AggregateType: []byte("Order"), AggregateID: []byte(agg), EventType: []byte("OrderCreated"), Payload: []byte(orderCreated(agg, 1))}
	rec := &publisher.Record{}
	build := func() {
		if inv, err := b.Build(context.Background(), rec, time.Now(), &row); inv != nil || err != nil {
			t.Fatal(inv, err)
		}
	}
	build() // registers the schema
	if allocs := testing.AllocsPerRun(200, build); allocs != 0 {
		t.Errorf("%v allocations per event with the unknown-field sink, want 0", allocs)
	}
}
