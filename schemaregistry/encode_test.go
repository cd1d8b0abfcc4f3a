package schemaregistry

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/linkedin/goavro/v2"
)

// fieldSchema makes a record "R" with one field "v" of type typ (JSON).
func fieldSchema(t testing.TB, typ string) *Schema {
	t.Helper()
	text := `{"type":"record","name":"R","namespace":"test","fields":[{"name":"v","type":` + typ + `}]}`
	s, err := ParseSchema("T", "", []byte(text))
	if err != nil {
		t.Fatalf("parse %s: %v", text, err)
	}
	return s
}

// decode decodes an Avro body with goavro, an independent implementation,
// from the schema's text.
func decode(t testing.TB, text string, body []byte) any {
	t.Helper()
	codec, err := goavro.NewCodec(text)
	if err != nil {
		t.Fatalf("goavro: %v", err)
	}
	native, rest, err := codec.NativeFromBinary(body)
	if err != nil {
		t.Fatalf("goavro decode %x: %v", body, err)
	}
	if len(rest) != 0 {
		t.Fatalf("goavro decode %x: %d bytes left over", body, len(rest))
	}
	return native
}

func rat(s string) *big.Rat {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		panic(s)
	}
	return r
}

func TestAppendRoundTrip(t *testing.T) {
	const point = `{"type":"record","name":"Point","fields":[{"name":"x","type":"int"},{"name":"y","type":"int"}]}`
	const color = `{"type":"enum","name":"Color","symbols":["RED","GREEN","BLUE"]}`
	ts := time.Date(2024, 5, 1, 12, 30, 15, 250_000_000, time.UTC)
	tests := []struct {
		name  string
		typ   string
		value string // JSON
		want  any    // goavro's native value of field v
	}{
		{"null", `"null"`, `null`, nil},
		{"true", `"boolean"`, `true`, true},
		{"false", `"boolean"`, `false`, false},
		{"int", `"int"`, `-42`, int32(-42)},
		{"int max", `"int"`, `2147483647`, int32(math.MaxInt32)},
		{"int min", `"int"`, `-2147483648`, int32(math.MinInt32)},
		{"int from 1.0", `"int"`, `1.0`, int32(1)},
		{"int from 1.5e1", `"int"`, `1.5e1`, int32(15)},
		{"int from 100e-2", `"int"`, `100e-2`, int32(1)},
		{"int negative zero", `"int"`, `-0.0`, int32(0)},
		{"long", `"long"`, `1234567890123`, int64(1234567890123)},
		{"long max", `"long"`, `9223372036854775807`, int64(math.MaxInt64)},
		{"long min", `"long"`, `-9223372036854775808`, int64(math.MinInt64)},
		{"long max as 9.223372036854775807e18", `"long"`, `9.223372036854775807e18`, int64(math.MaxInt64)},
		{"long 2^53+1", `"long"`, `9007199254740993`, int64(9007199254740993)},
		{"long 1E3", `"long"`, `1E3`, int64(1000)},
		{"float", `"float"`, `1.5`, float32(1.5)},
		{"float from integer", `"float"`, `3`, float32(3)},
		{"double", `"double"`, `-0.1`, -0.1},
		{"double exponent", `"double"`, `6.02214076e23`, 6.02214076e23},
		{"double big integer", `"double"`, `9007199254740993`, 9007199254740992.0},
		{"string", `"string"`, `"hello"`, "hello"},
		{"string empty", `"string"`, `""`, ""},
		{"string emoji and non-ASCII", `"string"`, `"😀 café Größe 日本 ∑"`, "😀 café Größe 日本 ∑"},
		{"string escapes", `"string"`, `"a\"b\\c\/d\b\f\n\r\t\u00e9\ud83d\ude00"`, "a\"b\\c/d\b\f\n\r\té😀"},
		{"string NUL escape", `"string"`, `"a\u0000b"`, "a\x00b"},
		{"bytes", `"bytes"`, `"h€"`, []byte("h€")},
		{"bytes empty", `"bytes"`, `""`, []byte{}},
		{"enum", color, `"GREEN"`, "GREEN"},
		{"array", `{"type":"array","items":"long"}`, `[1, -2, 300]`, []any{int64(1), int64(-2), int64(300)}},
		{"array empty", `{"type":"array","items":"long"}`, `[]`, []any{}},
		{"array of 200", `{"type":"array","items":"int"}`, "[" + strings.Repeat("7,", 199) + "7]", repeat(int32(7), 200)},
		{"map", `{"type":"map","values":"string"}`, `{"a":"1","b\u00e9":"2"}`, map[string]any{"a": "1", "bé": "2"}},
		{"map empty", `{"type":"map","values":"string"}`, `{}`, map[string]any{}},
		{"fixed", `{"type":"fixed","name":"F4","size":4}`, `"abcd"`, []byte("abcd")},
		{"record", point, `{"y":2,"x":1,"z":"ignored"}`, map[string]any{"x": int32(1), "y": int32(2)}},
		{"nullable null", `["null","string"]`, `null`, nil},
		{"nullable value", `["null","string"]`, `"x"`, map[string]any{"string": "x"}},
		{"nullable wrapped", `["null","string"]`, `{"string":"x"}`, map[string]any{"string": "x"}},
		{"nullable record", `["null",` + point + `]`, `{"x":1,"y":2}`, map[string]any{"test.Point": map[string]any{"x": int32(1), "y": int32(2)}}},
		{"nullable record wrapped", `["null",` + point + `]`, `{"test.Point":{"x":1,"y":2}}`, map[string]any{"test.Point": map[string]any{"x": int32(1), "y": int32(2)}}},
		{"nullable record wrapped short name", `["null",` + point + `]`, `{"Point":{"x":1,"y":2}}`, map[string]any{"test.Point": map[string]any{"x": int32(1), "y": int32(2)}}},
		{"union first fitting branch", `["int","long","double"]`, `3000000000`, map[string]any{"long": int64(3000000000)}},
		{"union int", `["int","long","double"]`, `3`, map[string]any{"int": int32(3)}},
		{"union fraction goes to double", `["int","long","double"]`, `1.5`, map[string]any{"double": 1.5}},
		{"union wrapped picks branch", `["int","long","double"]`, `{"double":3}`, map[string]any{"double": 3.0}},
		{"union string vs enum", `["null",` + color + `,"string"]`, `"PURPLE"`, map[string]any{"string": "PURPLE"}},
		{"union enum", `["null",` + color + `,"string"]`, `"RED"`, map[string]any{"test.Color": "RED"}},
		{"union wrapped string", `["null",` + color + `,"string"]`, `{"string":"RED"}`, map[string]any{"string": "RED"}},
		{"union map vs record", `[` + point + `,{"type":"map","values":"long"}]`, `{"a":1}`, map[string]any{"map": map[string]any{"a": int64(1)}}},
		{"union array", `["null",{"type":"array","items":"string"}]`, `["a"]`, map[string]any{"array": []any{"a"}}},
		{"timestamp-millis integer", `{"type":"long","logicalType":"timestamp-millis"}`, `1714566615250`, ts},
		{"timestamp-millis RFC 3339", `{"type":"long","logicalType":"timestamp-millis"}`, `"2024-05-01T12:30:15.25Z"`, ts},
		{"timestamp-millis offset", `{"type":"long","logicalType":"timestamp-millis"}`, `"2024-05-01T14:30:15.250+02:00"`, ts},
		{"timestamp-millis sub-ms truncated", `{"type":"long","logicalType":"timestamp-millis"}`, `"2024-05-01T12:30:15.250999Z"`, ts},
		{"timestamp-millis before 1970", `{"type":"long","logicalType":"timestamp-millis"}`, `"1969-12-31T23:59:59.999Z"`, time.UnixMilli(-1).UTC()},
		{"timestamp-micros", `{"type":"long","logicalType":"timestamp-micros"}`, `"2024-05-01t12:30:15.250001z"`, ts.Add(time.Microsecond)},
		{"timestamp-micros integer", `{"type":"long","logicalType":"timestamp-micros"}`, `1714566615250001`, ts.Add(time.Microsecond)},
		{"date string", `{"type":"int","logicalType":"date"}`, `"2024-02-29"`, time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC)},
		{"date integer", `{"type":"int","logicalType":"date"}`, `19782`, time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC)},
		{"date before 1970", `{"type":"int","logicalType":"date"}`, `"1900-03-01"`, time.Date(1900, 3, 1, 0, 0, 0, 0, time.UTC)},
		{"time-millis string", `{"type":"int","logicalType":"time-millis"}`, `"13:45:10.5"`, 13*time.Hour + 45*time.Minute + 10500*time.Millisecond},
		{"time-millis integer", `{"type":"int","logicalType":"time-millis"}`, `1000`, time.Second},
		{"time-micros string", `{"type":"long","logicalType":"time-micros"}`, `"00:00:01.000002"`, time.Second + 2*time.Microsecond},
		{"local-timestamp-millis string", `{"type":"long","logicalType":"local-timestamp-millis"}`, `"2024-05-01T12:30:15.25"`, int64(1714566615250)},
		{"local-timestamp-micros integer", `{"type":"long","logicalType":"local-timestamp-micros"}`, `-1`, int64(-1)},
		{"uuid", `{"type":"string","logicalType":"uuid"}`, `"1B4E28BA-2FA1-11D2-883F-0016CB4A5B81"`, "1B4E28BA-2FA1-11D2-883F-0016CB4A5B81"},
		{"decimal string", `{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}`, `"12.34"`, rat("12.34")},
		{"decimal negative", `{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}`, `"-0.5"`, rat("-0.5")},
		{"decimal integer number", `{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}`, `1234`, rat("1234")},
		{"decimal exact number", `{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}`, `0.1`, rat("0.1")},
		{"decimal trailing zeros", `{"type":"bytes","logicalType":"decimal","precision":4,"scale":2}`, `"12.3400"`, rat("12.34")},
		{"decimal zero", `{"type":"bytes","logicalType":"decimal","precision":4,"scale":2}`, `"0"`, rat("0")},
		{"decimal -128 units", `{"type":"bytes","logicalType":"decimal","precision":4,"scale":2}`, `"-1.28"`, rat("-1.28")},
		{"decimal 128 units", `{"type":"bytes","logicalType":"decimal","precision":4,"scale":2}`, `"1.28"`, rat("1.28")},
		{"decimal 38 digits", `{"type":"bytes","logicalType":"decimal","precision":38,"scale":10}`, `"-1234567890123456789012345678.0123456789"`, rat("-1234567890123456789012345678.0123456789")},
		{"decimal 38 digits positive", `{"type":"bytes","logicalType":"decimal","precision":38,"scale":0}`, `"99999999999999999999999999999999999999"`, rat("99999999999999999999999999999999999999")},
		{"decimal fixed", `{"type":"fixed","name":"Money","size":8,"logicalType":"decimal","precision":18,"scale":4}`, `"-12.5"`, rat("-12.5")},
		{"decimal fixed positive", `{"type":"fixed","name":"Money","size":8,"logicalType":"decimal","precision":18,"scale":4}`, `99999999999999.9999`, rat("99999999999999.9999")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := fieldSchema(t, tt.typ)
			enc := newEncoder(1, s)
			out, err := enc.Append(nil, []byte(`{"v":`+tt.value+`}`))
			if err != nil {
				t.Fatal(err)
			}
			got := decode(t, s.Text, out[5:]).(map[string]any)["v"]
			if !equalNative(got, tt.want) {
				t.Fatalf("got %#v (%T), want %#v (%T); body %x", got, got, tt.want, tt.want, out[5:])
			}
		})
	}
}

