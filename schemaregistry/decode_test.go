package schemaregistry

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"
)

// TestAppendJSONAllTypes decodes the body of a payload with every type to
// plain JSON, pinned here, and checks that the encoder takes that JSON back
// to the same bytes.
func TestAppendJSONAllTypes(t *testing.T) {
	s := loadSchema(t, "testdata/alltypes.avsc")
	payload, err := os.ReadFile("testdata/payloads/full.json")
	if err != nil {
		t.Fatal(err)
	}
	body, err := s.AppendBody(nil, payload)
	if err != nil {
		t.Fatal(err)
	}
	got, err := AppendJSON(nil, s.Avro, body)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"n":null,"b":true,"i":-7,"l":9223372036854775807,"f":1.25,"d":-0.0025,"s":"😀 café","by":"raw","e":"BLUE",` +
		`"a":[1,-1,0],"m":{"k":"v","ключ":"значение"},"fx":"abcd","opt":"here","u":{"x":1,"y":2},` +
		`"ts":"2024-05-01T12:30:15.25Z","tsu":"2024-05-01T12:30:15.250001Z","dt":"2024-02-29","tm":"13:45:10.5",` +
		`"id":"1b4e28ba-2fa1-11d2-883f-0016cb4a5b81","dec":"-1234.56","decf":"12.5000",` +
		`"nested":{"p":{"x":3,"y":4},"tags":["a","b"]},"points":[{"x":1,"y":1},{"x":2,"y":2}]}`
	if string(got) != want {
		t.Errorf("AppendJSON:\n got %s\nwant %s", got, want)
	}
	if !json.Valid(got) {
		t.Fatalf("not JSON: %s", got)
	}
	again, err := s.AppendBody(nil, got)
	if err != nil {
		t.Fatalf("the encoder refuses the decoded JSON: %v", err)
	}
	if !bytes.Equal(again, body) {
		t.Errorf("re-encoded body differs:\n got % x\nwant % x", again, body)
	}
	// dst is appended to, not replaced.
	if out, _ := AppendJSON([]byte("x="), s.Avro, body); !bytes.HasPrefix(out, []byte(`x={"n":null`)) {
		t.Errorf("AppendJSON does not append: %.20s", out)
	}
}

// TestAppendJSONRules: the forms of the values JSON has no type for, and
// the bodies that are not one value of the schema.
func TestAppendJSONRules(t *testing.T) {
	parse := func(text string) avro.Schema {
		t.Helper()
		s, err := avro.ParseWithCache(text, "", &avro.SchemaCache{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	f32 := func(f float32) []byte { return avroFloat(f) }
	tests := []struct {
		name, schema string
		body         []byte
		want         string // "" when it must fail; then fail names the error
		fail         string
	}{
		{"bytes not UTF-8", `"bytes"`, []byte{4, 0xff, 0xfe}, `{"base64":"//4="}`, ""},
		{"fixed not UTF-8", `{"type":"fixed","name":"F","size":2}`, []byte{0xc3, 0x28}, `{"base64":"wyg="}`, ""},
		{"string escapes", `"string"`, append([]byte{18}, "a\"b\\c\n\x01<>"...), `"a\"b\\c\n\u0001<>"`, ""},
		{"NaN", `"float"`, f32(float32(math.NaN())), `"NaN"`, ""},
		{"infinity", `"double"`, avroDouble(math.Inf(-1)), `"-Infinity"`, ""},
		{"negative decimal below one", `{"type":"bytes","logicalType":"decimal","precision":5,"scale":3}`, []byte{2, 0xfb}, `"-0.005"`, ""},
		{"decimal scale 0", `{"type":"bytes","logicalType":"decimal","precision":5,"scale":0}`, []byte{4, 0x01, 0x00}, `"256"`, ""},
		{"time-micros", `{"type":"long","logicalType":"time-micros"}`, appendLong(nil, 3600e6+1), `"01:00:00.000001"`, ""},
		{"local-timestamp-millis", `{"type":"long","logicalType":"local-timestamp-millis"}`, appendLong(nil, 1000), `"1970-01-01T00:00:01"`, ""},
		{"negative block count", `{"type":"array","items":"int"}`, []byte{3, 4, 2, 4, 0}, `[1,2]`, ""},
		{"map", `{"type":"map","values":"boolean"}`, []byte{2, 2, 'k', 1, 0}, `{"k":true}`, ""},
		{"union branch bare", `["null","string",{"type":"record","name":"R","fields":[]}]`, []byte{4}, `{}`, ""},
		{"short", `"string"`, []byte{10, 'a'}, "", "ends early"},
		{"left over", `"int"`, []byte{2, 2}, "", "1 bytes left"},
		{"enum index", `{"type":"enum","name":"E","symbols":["A"]}`, []byte{2}, "", "no symbol 1"},
		{"union index", `["null","int"]`, []byte{4}, "", "no branch 2"},
		{"boolean byte", `"boolean"`, []byte{7}, "", "boolean byte 7"},
		{"int range", `"int"`, appendLong(nil, math.MaxInt32+1), "", "out of range"},
		{"billions of nulls", `{"type":"array","items":"null"}`, appendLong(nil, 1<<40), "", "64 MiB"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := AppendJSON(nil, parse(tc.schema), tc.body)
			if tc.fail != "" {
				if err == nil || !strings.Contains(err.Error(), tc.fail) {
					t.Errorf("err = %v, want one saying %q", err, tc.fail)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// TestWriterSchemaSubject: which subject a value of a topic names: one
// of the topic's own (or the record's, under the record strategy), never
// another topic's or a key's.
func TestWriterSchemaSubject(t *testing.T) {
	const record = `{"type":"record","name":"R","namespace":"com.x","fields":[]}`
	for _, tc := range []struct {
		schema   string
		subjects []string
		topic    string
		want     string
	}{
		{`"string"`, nil, "t", ""},
		{`"string"`, []string{"t-key", "t-value"}, "t", "t-value"},
		{record, []string{"other-com.x.R", "t-com.x.R"}, "t", "t-com.x.R"},
		{record, []string{"com.x.R"}, "t", "com.x.R"},
		{record, []string{"com.x.R", "t-com.x.R", "t-value"}, "t", "t-value"},
		// Registered only under other topics' subjects, or a key's: none.
		{`"string"`, []string{"t-key"}, "t", ""},
		{record, []string{"other-com.x.R"}, "t", ""},
		{record, []string{"other-value"}, "t", ""},
		{record, []string{"t-eu-value", "t-eu-com.x.R"}, "t", ""},
		{record, []string{"com.x.Other", "t-com.x.Other"}, "t", ""},
		{`"string"`, []string{"t-com.x.R", "string"}, "t", ""},
	} {
		w, err := ParseWriterSchema(1, "", tc.schema, tc.subjects)
		if err != nil {
			t.Fatal(err)
		}
		if w.Type != "AVRO" || w.Avro == nil {
			t.Errorf("type %q, Avro %v", w.Type, w.Avro)
		}
		if got := w.SubjectFor(tc.topic); got != tc.want {
			t.Errorf("%v: SubjectFor(%q) = %q, want %q", tc.subjects, tc.topic, got, tc.want)
		}
	}
	if w, err := ParseWriterSchema(3, "JSON", `{"type":"object"}`, []string{"t-key", "u-value", "t-value"}); err != nil || w.SubjectFor("t") != "t-value" || w.SubjectFor("u") != "u-value" || w.SubjectFor("v") != "" {
		t.Errorf("a JSON schema's subjects: %v, %v", w, err)
	}
	if _, err := ParseWriterSchema(1, "AVRO", `{"type":"nope"}`, nil); err == nil {
		t.Error("a bad Avro schema parses")
	}
	if w, err := ParseWriterSchema(2, "JSON", `{"type":"object"}`, nil); err != nil || w.Avro != nil {
		t.Errorf("a JSON schema: %v, %v", w, err)
	}
}

func avroFloat(f float32) []byte {
	b := make([]byte, 4)
	bits := math.Float32bits(f)
	for i := range b {
		b[i] = byte(bits >> (8 * i))
	}
	return b
}

func avroDouble(f float64) []byte {
	b := make([]byte, 8)
	bits := math.Float64bits(f)
	for i := range b {
		b[i] = byte(bits >> (8 * i))
	}
	return b
}
