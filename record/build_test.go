package record

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/catalog"
	"github.com/cdc-relay/cdc-relay/decoder"
	"github.com/cdc-relay/cdc-relay/publisher"
	"github.com/cdc-relay/cdc-relay/router"
	"github.com/cdc-relay/cdc-relay/schemaregistry"
)

// fakeRegistry answers every registration with id 7 and counts them.
func fakeRegistry(t testing.TB, calls *atomic.Int32) *schemaregistry.Registry {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
		io.WriteString(w, `{"id": 7}`)
	}))
	t.Cleanup(srv.Close)
	schemas, err := schemaregistry.LoadDir("../testdata/schemas")
	if err != nil {
		t.Fatal(err)
	}
	reg, err := schemaregistry.New(schemaregistry.Config{URL: srv.URL, Strategy: schemaregistry.TopicRecord, Schemas: schemas})
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

func testRouter(t testing.TB) *router.Router {
	t.Helper()
	rt, err := router.New(router.DefaultTemplate)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

var outboxTable = map[string]catalog.Column{
	"id":             {TypeOID: oidInt8, BaseOID: oidInt8, Type: "bigint", NotNull: true},
	"aggregate_type": {TypeOID: oidText, BaseOID: oidText, Type: "text", NotNull: true},
	"aggregate_id":   {TypeOID: oidText, BaseOID: oidText, Type: "text", NotNull: true},
	"event_type":     {TypeOID: oidText, BaseOID: oidText, Type: "text", NotNull: true},
	"payload":        {TypeOID: oidJSONB, BaseOID: oidJSONB, Type: "jsonb"},
	"headers":        {TypeOID: oidJSONB, BaseOID: oidJSONB, Type: "jsonb", NotNull: true},
	"created_at":     {TypeOID: oidTimestamptz, BaseOID: oidTimestamptz, Type: "timestamp with time zone", NotNull: true},
	"tenant":         {TypeOID: 90001, BaseOID: oidUUID, Type: "tenant_id"}, // a domain over uuid
	"occurred_ms":    {TypeOID: oidInt8, BaseOID: oidInt8, Type: "bigint"},
	"span":           {TypeOID: 1186, BaseOID: 1186, Type: "interval"},
}

func header(hs []publisher.Header, key string) (string, bool) {
	for _, h := range hs {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

func TestBuildFormats(t *testing.T) {
	var calls atomic.Int32
	reg := fakeRegistry(t, &calls)
	commit := time.Date(2026, 12, 1, 6, 11, 25, 987654000, time.UTC)
	agg := "00000000-0000-4000-8000-000000000001"
	base := Config{Router: testRouter(t), Registry: reg, Builtin: router.AllBuiltin, Tables: []Table{{Name: "public.outbox", AggregateID: "aggregate_id", Columns: outboxTable}}, MaxRecordBytes: 1 << 20, DLQTopic: "dlq"}
	row := func() *decoder.Row {
		return &decoder.Row{ID: []byte("42"), AggregateType: []byte("Order"), AggregateID: []byte(agg), EventType: []byte("OrderCreated"),
			Payload: []byte(orderCreated(agg, 1)), Headers: []byte(`{"traceparent": "00-ab"}`)}
	}

	t.Run("defaults: commit time, all builtin headers, Avro", func(t *testing.T) {
		b, err := New(base)
		if err != nil {
			t.Fatal(err)
		}
		rec := &publisher.Record{}
		if inv, err := b.Build(context.Background(), rec, commit, row()); inv != nil || err != nil {
			t.Fatal(inv, err)
		}
		if !rec.Time.Equal(commit) {
			t.Errorf("time %v, want the commit time %v", rec.Time, commit)
		}
		if string(rec.Key) != agg || rec.Topic != "outbox.event.Order" || rec.Value[0] != 0 {
			t.Errorf("key %q topic %q value % x", rec.Key, rec.Topic, rec.Value[:5])
		}
		var keys []string
		for _, h := range rec.Headers {
			keys = append(keys, h.Key)
		}
		if got := strings.Join(keys, ","); got != "id,event_type,aggregate_type,traceparent" {
			t.Errorf("headers %s", got)
		}
	})

	t.Run("Debezium's shape: id header, header columns, json key and value", func(t *testing.T) {
		cfg := base
		cfg.Builtin, cfg.KeyFormat, cfg.ValueFormat = router.BuiltinID, KeyJSON, ValueJSON
		cfg.HeaderColumns = []HeaderColumn{{"tenant", "tenant"}, {"created_at", "created"}, {"occurred_ms", "occurred_ms"}}
		b, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(b.ExtraColumns(), ","); got != "tenant,created_at,occurred_ms" {
			t.Fatalf("extra columns %s", got)
		}
		src := row()
		src.Extra = [][]byte{[]byte("5d9e1d7a-6b1f-4c4e-9a57-1f0e0a3c2b11"), []byte("2026-12-01 06:11:25.5+00"), nil}
		src.ExtraTypes = []uint32{90001, oidTimestamptz, oidInt8}
		src.ExtraTypmods = []int32{-1, -1, -1}
		rec := &publisher.Record{}
		if inv, err := b.Build(context.Background(), rec, commit, src); inv != nil || err != nil {
			t.Fatal(inv, err)
		}
		if want := `"` + agg + `"`; string(rec.Key) != want {
			t.Errorf("key %s, want %s", rec.Key, want)
		}
		if want := `{"order_id":"` + agg + `","customer_id":"c-1","status":"PENDING","amount_cents":1,"currency":"EUR","items":[{"sku":"sku-1","quantity":1,"unit_price_cents":1}],"created_at":1700000000000}`; string(rec.Value) != want {
			t.Errorf("value %s\nwant %s", rec.Value, want)
		}
		if _, ok := header(rec.Headers, "event_type"); ok {
			t.Error("event_type header written with --builtin-headers id")
		}
		for k, want := range map[string]string{"id": "42", "tenant": "5d9e1d7a-6b1f-4c4e-9a57-1f0e0a3c2b11", "created": "2026-12-01T06:11:25.500000Z", "traceparent": "00-ab"} {
			if got, _ := header(rec.Headers, k); got != want {
				t.Errorf("header %s = %q, want %q", k, got, want)
			}
		}
		for _, h := range rec.Headers {
			if h.Key == "occurred_ms" && h.Value != nil {
				t.Errorf("NULL header column has value %q", h.Value)
			}
		}
	})

	t.Run("timestamp column", func(t *testing.T) {
		for _, tc := range []struct {
			col, text string
			typ       uint32
			want      time.Time
			reason    string
		}{
			{"created_at", "2026-11-30 10:00:00.123+00", oidTimestamptz, time.Date(2026, 11, 30, 10, 0, 0, 123e6, time.UTC), ""},
			{"occurred_ms", "1700000000123", oidInt8, time.UnixMilli(1700000000123), ""},
			{"occurred_ms", "", oidInt8, commit, ""}, // NULL: commit time
			{"created_at", "infinity", oidTimestamptz, time.Time{}, "infinity"},
			{"occurred_ms", "-5", oidInt8, time.Time{}, "before 1970"},
		} {
			cfg := base
			cfg.TimestampColumn = tc.col
			b, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			src := row()
			src.Extra, src.ExtraTypes, src.ExtraTypmods = [][]byte{[]byte(tc.text)}, []uint32{tc.typ}, []int32{-1}
			if tc.text == "" {
				src.Extra[0] = nil
			}
			rec := &publisher.Record{}
			inv, err := b.Build(context.Background(), rec, commit, src)
			if err != nil {
				t.Fatal(err)
			}
			if tc.reason != "" {
				if inv == nil || inv.Kind != ReasonTimestamp || !strings.Contains(inv.Reason, tc.reason) || rec.Topic != "dlq" || !rec.Time.Equal(commit) {
					t.Errorf("%s=%q: invalid %+v topic %q time %v", tc.col, tc.text, inv, rec.Topic, rec.Time)
				}
				continue
			}
			if inv != nil || !rec.Time.Equal(tc.want) {
				t.Errorf("%s=%q: time %v, want %v (invalid %v)", tc.col, tc.text, rec.Time, tc.want, inv)
			}
		}
	})

	t.Run("tombstone", func(t *testing.T) {
		src := row()
		src.Payload, src.PayloadNull = nil, true
		b, _ := New(base)
		rec := &publisher.Record{}
		inv, err := b.Build(context.Background(), rec, commit, src)
		if err != nil || inv == nil || inv.Kind != ReasonNull || rec.Topic != "dlq" {
			t.Fatalf("NULL payload without --tombstone-on-null-payload: invalid %v, err %v, topic %q", inv, err, rec.Topic)
		}
		cfg := base
		cfg.Tombstones = true
		b, _ = New(cfg)
		rec = &publisher.Record{}
		if inv, err := b.Build(context.Background(), rec, commit, src); inv != nil || err != nil {
			t.Fatal(inv, err)
		}
		if rec.Value != nil || string(rec.Key) != agg || rec.Topic != "outbox.event.Order" {
			t.Errorf("tombstone: value %q key %q topic %q", rec.Value, rec.Key, rec.Topic)
		}
	})

	t.Run("json value that is not an object", func(t *testing.T) {
		cfg := base
		cfg.ValueFormat = ValueJSON
		b, _ := New(cfg)
		src := row()
		src.Payload = []byte(`[1, 2]`)
		rec := &publisher.Record{}
		inv, err := b.Build(context.Background(), rec, commit, src)
		if err != nil || inv == nil || inv.Kind != ReasonPayload || rec.Topic != "dlq" || string(rec.Value) != `[1, 2]` {
			t.Fatalf("invalid %+v err %v topic %q value %q", inv, err, rec.Topic, rec.Value)
		}
	})

	t.Run("avro key registered once per topic", func(t *testing.T) {
		cfg := base
		cfg.KeyFormat = KeyAvro
		b, _ := New(cfg)
		before := calls.Load()
		for range 3 {
			rec := &publisher.Record{}
			if inv, err := b.Build(context.Background(), rec, commit, row()); inv != nil || err != nil {
				t.Fatal(inv, err)
			}
			if want := "\x00\x00\x00\x00\x07\x48" + agg; string(rec.Key) != want {
				t.Fatalf("key %q, want %q", rec.Key, want)
			}
		}
		// One key registration (the value subject was registered above).
		if n := calls.Load() - before; n != 1 {
			t.Errorf("%d registry calls, want 1", n)
		}
	})
}

func TestNewChecksColumns(t *testing.T) {
	base := Config{Router: testRouter(t), ValueFormat: ValueJSON, Builtin: router.AllBuiltin, Tables: []Table{{Name: "public.outbox", AggregateID: "aggregate_id", Columns: outboxTable}}, MaxRecordBytes: 1 << 20, DLQTopic: "dlq"}
	tests := []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"missing header column", func(c *Config) { c.HeaderColumns = []HeaderColumn{{"nope", "nope"}} }, `--header-columns: column "nope" does not exist in the outbox table public.outbox`},
		{"header column type", func(c *Config) { c.HeaderColumns = []HeaderColumn{{"span", "span"}} }, `--header-columns: column "span" of public.outbox is of type interval`},
		{"missing timestamp column", func(c *Config) { c.TimestampColumn = "nope" }, `--timestamp-column: column "nope" does not exist in the outbox table public.outbox`},
		{"timestamp column type", func(c *Config) { c.TimestampColumn = "aggregate_type" }, `--timestamp-column: column "aggregate_type" of public.outbox is of type text: use a column of type timestamptz`},
		{"avro key without registry", func(c *Config) { c.KeyFormat = KeyAvro }, "--schema-registry-url: is required"},
	}
	for _, tt := range tests {
		cfg := base
		tt.mod(&cfg)
		_, err := New(cfg)
		var fe *FlagError
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want a FlagError with %q", tt.name, err, tt.want)
		}
	}
}

