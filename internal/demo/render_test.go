package main

import (
	"testing"

	"github.com/hamba/avro/v2"
)

// TestRenderHambaValues decodes Avro binary with hamba/avro, as the demo's
// consumer does, and checks the line render makes of it: fields in schema
// order, unions unwrapped (bare and named branches alike), fixed as base64,
// timestamps as RFC 3339.
func TestRenderHambaValues(t *testing.T) {
	const schemaJSON = `{"type":"record","name":"R","namespace":"n","fields":[
		{"name":"z","type":"string"},
		{"name":"opt","type":["null","string"]},
		{"name":"none","type":["null","string"]},
		{"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}},
		{"name":"sub","type":["null",{"type":"record","name":"Sub","fields":[{"name":"b","type":"int"},{"name":"a","type":"int"}]}]},
		{"name":"f","type":{"type":"fixed","name":"F","size":2}},
		{"name":"tags","type":{"type":"map","values":"long"}},
		{"name":"st","type":{"type":"enum","name":"St","symbols":["A","B"]}}]}`
	schema, err := avro.Parse(schemaJSON)
	if err != nil {
		t.Fatal(err)
	}
	// The fields' binary encoding, written out by hand.
	body := []byte{
		2, 'x', // z "x"
		2, 2, 'c', // opt: branch 1, "c"
		0,                                  // none: branch 0, null
		0x80, 0xf0, 0xa6, 0xbc, 0xbc, 0x5e, // at 1623024000000 ms
		2, 4, 2, // sub: branch 1, b 2, a 1
		0xab, 0xcd, // f
		2, 2, 'k', 6, 0, // tags {"k": 3}
		2, // st B
	}
	var native any
	if err := avro.Unmarshal(schema, body, &native); err != nil {
		t.Fatal(err)
	}
	got, err := render(schemaJSON, native)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"z":"x","opt":"c","none":null,"at":"2021-06-07T00:00:00.000Z","sub":{"b":2,"a":1},"f":"q80=","tags":{"k":3},"st":"B"}`
	if got != want {
		t.Errorf("render:\n got %s\nwant %s", got, want)
	}
}