func repeat[T any](v T, n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func equalNative(got, want any) bool {
	switch w := want.(type) {
	case *big.Rat:
		g, ok := got.(*big.Rat)
		return ok && g.Cmp(w) == 0
	case time.Time:
		g, ok := got.(time.Time)
		return ok && g.Equal(w)
	}
	return reflect.DeepEqual(got, want)
}

func TestAppendHeader(t *testing.T) {
	s := fieldSchema(t, `"long"`)
	enc := newEncoder(0x01020304, s)
	prefix := []byte("keep")
	out, err := enc.Append(prefix, []byte(`{"v":-1}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{'k', 'e', 'e', 'p', 0x00, 0x01, 0x02, 0x03, 0x04, 0x01}
	if !bytes.Equal(out, want) {
		t.Fatalf("got %x, want %x", out, want)
	}
	// On error dst comes back unchanged.
	out, err = enc.Append(prefix, []byte(`{"v":"x"}`))
	if err == nil || !bytes.Equal(out, prefix) {
		t.Fatalf("got %x, %v; want %x and an error", out, err, prefix)
	}
	if id := binary.BigEndian.Uint32(want[5:9]); id != 0x01020304 {
		t.Fatal(id)
	}
}

// The Avro body bytes of hand-checked values (zig-zag varints, little-endian
// floats, length-prefixed strings, blocked arrays).
func TestAppendBytes(t *testing.T) {
	tests := []struct {
		typ, value string
		want       []byte
	}{
		{`"long"`, `0`, []byte{0x00}},
		{`"long"`, `-1`, []byte{0x01}},
		{`"long"`, `1`, []byte{0x02}},
		{`"long"`, `-64`, []byte{0x7f}},
		{`"long"`, `64`, []byte{0x80, 0x01}},
		{`"long"`, `9223372036854775807`, []byte{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
		{`"long"`, `-9223372036854775808`, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
		{`"float"`, `1`, []byte{0x00, 0x00, 0x80, 0x3f}},
		{`"string"`, `"é"`, []byte{0x04, 0xc3, 0xa9}},
		{`{"type":"array","items":"int"}`, `[1,2]`, []byte{0x04, 0x02, 0x04, 0x00}},
		{`["null","int"]`, `null`, []byte{0x00}},
		{`["null","int"]`, `1`, []byte{0x02, 0x02}},
		{`{"type":"bytes","logicalType":"decimal","precision":5,"scale":2}`, `"-1.28"`, []byte{0x02, 0x80}},
		{`{"type":"bytes","logicalType":"decimal","precision":5,"scale":2}`, `"1.28"`, []byte{0x04, 0x00, 0x80}},
		{`{"type":"fixed","name":"D","size":3,"logicalType":"decimal","precision":5,"scale":0}`, `-2`, []byte{0xff, 0xff, 0xfe}},
	}
	for _, tt := range tests {
		t.Run(tt.typ+"/"+tt.value, func(t *testing.T) {
			got, err := fieldSchema(t, tt.typ).AppendBody(nil, []byte(`{"v":`+tt.value+`}`))
			if err != nil || !bytes.Equal(got, tt.want) {
				t.Fatalf("got %x, %v; want %x", got, err, tt.want)
			}
		})
	}
}

func TestAppendDefaults(t *testing.T) {
	text := `{"type":"record","name":"D","namespace":"test","fields":[
		{"name":"id","type":"string"},
		{"name":"big","type":"long","default":9223372036854775807},
		{"name":"opt","type":["null","string"],"default":null},
		{"name":"first","type":["string","null"],"default":"x"},
		{"name":"raw","type":"bytes","default":"\u00ff\u0000A"},
		{"name":"fx","type":{"type":"fixed","name":"F2","size":2},"default":"aZ"},
		{"name":"tags","type":{"type":"array","items":"string"},"default":["a","b"]},
		{"name":"attrs","type":{"type":"map","values":"int"},"default":{"k":1}},
		{"name":"color","type":{"type":"enum","name":"C","symbols":["R","G"]},"default":"G"},
		{"name":"p","type":{"type":"record","name":"P","fields":[{"name":"x","type":"int","default":7},{"name":"y","type":"int"}]},"default":{"y":3}},
		{"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"},"default":0},
		{"name":"dec","type":{"type":"bytes","logicalType":"decimal","precision":4,"scale":2},"default":"\u0004\u00d2"}
	]}`
	s, err := ParseSchema("D", "", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	body, err := s.AppendBody(nil, []byte(`{"id":"a"}`))
	if err != nil {
		t.Fatal(err)
	}
	got := decode(t, s.Text, body).(map[string]any)
	want := map[string]any{
		"id":    "a",
		"big":   int64(math.MaxInt64),
		"opt":   nil,
		"first": map[string]any{"string": "x"},
		"raw":   []byte{0xff, 0x00, 'A'},
		"fx":    []byte("aZ"),
		"tags":  []any{"a", "b"},
		"attrs": map[string]any{"k": int32(1)},
		"color": "G",
		"p":     map[string]any{"x": int32(7), "y": int32(3)},
		"ts":    time.UnixMilli(0).UTC(),
		"dec":   rat("12.34"),
	}
	for k, w := range want {
		if !equalNative(got[k], w) {
			t.Errorf("%s: got %#v, want %#v", k, got[k], w)
		}
	}
	// A present field overrides the default.
	body, err = s.AppendBody(nil, []byte(`{"id":"a","big":-1,"opt":"o","first":null}`))
	if err != nil {
		t.Fatal(err)
	}
	got = decode(t, s.Text, body).(map[string]any)
	if got["big"] != int64(-1) || !reflect.DeepEqual(got["opt"], map[string]any{"string": "o"}) || got["first"] != nil {
		t.Errorf("got %v", got)
	}
}

// Defaults are found by record full name, whatever the namespace rules
// that name it.
func TestAppendDefaultsAcrossNamespaces(t *testing.T) {
	text := `{"type":"record","name":"Outer","namespace":"a","fields":[
		{"name":"in","type":{"type":"record","name":"Inner","namespace":"b","fields":[
			{"name":"x","type":"long","default":-5},
			{"name":"deep","type":{"type":"record","name":"c.d.Deep","fields":[{"name":"y","type":"string","default":"why"}]}},
			{"name":"same","type":{"type":"record","name":"Same","fields":[{"name":"z","type":"int","default":3}]}}
		]}},
		{"name":"x","type":"long","default":7}
	]}`
	s, err := ParseSchema("Outer", "", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	body, err := s.AppendBody(nil, []byte(`{"in":{"deep":{},"same":{}}}`))
	if err != nil {
		t.Fatal(err)
	}
	got := decode(t, s.Text, body)
	want := map[string]any{"x": int64(7), "in": map[string]any{"x": int64(-5),
		"deep": map[string]any{"y": "why"}, "same": map[string]any{"z": int32(3)}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestAppendRecursive(t *testing.T) {
	text := `{"type":"record","name":"Node","namespace":"test","fields":[{"name":"v","type":"long"},{"name":"next","type":["null","Node"],"default":null}]}`
	s, err := ParseSchema("Node", "", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	body, err := s.AppendBody(nil, []byte(`{"v":1,"next":{"v":2,"next":{"v":3}}}`))
	if err != nil {
		t.Fatal(err)
	}
	got := decode(t, s.Text, body)
	want := map[string]any{"v": int64(1), "next": map[string]any{"test.Node": map[string]any{"v": int64(2),
		"next": map[string]any{"test.Node": map[string]any{"v": int64(3), "next": nil}}}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestAppendErrors(t *testing.T) {
	const point = `{"type":"record","name":"Point","fields":[{"name":"x","type":"int"},{"name":"y","type":"int"}]}`
	tests := []struct {
		name    string
		typ     string
		payload string // whole payload
		path    string
		reason  string
	}{
		{"string for long", `"long"`, `{"v":"12"}`, "v", `expected long, got string "12"`},
		{"missing field", `"long"`, `{"w":1}`, "", `missing required field "v"`},
		{"array payload", `"long"`, `[1,2]`, "", `payload is a JSON array, want object`},
		{"string payload", `"long"`, `"x"`, "", `payload is a JSON string, want object`},
		{"null payload", `"long"`, `null`, "", `payload is a JSON null, want object`},
		{"empty payload", `"long"`, ` `, "", `payload is empty`},
		{"fraction for int", `"int"`, `{"v":1.5}`, "v", `1.5 is not an integer`},
		{"fraction for long", `"long"`, `{"v":0.000001}`, "v", `0.000001 is not an integer`},
		{"1e20 long", `"long"`, `{"v":1e20}`, "v", `1e20 overflows long`},
		{"long max+1", `"long"`, `{"v":9223372036854775808}`, "v", `9223372036854775808 overflows long`},
		{"long min-1", `"long"`, `{"v":-9223372036854775809}`, "v", `-9223372036854775809 overflows long`},
		{"huge exponent", `"long"`, `{"v":1e999999999999}`, "v", `1e999999999999 overflows long`},
		{"int max+1", `"int"`, `{"v":2147483648}`, "v", `2147483648 overflows int`},
		{"double overflow", `"double"`, `{"v":1e400}`, "v", `1e400 overflows double`},
		{"float overflow", `"float"`, `{"v":1e39}`, "v", `1e39 overflows float`},
		{"number for string", `"string"`, `{"v":12}`, "v", `expected string, got number 12`},
		{"null for string", `"string"`, `{"v":null}`, "v", `expected string, got null`},
		{"number for boolean", `"boolean"`, `{"v":1}`, "v", `expected boolean, got number 1`},
		{"object for double", `"double"`, `{"v":{}}`, "v", `expected double, got object`},
		{"unknown symbol", `{"type":"enum","name":"Color","symbols":["RED","GREEN"]}`, `{"v":"BLUE"}`, "v", `"BLUE" is not a symbol of enum test.Color (RED, GREEN)`},
		{"fixed size", `{"type":"fixed","name":"F4","size":4}`, `{"v":"abc"}`, "v", `expected 4 bytes for fixed test.F4, got 3`},
		{"array item", `{"type":"array","items":"long"}`, `{"v":[1,"x"]}`, "v[1]", `expected long, got string "x"`},
		{"array of records", `{"type":"array","items":` + point + `}`, `{"v":[{"x":1,"y":2},{"x":1,"y":2.5}]}`, "v[1].y", `2.5 is not an integer`},
		{"missing nested", `{"type":"array","items":` + point + `}`, `{"v":[{"x":1}]}`, "v[0]", `missing required field "y"`},
		{"map value", `{"type":"map","values":"int"}`, `{"v":{"a":1,"b":true}}`, "v[b]", `expected int, got boolean true`},
		{"nullable mismatch", `["null","long"]`, `{"v":"12"}`, "v", `expected null or long, got string "12"`},
		{"nullable inner error", `["null","long"]`, `{"v":1.5}`, "v", `1.5 is not an integer`},
		{"union no branch", `["int","string"]`, `{"v":true}`, "v", `expected one of int, string, got boolean true`},
		{"union all candidates fail", `["int","long"]`, `{"v":1e30}`, "v", `expected one of int, long, got number 1e30`},
		{"uuid", `{"type":"string","logicalType":"uuid"}`, `{"v":"not-a-uuid"}`, "v", `expected uuid, got string "not-a-uuid"`},
		{"timestamp without offset", `{"type":"long","logicalType":"timestamp-millis"}`, `{"v":"2024-05-01T12:00:00"}`, "v", `expected RFC 3339 timestamp with a UTC offset (Z or ±hh:mm), got string "2024-05-01T12:00:00"`},
		{"timestamp garbage", `{"type":"long","logicalType":"timestamp-millis"}`, `{"v":"yesterday"}`, "v", `expected RFC 3339 timestamp or an integer, got string "yesterday"`},
		{"timestamp bad day", `{"type":"long","logicalType":"timestamp-millis"}`, `{"v":"2023-02-29T00:00:00Z"}`, "v", `expected RFC 3339 timestamp or an integer, got string "2023-02-29T00:00:00Z"`},
		{"timestamp for plain long", `"long"`, `{"v":"2024-05-01T12:00:00Z"}`, "v", `expected long, got string "2024-05-01T12:00:00Z"`},
		{"local timestamp with offset", `{"type":"long","logicalType":"local-timestamp-micros"}`, `{"v":"2024-05-01T12:00:00Z"}`, "v", `expected local timestamp without a UTC offset, got string "2024-05-01T12:00:00Z"`},
		{"time of day out of range", `{"type":"int","logicalType":"time-millis"}`, `{"v":"24:00:00"}`, "v", `expected time "HH:MM:SS[.fraction]" or an integer, got string "24:00:00"`},
		{"date", `{"type":"int","logicalType":"date"}`, `{"v":"2024-13-01"}`, "v", `expected date "YYYY-MM-DD" or days since 1970-01-01, got string "2024-13-01"`},
		{"decimal too many places", `{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}`, `{"v":"12.345"}`, "v", `12.345 has more than 2 digits after the decimal point`},
		{"decimal float number", `{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}`, `{"v":0.125}`, "v", `0.125 has more than 2 digits after the decimal point`},
		{"decimal precision", `{"type":"bytes","logicalType":"decimal","precision":4,"scale":2}`, `{"v":"123.4"}`, "v", `123.4 has more than 4 significant digits (decimal(4,2))`},
		{"decimal not a number", `{"type":"bytes","logicalType":"decimal","precision":4,"scale":2}`, `{"v":"12,5"}`, "v", `expected decimal(4,2), got string "12,5"`},
		{"decimal fixed precision", `{"type":"fixed","name":"D","size":1,"logicalType":"decimal","precision":2,"scale":0}`, `{"v":128}`, "v", `128 has more than 2 significant digits (decimal(2,0))`},
		{"duplicate field", `"long"`, `{"v":1,"v":2}`, "", `duplicate field "v"`},
		{"invalid UTF-8", `"string"`, "{\"v\":\"\xff\"}", "", `invalid JSON: string is not valid UTF-8 at offset 6`},
		{"unpaired surrogate", `"string"`, `{"v":"\ud83d"}`, "", `invalid JSON: string has an unpaired \u surrogate at offset 6`},
		{"long string is cut", `"int"`, `{"v":"` + strings.Repeat("a", 50) + `"}`, "v", `expected int, got string "` + strings.Repeat("a", 40) + `…"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := fieldSchema(t, tt.typ)
			out, err := s.AppendBody([]byte("x"), []byte(tt.payload))
			var pe *PayloadError
			if !errors.As(err, &pe) {
				t.Fatalf("got %x, %v (%T); want a *PayloadError", out, err, err)
			}
			if pe.EventType != "T" || pe.Path != tt.path || pe.Reason != tt.reason {
				t.Fatalf("got %+v\nwant path %q reason %q", pe, tt.path, tt.reason)
			}
			if string(out) != "x" {
				t.Fatalf("dst changed to %q", out)
			}
		})
	}
}