// BenchmarkBuild measures one decoded row turned into its Kafka record
// (route, headers, Avro value) in steady state: records come back to the
// free list as Kafka's acknowledgement returns them.
func BenchmarkBuild(b *testing.B) {
	var calls atomic.Int32
	builder, err := New(Config{Router: testRouter(b), Registry: fakeRegistry(b, &calls), Builtin: router.AllBuiltin, MaxRecordBytes: 1 << 20, DLQTopic: "dlq"})
	if err != nil {
		b.Fatal(err)
	}
	agg := "7c4f7d6e-2f55-4c4e-9f4e-0d9b8a3c1e21"
	row := decoder.Row{ID: []byte("123456789"), AggregateType: []byte("Order"), AggregateID: []byte(agg),
		EventType: []byte("OrderCreated"), Payload: []byte(orderCreated(agg, 1)), Headers: []byte(`{}`)}
	benchBuild(b, builder, &row)
}

// benchBuild builds row's record b.N times, each in a record from the free
// list, released at once.
func benchBuild(b *testing.B, builder *Builder, row *decoder.Row) {
	ctx := context.Background()
	now := time.Now()
	b.SetBytes(int64(len(row.Payload)))
	b.ReportAllocs()
	for b.Loop() {
		rec := publisher.NewRecord()
		if inv, err := builder.Build(ctx, rec, now, row); inv != nil || err != nil {
			b.Fatal(inv, err)
		}
		publisher.Release(rec)
	}
}

