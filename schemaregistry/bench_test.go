package schemaregistry

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"
)

// BenchmarkAppend encodes a ~300-byte OrderCreated payload (10 fields, an
// array of records, an enum, a union, a uuid and an RFC 3339 timestamp).
func BenchmarkAppend(b *testing.B) { benchAppend(b, []byte(orderCreatedPayload)) }

// BenchmarkAppend4K is BenchmarkAppend with customer_id padded so that the
// payload is about 4 KB, the large-payload case of the drain benchmark:
// the cost is then scanning and copying one long string.
func BenchmarkAppend4K(b *testing.B) {
	pad := strings.Repeat("x", 4000-len(orderCreatedPayload))
	benchAppend(b, []byte(strings.Replace(orderCreatedPayload, `"cust-42 `, `"cust-42 `+pad, 1)))
}

// benchAppend encodes an OrderCreated payload over and over into one buffer.
func benchAppend(b *testing.B, payload []byte) {
	schemas, err := LoadDir(demoDir)
	if err != nil {
		b.Fatal(err)
	}
	enc := newEncoder(1, schemas["OrderCreated"])
	buf := make([]byte, 0, 2*len(payload))
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = enc.Append(buf[:0], payload); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendParallel is BenchmarkAppend on every P.
func BenchmarkAppendParallel(b *testing.B) {
	schemas, err := LoadDir(demoDir)
	if err != nil {
		b.Fatal(err)
	}
	enc := newEncoder(1, schemas["OrderCreated"])
	payload := []byte(orderCreatedPayload)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]byte, 0, 512)
		for pb.Next() {
			var err error
			if buf, err = enc.Append(buf[:0], payload); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// plainSchema and plainPayload have no logical types or unions, so the
// alternative design — encoding/json into map[string]any, then hamba/avro's
// generic Marshal — can encode them as they are.
const plainSchema = `{"type":"record","name":"Plain","namespace":"bench","fields":[
	{"name":"order_id","type":"string"},{"name":"customer_id","type":"string"},
	{"name":"status","type":{"type":"enum","name":"S","symbols":["PENDING","CONFIRMED"]}},
	{"name":"amount_cents","type":"long"},{"name":"currency","type":"string"},
	{"name":"items","type":{"type":"array","items":{"type":"record","name":"Item","fields":[
		{"name":"sku","type":"string"},{"name":"quantity","type":"int"},{"name":"unit_price_cents","type":"long"}]}}},
	{"name":"coupon_code","type":"string"},{"name":"created_at","type":"long"}]}`

const plainPayload = `{"items": [{"sku": "SKU-1001", "quantity": 2, "unit_price_cents": 99950}, {"sku": "SKU-2002", "quantity": 1, "unit_price_cents": 60000}], "status": "CONFIRMED", "currency": "EUR", "order_id": "1b4e28ba-2fa1-11d2-883f-0016cb4a5b81", "created_at": 1714566615123, "coupon_code": "SPRING", "customer_id": "cust-42", "amount_cents": 259900}`

func BenchmarkAppendPlain(b *testing.B) {
	s, err := ParseSchema("Plain", "", []byte(plainSchema))
	if err != nil {
		b.Fatal(err)
	}
	payload := []byte(plainPayload)
	buf := make([]byte, 0, 512)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		if buf, err = s.AppendBody(buf[:0], payload); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHambaGenericPlain is the alternative design on the same input,
// for comparison: encoding/json (with UseNumber, so longs stay exact), a
// walk that gives each number its Avro Go type, then hamba/avro's generic
// Marshal.
func BenchmarkHambaGenericPlain(b *testing.B) {
	s, err := ParseSchema("Plain", "", []byte(plainSchema))
	if err != nil {
		b.Fatal(err)
	}
	payload := []byte(plainPayload)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		v, err := hambaNative(s.Avro, payload)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := avro.Marshal(s.Avro, v); err != nil {
			b.Fatal(err)
		}
	}
}

func TestHambaGenericAgrees(t *testing.T) {
	s, err := ParseSchema("Plain", "", []byte(plainSchema))
	if err != nil {
		t.Fatal(err)
	}
	v, err := hambaNative(s.Avro, []byte(plainPayload))
	if err != nil {
		t.Fatal(err)
	}
	want, err := avro.Marshal(s.Avro, v)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.AppendBody(nil, []byte(plainPayload))
	if err != nil {
		t.Fatal(err)
	}
	// hamba writes array blocks with their byte size (a negative count), so
	// compare what the bytes mean.
	if g, w := decode(t, s.Text, got), decode(t, s.Text, want); !reflect.DeepEqual(g, w) {
		t.Fatalf("got %v\nhamba %v", g, w)
	}
}

// hambaNative decodes payload into the Go values hamba/avro's generic
// Marshal wants for schema (records, arrays, strings, enums, ints, longs).
func hambaNative(schema avro.Schema, payload []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return toNative(schema, v)
}

func toNative(schema avro.Schema, v any) (any, error) {
	switch s := schema.(type) {
	case *avro.RefSchema:
		return toNative(s.Schema(), v)
	case *avro.RecordSchema:
		m, _ := v.(map[string]any)
		for _, f := range s.Fields() {
			x, err := toNative(f.Type(), m[f.Name()])
			if err != nil {
				return nil, err
			}
			m[f.Name()] = x
		}
		return m, nil
	case *avro.ArraySchema:
		a, _ := v.([]any)
		for i := range a {
			x, err := toNative(s.Items(), a[i])
			if err != nil {
				return nil, err
			}
			a[i] = x
		}
		return a, nil
	case *avro.PrimitiveSchema:
		switch s.Type() {
		case avro.Long:
			return v.(json.Number).Int64()
		case avro.Int:
			n, err := v.(json.Number).Int64()
			return int(n), err
		}
	}
	return v, nil
}
