package record

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/decoder"
	"github.com/cdc-relay/cdc-relay/publisher"
	"github.com/cdc-relay/cdc-relay/router"
)

// ceBase is a builder configuration with --cloudevents and a traceparent
// in every row's headers.
func ceBase(t testing.TB, vf ValueFormat, mode CloudEventsMode) Config {
	t.Helper()
	var calls atomic.Int32
	return Config{Router: testRouter(t), Registry: fakeRegistry(t, &calls), Builtin: router.AllBuiltin, ValueFormat: vf,
		CloudEvents: true, CloudEventsSource: "/shop/orders", CloudEventsMode: mode, MaxRecordBytes: 1 << 20, DLQTopic: "dlq"}
}

const ceAgg = "7c4f7d6e-2f55-4c4e-9f4e-0d9b8a3c1e21"

func ceRow() *decoder.Row {
	return &decoder.Row{ID: []byte("123456789"), AggregateType: []byte("Order"), AggregateID: []byte(ceAgg), EventType: []byte("OrderCreated"),
		Payload: []byte(orderCreated(ceAgg, 1)), Headers: []byte(`{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}`)}
}

func buildWith(t *testing.T, cfg Config, src *decoder.Row, commit time.Time) (*publisher.Record, *Invalid) {
	t.Helper()
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rec := &publisher.Record{}
	inv, err := b.Build(context.Background(), rec, commit, src)
	if err != nil {
		t.Fatal(err)
	}
	return rec, inv
}

func headerKeys(hs []publisher.Header) string {
	var keys []string
	for _, h := range hs {
		keys = append(keys, h.Key)
	}
	return strings.Join(keys, ",")
}

// TestStructuredMode: with --cloudevents-mode structured the value is the
// JSON envelope of every attribute around the value binary mode writes
// (as data for JSON, as data_base64 for Avro), the content-type header
// names the envelope, no ce_* header is written and the others stay.
func TestStructuredMode(t *testing.T) {
	commit := time.Date(2026, 12, 1, 6, 11, 25, 987654000, time.FixedZone("CET", 3600))
	for _, tc := range []struct {
		vf          ValueFormat
		contentType string
	}{{ValueJSON, "application/json"}, {ValueAvro, "application/avro"}} {
		t.Run(tc.vf.String(), func(t *testing.T) {
			binary, inv := buildWith(t, ceBase(t, tc.vf, CloudEventsBinary), ceRow(), commit)
			if inv != nil {
				t.Fatal(inv)
			}
			rec, inv := buildWith(t, ceBase(t, tc.vf, CloudEventsStructured), ceRow(), commit)
			if inv != nil {
				t.Fatal(inv)
			}
			if got, want := headerKeys(rec.Headers), "id,event_type,aggregate_type,content-type,traceparent"; got != want {
				t.Errorf("headers %s, want %s", got, want)
			}
			if ct, _ := header(rec.Headers, HeaderContentType); ct != "application/cloudevents+json" {
				t.Errorf("content-type %q", ct)
			}
			if rec.Topic != binary.Topic || !bytes.Equal(rec.Key, binary.Key) || !rec.Time.Equal(binary.Time) {
				t.Errorf("topic %q key %q time %v, want binary mode's %q %q %v", rec.Topic, rec.Key, rec.Time, binary.Topic, binary.Key, binary.Time)
			}
			var env map[string]json.RawMessage
			dec := json.NewDecoder(bytes.NewReader(rec.Value))
			dec.UseNumber()
			if err := dec.Decode(&env); err != nil {
				t.Fatalf("value is not a JSON object: %v\n%s", err, rec.Value)
			}
			want := map[string]string{"specversion": "1.0", "id": "123456789", "source": "/shop/orders", "type": "OrderCreated",
				"subject": ceAgg, "time": "2026-12-01T05:11:25.987Z", "datacontenttype": tc.contentType}
			for k, v := range want {
				var got string
				if err := json.Unmarshal(env[k], &got); err != nil || got != v {
					t.Errorf("%s = %s, want %q", k, env[k], v)
				}
			}
			if n := len(want) + 1; len(env) != n {
				t.Errorf("%d members, want %d: %s", len(env), n, rec.Value)
			}
			switch tc.vf {
			case ValueJSON:
				if !bytes.Equal(env["data"], binary.Value) {
					t.Errorf("data %s, want binary mode's value %s", env["data"], binary.Value)
				}
				if !bytes.HasPrefix(rec.Value, []byte(`{"specversion":"1.0","id":"123456789","source":"/shop/orders"`)) {
					t.Errorf("envelope does not start with specversion, id and source: %s", rec.Value)
				}
			case ValueAvro:
				var b64 string
				if err := json.Unmarshal(env["data_base64"], &b64); err != nil {
					t.Fatalf("data_base64 %s: %v", env["data_base64"], err)
				}
				data, err := base64.StdEncoding.DecodeString(b64)
				if err != nil || !bytes.Equal(data, binary.Value) || data[0] != 0 {
					t.Errorf("data_base64 is % x (%v), want binary mode's value, Confluent wire format % x", data, err, binary.Value)
				}
			}
		})
	}
}