func TestPayloadErrorMessage(t *testing.T) {
	s := fieldSchema(t, `"long"`)
	tests := map[string]string{
		`{"v":"12"}`: `payload of T: field "v": expected long, got string "12"`,
		`{}`:         `payload of T: missing required field "v"`,
		`[]`:         `payload of T: payload is a JSON array, want object`,
	}
	for payload, want := range tests {
		_, err := s.AppendBody(nil, []byte(payload))
		if err == nil || err.Error() != want {
			t.Errorf("%s: got %v, want %s", payload, err, want)
		}
	}
}

func TestAppendInvalidJSON(t *testing.T) {
	s := fieldSchema(t, `{"type":"map","values":["null","long","string",{"type":"array","items":"double"}]}`)
	for _, payload := range []string{
		`{"v":{"a":1}`, `{"v":{"a":1}}x`, `{"v":{"a":01}}`, `{"v":{"a":1.}}`, `{"v":{"a":-}}`,
		`{"v":{"a":tru}}`, `{"v":{"a":"x}}`, "{\"v\":{\"a\":\"\x01\"}}", `{"v":{"a":"\x"}}`,
		`{"v":{"a":"\u12"}}`, `{"v":{a:1}}`, `{"v":{"a" 1}}`, `{"v":{"a":1,}}`, `{"v":{"a":[1,]}}`,
		`{"v":{"a":[1 2]}}`, `{"v" {}}`, `{"v":{},}`, `{"v":{}`, `{"w":[}`, `{"w":{"x":[1,2}}`,
		`{"w":` + strings.Repeat("[", 2000) + strings.Repeat("]", 2000) + `}`, `{"v":{"a":+1}}`, `{"v":{"a":NaN}}`,
	} {
		_, err := s.AppendBody(nil, []byte(payload))
		var pe *PayloadError
		if !errors.As(err, &pe) || !strings.HasPrefix(pe.Reason, "invalid JSON") {
			t.Errorf("%.60s: got %v, want an invalid JSON error", payload, err)
		}
	}
	// White space is allowed everywhere JSON allows it; unknown fields of
	// any shape are skipped.
	ok := " \t\n{ \"w\" : [ { \"x\" : [ 1 , 2.5e-3 , \"\\u00e9\" , true , false , null ] } ] ,\r\n \"v\" : { \"a\" : [ 1 , 2 ] , \"b\" : null } } \n"
	if _, err := s.AppendBody(nil, []byte(ok)); err != nil {
		t.Fatal(err)
	}
}

