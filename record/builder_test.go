package record

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/decoder"
	"github.com/cdc-relay/cdc-relay/internal/registrytest"
	"github.com/cdc-relay/cdc-relay/publisher"
	"github.com/cdc-relay/cdc-relay/router"
	"github.com/cdc-relay/cdc-relay/schemaregistry"
)

func orderCreated(orderID string, n int) string {
	return fmt.Sprintf(`{"order_id": %q, "customer_id": "c-%d", "status": "PENDING", "amount_cents": %d, "currency": "EUR",
		"items": [{"sku": "sku-%d", "quantity": 1, "unit_price_cents": %d}], "created_at": 1700000000000}`, orderID, n, n, n, n)
}

// TestDeadLetterFits: a dead-letter record never exceeds --max-record-bytes
// (the broker would refuse it and the relay could not get past the event):
// the largest parts of the row are dropped first, and the error says which.
func TestDeadLetterFits(t *testing.T) {
	const max = 2000
	b := &Builder{cfg: Config{DLQTopic: "dlq", MaxRecordBytes: max}}
	big := func(n int) []byte { return bytes.Repeat([]byte("x"), n) }
	tests := []struct {
		name                 string
		payload, headers     []byte
		key, aggType         []byte
		wantOmitted          string // "" when nothing is
		wantPayload, wantKey bool
		wantRowHeader        bool
	}{
		{"fits", []byte(`{"a": 1}`), []byte(`{"h": "v"}`), []byte("k"), []byte("Order"), "", true, true, true},
		{"payload too large", big(3000), []byte(`{"h": "v"}`), []byte("k"), []byte("Order"),
			"; the 3000-byte payload is omitted because it does not fit in a record", false, true, true},
		{"headers too large", []byte(`{"a": 1}`), []byte(`{"h": "` + string(big(3000)) + `"}`), []byte("k"), []byte("Order"),
			"; the 3009-byte headers column is omitted because it does not fit in a record", true, true, false},
		{"key too large", []byte(`{"a": 1}`), []byte(`{"h": "v"}`), big(3000), []byte("Order"),
			"; the 3000-byte key is omitted because it does not fit in a record", true, false, true},
		{"everything too large", big(1500), []byte(`{"h": "` + string(big(1400)) + `"}`), big(1300), big(5000),
			"; the 1500-byte payload, the 1409-byte headers column, the 1300-byte key and the end of the id, event_type and aggregate_type headers are omitted because they do not fit in a record",
			false, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := row{id: []byte("42"), eventType: []byte("OrderCreated"), aggType: tc.aggType, aggID: tc.key, headersJSON: tc.headers,
				src: &decoder.Row{Payload: tc.payload}}
			rec := &publisher.Record{}
			b.deadLetter(rec, r, "the reason", ReasonPayload)
			if n := publisher.Size(rec.Key, rec.Value, rec.Headers); n > max {
				t.Fatalf("dead letter is %d bytes, more than %d", n, max)
			}
			last := rec.Headers[len(rec.Headers)-1]
			if last.Key != HeaderError || string(last.Value) != "the reason"+tc.wantOmitted {
				t.Fatalf("last header %s=%q, want error=%q", last.Key, last.Value, "the reason"+tc.wantOmitted)
			}
			if kind := rec.Headers[len(rec.Headers)-2]; kind.Key != HeaderErrorKind || string(kind.Value) != ReasonPayload {
				t.Fatalf("header before error %s=%q, want error_kind=%s", kind.Key, kind.Value, ReasonPayload)
			}
			if got := rec.Value != nil; got != tc.wantPayload {
				t.Errorf("payload kept = %v, want %v", got, tc.wantPayload)
			}
			if got := rec.Key != nil; got != tc.wantKey {
				t.Errorf("key kept = %v, want %v", got, tc.wantKey)
			}
			if got := len(rec.Headers) == 7; got != tc.wantRowHeader {
				t.Errorf("row header kept = %v, want %v (headers %d)", got, tc.wantRowHeader, len(rec.Headers))
			}
			// What redrive needs comes before error_kind; a letter that
			// lost part of its row says so there, and keeps no copy of
			// the headers column.
			lr := rec.Headers[len(rec.Headers)-3]
			if wantOmitted := tc.wantOmitted != ""; lr.Key != HeaderRow || strings.Contains(string(lr.Value), `"omitted":true`) != wantOmitted ||
				(wantOmitted && strings.Contains(string(lr.Value), `"headers"`)) {
				t.Errorf("header before error_kind %s=%s, want %s with omitted=%v", lr.Key, lr.Value, HeaderRow, wantOmitted)
			}
			if rec.Topic != "dlq" || rec.Headers[0].Key != "id" || string(rec.Headers[0].Value) != "42" {
				t.Errorf("topic %q, first header %s=%q", rec.Topic, rec.Headers[0].Key, rec.Headers[0].Value)
			}
		})
	}
}

func TestClip(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"abcdefghijkl", 10, "abcdefg…"},
		{"ééééé", 8, "éé…"}, // never cuts inside a rune
	} {
		if got := clip(tc.in, tc.n); got != tc.want || len(got) > tc.n {
			t.Errorf("clip(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

// TestRegistryRefusalHalts: a registry that refuses a registration at
// runtime (a 4xx such as 422 or 401) halts the relay with the reason instead
// of reconnecting forever; a registry that is down (5xx) is retried (an
// ordinary error: the stream reconnects and tries again).
func TestRegistryRefusalHalts(t *testing.T) {
	for _, tc := range []struct {
		status    int
		wantFatal bool
	}{{422, true}, {401, true}, {503, false}} {
		t.Run(strconv.Itoa(tc.status), func(t *testing.T) {
			url := registrytest.Refusing(t, tc.status)
			schemas, err := schemaregistry.LoadDir("../testdata/schemas")
			if err != nil {
				t.Fatal(err)
			}
			reg, err := schemaregistry.New(schemaregistry.Config{URL: url, Schemas: schemas, Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			rt, _ := router.New(router.DefaultTemplate)
			b, err := New(Config{Router: rt, Registry: reg, Builtin: router.AllBuiltin, MaxRecordBytes: 1000000, DLQTopic: "dlq"})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			agg := "00000000-0000-4000-8000-000000000306"
			src := &decoder.Row{ID: []byte("1"), AggregateType: []byte("Order"), AggregateID: []byte(agg), EventType: []byte("OrderCreated"),
				Payload: []byte(orderCreated(agg, 1))}
			inv, err := b.Build(ctx, &publisher.Record{}, time.Now(), src)
			if inv != nil || err == nil {
				t.Fatalf("invalid %v, err %v; want an error", inv, err)
			}
			if got := IsHalt(err); got != tc.wantFatal {
				t.Fatalf("fatal = %v, want %v: %v", got, tc.wantFatal, err)
			}
			if tc.wantFatal && (!strings.Contains(err.Error(), "refused by the test") || !strings.Contains(err.Error(), `event_type "OrderCreated"`)) {
				t.Fatalf("error does not say what was refused and why: %v", err)
			}
		})
	}
}
