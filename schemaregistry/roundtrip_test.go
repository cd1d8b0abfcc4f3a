package schemaregistry

import (
	"encoding/json"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

func loadSchema(t testing.TB, path string) *Schema {
	t.Helper()
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseSchema("AllTypes", path, text)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRoundTripAllTypes encodes a payload with every type and decodes it
// with goavro from the schema text.
func TestRoundTripAllTypes(t *testing.T) {
	s := loadSchema(t, "testdata/alltypes.avsc")
	payload, err := os.ReadFile("testdata/payloads/full.json")
	if err != nil {
		t.Fatal(err)
	}
	body, err := s.AppendBody(nil, payload)
	if err != nil {
		t.Fatal(err)
	}
	got := decode(t, s.Text, body).(map[string]any)
	point := func(x, y int32) map[string]any { return map[string]any{"x": x, "y": y} }
	want := map[string]any{
		"n":      nil,
		"b":      true,
		"i":      int32(-7),
		"l":      int64(math.MaxInt64),
		"f":      float32(1.25),
		"d":      -2.5e-3,
		"s":      "😀 café",
		"by":     []byte("raw"),
		"e":      "BLUE",
		"a":      []any{int64(1), int64(-1), int64(0)},
		"m":      map[string]any{"k": "v", "ключ": "значение"},
		"fx":     []byte("abcd"),
		"opt":    map[string]any{"string": "here"},
		"u":      map[string]any{"test.types.Point": point(1, 2)},
		"ts":     time.Date(2024, 5, 1, 12, 30, 15, 250e6, time.UTC),
		"tsu":    time.Date(2024, 5, 1, 12, 30, 15, 250001e3, time.UTC),
		"dt":     time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC),
		"tm":     13*time.Hour + 45*time.Minute + 10500*time.Millisecond,
		"id":     "1b4e28ba-2fa1-11d2-883f-0016cb4a5b81",
		"dec":    big.NewRat(-123456, 100),
		"decf":   big.NewRat(25, 2),
		"nested": map[string]any{"p": point(3, 4), "tags": []any{"a", "b"}},
		"points": []any{point(1, 1), point(2, 2)},
	}
	if len(got) != len(want) {
		t.Errorf("got %d fields, want %d", len(got), len(want))
	}
	for k, w := range want {
		if !equalNative(got[k], w) {
			t.Errorf("%s: got %#v, want %#v", k, got[k], w)
		}
	}
}

// TestRoundTripPayloads checks every seed payload: what encodes must decode
// with goavro, what is invalid must say so.
func TestRoundTripPayloads(t *testing.T) {
	s := loadSchema(t, "testdata/alltypes.avsc")
	files, err := filepath.Glob("testdata/payloads/*.json")
	if err != nil || len(files) == 0 {
		t.Fatal(files, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			payload, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			body, err := s.AppendBody(nil, payload)
			if filepath.Base(f) == "bad_type.json" {
				if err == nil || err.Error() != `payload of AllTypes: field "i": expected int, got string "1"` {
					t.Fatalf("got %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := decode(t, s.Text, body).(map[string]any)
			// Cross-check the scalar fields against encoding/json's view.
			var in map[string]any
			if err := json.Unmarshal(payload, &in); err != nil {
				t.Fatal(err)
			}
			if got["s"] != in["s"] || got["e"] != in["e"] || !reflect.DeepEqual(got["m"], in["m"]) {
				t.Fatalf("got s=%q e=%v m=%v; payload has s=%q e=%v m=%v", got["s"], got["e"], got["m"], in["s"], in["e"], in["m"])
			}
		})
	}
}

// TestRoundTripDemoSchemas encodes realistic payloads for the demo schemas.
func TestRoundTripDemoSchemas(t *testing.T) {
	schemas, err := LoadDir(demoDir)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		eventType string
		payload   string
		check     map[string]any
	}{
		{"OrderCreated", orderCreatedPayload, map[string]any{
			"customer_id": "cust-42 Ünïcødé 🛒", "status": "CONFIRMED", "amount_cents": int64(259900), "currency": "EUR",
			"coupon_code": nil, "created_at": time.Date(2024, 5, 1, 12, 30, 15, 123e6, time.UTC),
		}},
		{"OrderCancelled", `{"order_id":"1b4e28ba-2fa1-11d2-883f-0016cb4a5b81","customer_id":"c1","reason":"PAYMENT_FAILED","amount_cents":1999,"comment":"card declined","cancelled_at":1714566615250}`, map[string]any{
			"reason": "PAYMENT_FAILED", "amount_cents": int64(1999), "currency": "EUR",
			"comment": map[string]any{"string": "card declined"}, "cancelled_at": time.UnixMilli(1714566615250).UTC(),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.eventType, func(t *testing.T) {
			s := schemas[tt.eventType]
			body, err := s.AppendBody(nil, []byte(tt.payload))
			if err != nil {
				t.Fatal(err)
			}
			got := decode(t, s.Text, body).(map[string]any)
			for k, w := range tt.check {
				if !equalNative(got[k], w) {
					t.Errorf("%s: got %#v, want %#v", k, got[k], w)
				}
			}
		})
	}
}

// orderCreatedPayload is a ~300-byte outbox payload as PostgreSQL's jsonb
// prints it (keys ordered by length).
const orderCreatedPayload = `{"items": [{"sku": "SKU-1001", "quantity": 2, "unit_price_cents": 99950}, {"sku": "SKU-2002", "quantity": 1, "unit_price_cents": 60000}], "status": "CONFIRMED", "currency": "EUR", "order_id": "1b4e28ba-2fa1-11d2-883f-0016cb4a5b81", "created_at": "2024-05-01T12:30:15.123Z", "coupon_code": null, "customer_id": "cust-42 Ünïcødé 🛒", "amount_cents": 259900}`
