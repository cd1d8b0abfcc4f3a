package schemaregistry

import (
	"bytes"
	"strings"
	"testing"
)

// twoPassBody encodes payload with the two-pass walk only, the one
// appendBody falls back to: the reference the one-pass walk must agree
// with.
func twoPassBody(s *Schema, payload []byte) ([]byte, *PayloadError) {
	e := &enc{data: payload, twoPass: true}
	if err := e.top(s.root); err != nil {
		return nil, err
	}
	return e.dst, nil
}

// onePassBody encodes payload with the one-pass walk only (no fallback);
// restarted reports that it handed over.
func onePassBody(s *Schema, payload []byte, sink FieldSink) (body []byte, err *PayloadError, restarted bool) {
	e := &enc{data: payload, sink: sink}
	err = e.top(s.root)
	return e.dst, err, e.restarted
}

// agree checks that Append's body for payload is the two-pass walk's,
// byte for byte, or that both fail with the same error.
func agree(t *testing.T, s *Schema, payload string) {
	t.Helper()
	got, err := s.AppendBody(nil, []byte(payload))
	want, werr := twoPassBody(s, []byte(payload))
	switch {
	case (err == nil) != (werr == nil):
		t.Fatalf("%s: AppendBody: %x, %v; two passes: %x, %v", payload, got, err, want, werr)
	case err != nil:
		pe := err.(*PayloadError)
		if pe.Path != werr.Path || pe.Reason != werr.Reason {
			t.Fatalf("%s: AppendBody: %+v; two passes: %+v", payload, pe, werr)
		}
	case !bytes.Equal(got, want):
		t.Fatalf("%s: AppendBody %x, two passes %x", payload, got, want)
	}
}