// TestStructuredEscapes: attributes with quotes, backslashes, control
// characters and non-ASCII text still give a valid envelope that reads
// back as the row's text.
func TestStructuredEscapes(t *testing.T) {
	src := ceRow()
	src.ID, src.AggregateID, src.EventType = []byte("id \"1\"\\"), []byte("agg\n\t\x01é🚀"), []byte("Order<Created>")
	cfg := ceBase(t, ValueJSON, CloudEventsStructured)
	cfg.CloudEventsSource = "https://shop.example/orders?a=1&b=\"2\""
	rec, inv := buildWith(t, cfg, src, time.Now())
	if inv != nil {
		t.Fatal(inv)
	}
	var env struct{ ID, Subject, Type, Source string }
	if err := json.Unmarshal(rec.Value, &env); err != nil {
		t.Fatalf("%v\n%s", err, rec.Value)
	}
	if env.ID != string(src.ID) || env.Subject != string(src.AggregateID) || env.Type != string(src.EventType) || env.Source != cfg.CloudEventsSource {
		t.Errorf("read back %+v", env)
	}
}

// TestStructuredTombstone: a tombstone keeps its null value (compaction
// needs it), so it carries binary mode's headers instead of an envelope.
func TestStructuredTombstone(t *testing.T) {
	src := ceRow()
	src.Payload, src.PayloadNull = nil, true
	for _, vf := range []ValueFormat{ValueJSON, ValueAvro} {
		cfg := ceBase(t, vf, CloudEventsStructured)
		cfg.Tombstones = true
		rec, inv := buildWith(t, cfg, src, time.Now())
		if inv != nil || rec.Value != nil {
			t.Fatalf("%s: invalid %v, value %q", vf, inv, rec.Value)
		}
		if got, want := headerKeys(rec.Headers), "id,event_type,aggregate_type,ce_specversion,ce_id,ce_source,ce_type,ce_subject,ce_time,content-type,traceparent"; got != want {
			t.Errorf("%s: headers %s, want %s", vf, got, want)
		}
	}
}

// TestStructuredReservedHeaders: the headers column may not set a
// CloudEvents header in structured mode either.
func TestStructuredReservedHeaders(t *testing.T) {
	for _, name := range []string{"ce_id", "content-type"} {
		src := ceRow()
		src.Headers = []byte(`{"` + name + `": "x"}`)
		rec, inv := buildWith(t, ceBase(t, ValueJSON, CloudEventsStructured), src, time.Now())
		if inv == nil || inv.Kind != ReasonHeaders || !strings.Contains(inv.Reason, "--cloudevents-mode structured") || rec.Topic != "dlq" {
			t.Errorf("headers column sets %s: invalid %+v, topic %q", name, inv, rec.Topic)
		}
	}
}