// TestPlainIntAgrees: where the integer fast path accepts a number, the
// general reading gives the same value and the same end; it declines every
// number that is not a plain integer, and invalid JSON.
func TestPlainIntAgrees(t *testing.T) {
	accepted := 0
	for _, in := range []string{
		"0", "-0", "7", "-7", "259900", "999999999999999999", "-999999999999999999",
		"1000000000000000000", "9223372036854775807", "-9223372036854775808", "2147483648",
		"1.5", "1e3", "1E3", "10.0", "01", "-01", "-", "", "+1", "00", "1,", "1}", "1 ", "-x",
	} {
		v, end, ok := plainInt([]byte(in), 0)
		n, nend, valid := scanNumber([]byte(in), 0)
		if !ok {
			continue
		}
		accepted++
		if !valid || end != nend {
			t.Errorf("%q: fast path read to %d, the general one to %d (valid %v)", in, end, nend, valid)
			continue
		}
		if n.fp != nil || n.exp != 0 {
			t.Errorf("%q: fast path accepted a number with a fraction or exponent", in)
		}
		if w, st := n.int64(); st != intOK || w != v {
			t.Errorf("%q: fast path %d, general %d (status %d)", in, v, w, st)
		}
	}
	if accepted != 11 {
		t.Errorf("fast path accepted %d inputs, want 11", accepted)
	}
}