// The builder remembers the last row's topic; rows whose types change, in a
// row buffer the decoder reuses, must still get their own.
func TestBuildTopicFollowsEachRow(t *testing.T) {
	rt, err := router.New("t.{aggregate_type}.{event_type}")
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Config{Router: rt, Builtin: router.AllBuiltin, KeyFormat: KeyJSON, ValueFormat: ValueJSON,
		Tables: []Table{{Name: "public.outbox", AggregateID: "aggregate_id", Columns: outboxTable}}, MaxRecordBytes: 1 << 20, DLQTopic: "dlq"})
	if err != nil {
		t.Fatal(err)
	}
	agg, ev := make([]byte, 0, 16), make([]byte, 0, 16)
	for _, c := range []struct{ agg, ev, topic string }{
		{"Order", "Created", "t.Order.Created"},
		{"Order", "Created", "t.Order.Created"},
		{"Order", "Shipped", "t.Order.Shipped"},
		{"Orders", "hipped", "t.Orders.hipped"},
		{"Customer", "Created", "t.Customer.Created"},
		{"Order", "Created", "t.Order.Created"},
		{"", "Created", "dlq"}, // an empty aggregate_type is invalid
		{"Order", "Created", "t.Order.Created"},
	} {
		agg, ev = append(agg[:0], c.agg...), append(ev[:0], c.ev...)
		src := &decoder.Row{ID: []byte("1"), AggregateType: agg, AggregateID: []byte("a-1"), EventType: ev, Payload: []byte(`{"n": 1}`), Headers: []byte(`{}`)}
		rec := &publisher.Record{}
		if _, err := b.Build(context.Background(), rec, time.Now(), src); err != nil {
			t.Fatal(err)
		}
		if rec.Topic != c.topic {
			t.Errorf("aggregate_type %q, event_type %q: topic %q, want %q", c.agg, c.ev, rec.Topic, c.topic)
		}
	}
}
