package publisher_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/cdc-relay/cdc-relay/catalog"
	"github.com/cdc-relay/cdc-relay/decoder"
	"github.com/cdc-relay/cdc-relay/publisher"
	"github.com/cdc-relay/cdc-relay/record"
	"github.com/cdc-relay/cdc-relay/router"
	"github.com/cdc-relay/cdc-relay/schemaregistry"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/*.json from the record step as it is now")

// goldenDir holds one capture per case: what the record step and the
// session hand to kgo, byte for byte.
const goldenDir = "../testdata/golden"

// golden is one captured record. Bytes are hex; a nil key, value or
// header value is null, an empty one "".
type golden struct {
	Invalid   string         `json:"invalid,omitempty"` // the dead letter's kind
	Topic     string         `json:"topic"`
	Key       *string        `json:"key"`
	Value     *string        `json:"value"`
	Timestamp string         `json:"timestamp"`
	Headers   []goldenHeader `json:"headers"`
	// Partitions is the partition the relay's partitioner picks for the
	// record among n, by n.
	Partitions map[string]int `json:"partitions"`
}

type goldenHeader struct {
	Key   string  `json:"key"`
	Value *string `json:"value"`
}

func hexOf(b []byte) *string {
	if b == nil {
		return nil
	}
	s := hex.EncodeToString(b)
	return &s
}

// goldenRegistry is a schema registry that gives every schema id 7.
func goldenRegistry(t *testing.T) *schemaregistry.Registry {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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

// Type oids of the golden outbox table's columns.
const (
	oidInt8        = 20
	oidText        = 25
	oidTimestamptz = 1184
	oidUUID        = 2950
	oidJSONB       = 3802
)

var goldenTable = record.Table{Name: "public.outbox", OID: 16400, AggregateID: "aggregate_id", Columns: map[string]catalog.Column{
	"id":             {TypeOID: oidInt8, BaseOID: oidInt8, Type: "bigint", NotNull: true},
	"aggregate_type": {TypeOID: oidText, BaseOID: oidText, Type: "text", NotNull: true},
	"aggregate_id":   {TypeOID: oidText, BaseOID: oidText, Type: "text", NotNull: true},
	"event_type":     {TypeOID: oidText, BaseOID: oidText, Type: "text", NotNull: true},
	"payload":        {TypeOID: oidJSONB, BaseOID: oidJSONB, Type: "jsonb"},
	"headers":        {TypeOID: oidJSONB, BaseOID: oidJSONB, Type: "jsonb", NotNull: true},
	"created_at":     {TypeOID: oidTimestamptz, BaseOID: oidTimestamptz, Type: "timestamp with time zone", NotNull: true},
	"tenant":         {TypeOID: 90001, BaseOID: oidUUID, Type: "tenant_id"}, // a domain over uuid
	"occurred_ms":    {TypeOID: oidInt8, BaseOID: oidInt8, Type: "bigint"},
}}

const goldenAgg = "00000000-0000-4000-8000-000000000001"

// goldenRow is an OrderCreated row whose headers jsonb holds a string, a
// number, an object and a null.
func goldenRow() *decoder.Row {
	return &decoder.Row{ID: []byte("42"), AggregateType: []byte("Order"), AggregateID: []byte(goldenAgg), EventType: []byte("OrderCreated"),
		Payload: []byte(`{"order_id": "` + goldenAgg + `", "customer_id": "c-1", "status": "PENDING", "amount_cents": 1250, "currency": "EUR",
			"items": [{"sku": "sku-1", "quantity": 2, "unit_price_cents": 625}], "created_at": 1700000000000}`),
		Headers: []byte(`{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "tenant": "t1", "n": 42, "o": {"a": [1]}, "z": null}`)}
}

// TestGoldenRecords: the records the relay hands to kgo, in every key and
// value format, with CloudEvents (binary and structured), header and timestamp columns, as a
// tombstone, and as dead letters (invalid, too large, refused by the
// broker, of an unconfigured table), are byte for byte the captures in
// testdata/golden: topic, key, value, timestamp, headers in order, and the
// partition of the key. Run with -update to capture them again.
func TestGoldenRecords(t *testing.T) {
	reg := goldenRegistry(t)
	rt, err := router.New(router.DefaultTemplate)
	if err != nil {
		t.Fatal(err)
	}
	commit := time.Date(2026, 12, 1, 6, 11, 25, 987654000, time.UTC)
	base := record.Config{Router: rt, Registry: reg, Builtin: router.AllBuiltin, Tables: []record.Table{goldenTable}, MaxRecordBytes: 1 << 20, DLQTopic: "dlq"}
	type buildCase struct {
		name string
		cfg  func(*record.Config)
		row  func(*decoder.Row)
	}
	cases := []buildCase{}
	for _, vf := range []record.ValueFormat{record.ValueAvro, record.ValueJSON} {
		for _, kf := range []record.KeyFormat{record.KeyString, record.KeyJSON, record.KeyJSONSchema, record.KeyAvro} {
			cases = append(cases, buildCase{name: "value-" + vf.String() + "-key-" + kf.String(), cfg: func(c *record.Config) { c.ValueFormat, c.KeyFormat = vf, kf }})
		}
		cases = append(cases, buildCase{name: "cloudevents-" + vf.String(), cfg: func(c *record.Config) {
			c.ValueFormat, c.CloudEvents, c.CloudEventsSource = vf, true, "/cdc-relay/orders"
		}})
		cases = append(cases, buildCase{name: "cloudevents-structured-" + vf.String(), cfg: func(c *record.Config) {
			c.ValueFormat, c.CloudEvents, c.CloudEventsSource, c.CloudEventsMode = vf, true, "/cdc-relay/orders", record.CloudEventsStructured
		}})
	}
	debeziumColumns := func(c *record.Config) {
		c.Builtin, c.KeyFormat, c.ValueFormat = router.BuiltinID, record.KeyJSON, record.ValueJSON
		c.HeaderColumns = []record.HeaderColumn{{Column: "tenant", Header: "tenant_id"}, {Column: "created_at", Header: "created"}, {Column: "occurred_ms", Header: "occurred_ms"}}
		c.TimestampColumn = "created_at"
	}
	withColumns := func(r *decoder.Row) {
		r.Extra = [][]byte{[]byte("5d9e1d7a-6b1f-4c4e-9a57-1f0e0a3c2b11"), []byte("2026-12-01 06:11:25.5+00"), nil}
		r.ExtraTypes = []uint32{90001, oidTimestamptz, oidInt8}
		r.ExtraTypmods = []int32{-1, -1, -1}
	}
	cases = append(cases,
		buildCase{name: "header-and-timestamp-columns", cfg: debeziumColumns, row: withColumns},
		buildCase{name: "no-headers", cfg: func(c *record.Config) { c.Builtin = 0 }, row: func(r *decoder.Row) { r.Headers = []byte(`{}`) }},
		buildCase{name: "tombstone", cfg: func(c *record.Config) { c.Tombstones = true }, row: func(r *decoder.Row) { r.Payload, r.PayloadNull = nil, true }},
		buildCase{name: "dead-letter-schema", row: func(r *decoder.Row) { r.Payload = []byte(`{"order_id": 7}`) }},
		buildCase{name: "dead-letter-json-payload", cfg: func(c *record.Config) { c.ValueFormat = record.ValueJSON }, row: func(r *decoder.Row) { r.Payload = []byte(`[1, 2]`) }},
		buildCase{name: "dead-letter-too-large", cfg: func(c *record.Config) { c.MaxRecordBytes = 700 }, row: func(r *decoder.Row) {
			r.Payload = []byte(`{"order_id": "` + strings.Repeat("x", 900) + `"}`)
		}},
		buildCase{name: "unconfigured-table", row: func(r *decoder.Row) {
			*r = decoder.Row{RelationID: 16500, Other: &decoder.OtherRow{Table: "public.orders", Columns: []string{"id", "note", "body", "gone"},
				Values: [][]byte{[]byte("7"), []byte(`say "hi" <é>`), []byte(`{"a": 1}`), nil}}}
		}},
		buildCase{name: "unconfigured-table-too-large", cfg: func(c *record.Config) { c.MaxRecordBytes = 800 }, row: func(r *decoder.Row) {
			*r = decoder.Row{RelationID: 16500, Other: &decoder.OtherRow{Table: "public.orders", Columns: []string{"id", "note", "body"},
				Values: [][]byte{[]byte("7"), []byte(strings.Repeat("n", 400)), []byte(`{"a": 1}`)}}}
		}},
	)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			b, err := record.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			src := goldenRow()
			if tc.row != nil {
				tc.row(src)
			}
			rec := publisher.NewRecord()
			inv, err := b.Build(context.Background(), rec, commit, src)
			if err != nil {
				t.Fatal(err)
			}
			kind := ""
			if inv != nil {
				kind = inv.Kind
			}
			checkGolden(t, tc.name, kind, rec)
		})
	}

	// A record the broker refused as too large becomes a dead letter
	// without its value (record.Rejected).
	t.Run("rejected-too-large", func(t *testing.T) {
		b, err := record.New(base)
		if err != nil {
			t.Fatal(err)
		}
		rec := publisher.NewRecord()
		if inv, err := b.Build(context.Background(), rec, commit, goldenRow()); inv != nil || err != nil {
			t.Fatal(inv, err)
		}
		dl, inv := record.Rejected("dlq", rec, kerr.MessageTooLarge)
		checkGolden(t, "rejected-too-large", inv.Kind, dl)
	})
}

// checkGolden compares rec, as kgo would get it, with the capture
// testdata/golden/<name>.json, or writes it there under -update.
func checkGolden(t *testing.T, name, kind string, rec *publisher.Record) {
	t.Helper()
	kr := publisher.KgoRecord(rec)
	g := golden{Invalid: kind, Topic: kr.Topic, Key: hexOf(kr.Key), Value: hexOf(kr.Value),
		Timestamp: kr.Timestamp.UTC().Format(time.RFC3339Nano), Headers: []goldenHeader{}, Partitions: map[string]int{}}
	for _, h := range kr.Headers {
		g.Headers = append(g.Headers, goldenHeader{Key: h.Key, Value: hexOf(h.Value)})
	}
	for _, n := range []int{1, 3, 6, 12, 64} {
		g.Partitions[strconv.Itoa(n)] = publisher.PartitionOf(kr, n)
	}
	got, err := json.MarshalIndent(g, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join(goldenDir, name+".json")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (capture it with go test -run TestGoldenRecords -update ./publisher/)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the record built now:\n got %s\nwant %s", path, got, want)
	}
}