// TestStructuredDeadLetters: the envelope counts toward --max-record-bytes,
// and a dead letter is never wrapped: its value is the raw payload and it
// has no content-type header.
func TestStructuredDeadLetters(t *testing.T) {
	src := ceRow()
	src.Payload = []byte(`{"note":"` + strings.Repeat("n", 1500) + `"}`)
	rec, inv := buildWith(t, ceBase(t, ValueJSON, CloudEventsStructured), src, time.Now())
	if inv != nil {
		t.Fatal(inv)
	}
	cfg := ceBase(t, ValueJSON, CloudEventsStructured)
	cfg.MaxRecordBytes = publisher.Size(rec.Key, rec.Value, rec.Headers) - 1
	rec, inv = buildWith(t, cfg, src, time.Now())
	if inv == nil || inv.Kind != ReasonTooLarge {
		t.Fatalf("envelope one byte over --max-record-bytes: invalid %+v", inv)
	}
	if !bytes.Equal(rec.Value, src.Payload) {
		t.Errorf("dead letter value %q, want the raw payload", rec.Value)
	}
	src = ceRow()
	src.Payload = []byte(`[1, 2]`)
	rec, inv = buildWith(t, ceBase(t, ValueJSON, CloudEventsStructured), src, time.Now())
	if inv == nil || inv.Kind != ReasonPayload || string(rec.Value) != `[1, 2]` {
		t.Fatalf("invalid payload: invalid %+v, value %q", inv, rec.Value)
	}
	for _, h := range rec.Headers {
		if h.Key == HeaderContentType || strings.HasPrefix(h.Key, "ce_") {
			t.Errorf("dead letter has header %s=%q", h.Key, h.Value)
		}
	}
}

// TestStructuredAllocatesNothing: the envelope is written into the
// record's buffer: a reused record costs no allocation per event.
func TestStructuredAllocatesNothing(t *testing.T) {
	for _, vf := range []ValueFormat{ValueJSON, ValueAvro} {
		b, err := New(ceBase(t, vf, CloudEventsStructured))
		if err != nil {
			t.Fatal(err)
		}
		row := ceRow()
		rec := &publisher.Record{}
		build := func() {
			if inv, err := b.Build(context.Background(), rec, time.Now(), row); inv != nil || err != nil {
				t.Fatal(inv, err)
			}
		}
		build() // registers the schema
		if allocs := testing.AllocsPerRun(200, build); allocs != 0 {
			t.Errorf("%s: %v allocations per event, want 0", vf, allocs)
		}
	}
}

func TestParseCloudEventsMode(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want CloudEventsMode
		ok   bool
	}{{"binary", CloudEventsBinary, true}, {"structured", CloudEventsStructured, true}, {"Structured", 0, false}, {"", 0, false}} {
		got, err := ParseCloudEventsMode(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseCloudEventsMode(%q) = %v, %v", tc.in, got, err)
		}
		if tc.ok && got.String() != tc.in {
			t.Errorf("%v.String() = %q, want %q", got, got.String(), tc.in)
		}
	}
	if CloudEventsMode(0) != CloudEventsBinary {
		t.Error("the zero mode is not binary")
	}
}

// TestAMQPBinaryName: the Kafka binding's headers under the AMQP binding.
func TestAMQPBinaryName(t *testing.T) {
	for _, tc := range []struct {
		key, want    string
		property, ok bool
	}{
		{HeaderCESpecVersion, "cloudEvents_specversion", false, true},
		{HeaderCEID, "cloudEvents_id", false, true},
		{HeaderCESource, "cloudEvents_source", false, true},
		{HeaderCEType, "cloudEvents_type", false, true},
		{HeaderCESubject, "cloudEvents_subject", false, true},
		{HeaderCETime, "cloudEvents_time", false, true},
		{HeaderContentType, "content_type", true, true},
		{"ce_traceparent", "cloudEvents_traceparent", false, true},
		{"ce_", "", false, false},
		{"traceparent", "", false, false},
		{"id", "", false, false},
	} {
		name, property, ok := AMQPBinaryName(tc.key)
		if name != tc.want || property != tc.property || ok != tc.ok {
			t.Errorf("AMQPBinaryName(%q) = %q, %v, %v; want %q, %v, %v", tc.key, name, property, ok, tc.want, tc.property, tc.ok)
		}
	}
	if n := testing.AllocsPerRun(100, func() { AMQPBinaryName(HeaderCETime) }); n != 0 {
		t.Errorf("%v allocations mapping ce_time, want 0", n)
	}
}

// BenchmarkBuildCloudEvents is BenchmarkBuild with --cloudevents, for each
// mode and value format: a row with a traceparent header turned into its
// record in steady state.
func BenchmarkBuildCloudEvents(b *testing.B) {
	for _, mode := range []CloudEventsMode{CloudEventsBinary, CloudEventsStructured} {
		for _, vf := range []ValueFormat{ValueAvro, ValueJSON} {
			b.Run(mode.String()+"-"+vf.String(), func(b *testing.B) {
				builder, err := New(ceBase(b, vf, mode))
				if err != nil {
					b.Fatal(err)
				}
				benchBuild(b, builder, ceRow())
			})
		}
	}
}