// TestOnePassAgrees: whatever the order of a payload's members, the one-pass
// walk writes what the two-pass one does (the fields in the schema's order,
// defaults for the absent ones), and where it fails, the error reported is
// the two-pass walk's.
func TestOnePassAgrees(t *testing.T) {
	const text = `{"type":"record","name":"Order","namespace":"test","fields":[
		{"name":"id","type":"long"},
		{"name":"status","type":{"type":"enum","name":"S","symbols":["A","B"]}},
		{"name":"note","type":"string","default":"none"},
		{"name":"lines","type":{"type":"array","items":{"type":"record","name":"Line","fields":[
			{"name":"sku","type":"string"},{"name":"qty","type":"int","default":1}]}},"default":[]},
		{"name":"extra","type":["null",{"type":"record","name":"Extra","fields":[{"name":"k","type":"string"}]},{"type":"map","values":"string"}],"default":null},
		{"name":"tags","type":{"type":"map","values":"long"},"default":{}}]}`
	s, err := ParseSchema("Order", "", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	ok := []string{
		// schema order: written in place
		`{"id":1,"status":"A","note":"n","lines":[{"sku":"x","qty":2}],"extra":null,"tags":{"a":1}}`,
		// jsonb order (shorter names first) and reversed
		`{"id":1,"note":"n","tags":{"a":1},"extra":{"k":"v"},"lines":[{"qty":2,"sku":"x"}],"status":"B"}`,
		`{"tags":{},"extra":{"Extra":{"k":"v"}},"lines":[],"note":"n","status":"A","id":-5}`,
		// defaults, first and last fields absent in turn
		`{"id":1,"status":"A"}`,
		`{"status":"A","id":1,"tags":{"z":9}}`,
		`{"lines":[{"sku":"y"}],"status":"B","id":2}`,
		// members the schema lacks, at each depth, without a sink
		`{"zzz":[1,{"a":null}],"id":1,"status":"A","lines":[{"sku":"x","more":true}]}`,
		// a union whose record branch fails and whose map branch fits
		`{"id":1,"status":"A","extra":{"k":"v","j":"w"}}`,
		`{"id":1,"status":"A","extra":{"j":"w"}}`,
		` { "id" : 1 , "status" : "A" } `,
		`{"id":1,"status":"A","note":"esc\u00e9\n"}`,
		// an escaped name is not the expected one's bytes, yet names it
		`{"\u0069d":1,"note":"n","status":"A"}`,
	}
	bad := []string{
		`{"id":1}`,                                    // missing required
		`{"status":"A","id":1,"id":2}`,                // duplicate
		`{"id":1,"id":2,"status":"A"}`,                // duplicate of the expected member
		`{"note":"n","id":1,"note":"m","status":"A"}`, // duplicate that is expected again after a member out of order
		`{"status":"C","id":1}`,                       // not a symbol
		`{"status":"A","id":"1"}`,                     // wrong type after a good field
		`{"status":"A","lines":[{"qty":1}],"id":1}`,   // nested required missing
		`{"status":"A","id":1,"zzz":[1,}`,             // bad JSON in a member the schema lacks
		`{"status":"A","id":1 "note":"n"}`,            // missing comma
		`{"tags":{"a":"x"},"status":"A","id":1,}`,     // two errors: the two-pass one is reported
		`{"note":"n","id":1.5,"status":`,              // truncated after a type error
	}
	for _, p := range append(ok, bad...) {
		agree(t, s, p)
	}
	for _, p := range ok {
		if _, err, restarted := onePassBody(s, []byte(p), nil); err != nil || restarted {
			t.Errorf("%s: the one-pass walk alone failed (restarted %v): %v", p, restarted, err)
		}
	}
	for _, p := range bad {
		if _, err := s.AppendBody(nil, []byte(p)); err == nil {
			t.Errorf("%s: encoded", p)
		}
	}
}

type recordingSink struct{ calls []string }

func (r *recordingSink) UnknownField(path []string, field []byte) {
	r.calls = append(r.calls, strings.Join(append(append([]string(nil), path...), string(field)), "."))
}

// TestOnePassSink: a sink hears of each member the schema lacks once, with
// its path, though the one-pass walk hands such a payload to the two-pass
// one; a payload without one is encoded in one pass.
func TestOnePassSink(t *testing.T) {
	const text = `{"type":"record","name":"R","namespace":"test","fields":[
		{"name":"a","type":"long"},
		{"name":"inner","type":{"type":"record","name":"I","fields":[{"name":"b","type":"string"}]}}]}`
	s, err := ParseSchema("R", "", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	enc := newEncoder(1, s)
	sink := &recordingSink{}
	payload := []byte(`{"a":1,"x":true,"inner":{"y":[1],"b":"s"}}`)
	out, err := enc.AppendWith(nil, payload, sink)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(sink.calls, " "); got != "x inner.y" {
		t.Fatalf("sink heard %q, want %q", got, "x inner.y")
	}
	want, werr := twoPassBody(s, payload)
	if werr != nil || !bytes.Equal(out[5:], want) {
		t.Fatalf("body %x, two passes %x (%v)", out[5:], want, werr)
	}
	if _, err, restarted := onePassBody(s, payload, sink); err == nil || !restarted {
		t.Fatalf("one pass with a sink and unknown members: err %v, restarted %v; want a hand-over", err, restarted)
	}
	sink.calls = nil
	if _, err, restarted := onePassBody(s, []byte(`{"inner":{"b":"s"},"a":1}`), sink); err != nil || restarted || len(sink.calls) != 0 {
		t.Fatalf("one pass of a payload without unknown members: err %v, restarted %v, sink %q", err, restarted, sink.calls)
	}
}

// TestOnePassUnionStopsAtRestart: a record branch that hands over must not
// let the union try the next branch, which the two-pass walk would not
// have taken: the record branch fits (its extra member is ignored).
func TestOnePassUnionStopsAtRestart(t *testing.T) {
	const text = `{"type":"record","name":"R","namespace":"test","fields":[
		{"name":"v","type":[{"type":"record","name":"P","fields":[{"name":"k","type":"string"}]},{"type":"map","values":"string"}]}]}`
	s, err := ParseSchema("R", "", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte(`{"v":{"k":"a","other":"b"}}`)
	sink := &recordingSink{}
	out, err := newEncoder(1, s).AppendWith(nil, payload, sink)
	if err != nil {
		t.Fatal(err)
	}
	// branch 0 (P), then k: "a"
	if want := []byte{0, 0, 0, 0, 1, 0, 2, 'a'}; !bytes.Equal(out, want) {
		t.Fatalf("got %x, want %x (the record branch)", out, want)
	}
	if strings.Join(sink.calls, " ") != "v.other" {
		t.Fatalf("sink heard %q", sink.calls)
	}
}

// TestOnePassDepth: nesting near the tokenizer's bound is decided as the
// two-pass walk decides it.
func TestOnePassDepth(t *testing.T) {
	const text = `{"type":"record","name":"N","namespace":"test","fields":[{"name":"c","type":{"type":"array","items":"N"},"default":[]}]}`
	s, err := ParseSchema("N", "", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	for _, levels := range []int{10, 499, 500, 501, 1000} {
		p := strings.Repeat(`{"c":[`, levels) + `{}` + strings.Repeat(`]}`, levels)
		agree(t, s, p)
	}
}
