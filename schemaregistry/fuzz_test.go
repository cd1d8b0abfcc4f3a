package schemaregistry

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/linkedin/goavro/v2"
)

// FuzzAppend feeds arbitrary bytes as the payload for every seed schema: one
// with every type (testdata/alltypes.avsc) and the example event types
// (../testdata/schemas/*.avsc). Append must never panic; on success goavro
// must decode exactly the body, which is the two-pass walk's; on failure
// the error is a *PayloadError, dst is unchanged and the two-pass walk
// fails too; input that encoding/json rejects must be rejected.
//
// Seeds: testdata/payloads/*.json, ../testdata/schemas/examples/*.json and
// the payload of every row in ../testdata/pgoutput (real jsonb text).
func FuzzAppend(f *testing.F) {
	type target struct {
		enc   *Encoder
		codec *goavro.Codec
	}
	var targets []target
	add := func(s *Schema) {
		codec, err := goavro.NewCodec(s.Text)
		if err != nil {
			f.Fatalf("%s: %v", s.File, err)
		}
		targets = append(targets, target{newEncoder(5, s), codec})
	}
	add(loadSchema(f, "testdata/alltypes.avsc"))
	examples, err := LoadDir("../testdata/schemas")
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range examples {
		add(s)
	}

	var seeds []string
	for _, pattern := range []string{"testdata/payloads/*.json", "../testdata/schemas/examples/*.json"} {
		files, _ := filepath.Glob(pattern)
		if len(files) == 0 {
			f.Fatalf("no seeds match %s", pattern)
		}
		seeds = append(seeds, files...)
	}
	for _, file := range seeds {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(bytes.TrimSpace(b))
	}
	goldens, _ := filepath.Glob("../testdata/pgoutput/*/golden.json")
	if len(goldens) == 0 {
		f.Fatal("no seeds in ../testdata/pgoutput")
	}
	for _, file := range goldens {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		var g struct {
			Messages []struct {
				Row *struct {
					Payload *string `json:"payload"`
				} `json:"row"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(b, &g); err != nil {
			f.Fatalf("%s: %v", file, err)
		}
		for _, m := range g.Messages {
			if m.Row != nil && m.Row.Payload != nil && len(*m.Row.Payload) < 4096 {
				f.Add([]byte(*m.Row.Payload))
			}
		}
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"u":{"string":"x"},"l":1e19}`))
	f.Add([]byte(strings.Repeat("[", 200)))

	f.Fuzz(func(t *testing.T, payload []byte) {
		for _, tg := range targets {
			dst := []byte("prefix")
			out, err := tg.enc.Append(dst, payload)
			ref, referr := twoPassBody(tg.enc.Schema, payload)
			if (err == nil) != (referr == nil) || err == nil && !bytes.Equal(out[11:], ref) {
				t.Fatalf("%s: Append gave %x, %v; the two-pass walk %x, %v", tg.enc.Schema.EventType, out, err, ref, referr)
			}
			if err != nil {
				var pe *PayloadError
				if !errors.As(err, &pe) {
					t.Fatalf("%s: error %v is a %T, want *PayloadError", tg.enc.Schema.EventType, err, err)
				}
				if !bytes.Equal(out, []byte("prefix")) {
					t.Fatalf("%s: dst changed on error: %q", tg.enc.Schema.EventType, out)
				}
				continue
			}
			if !json.Valid(payload) {
				t.Fatalf("%s: invalid JSON %q was encoded", tg.enc.Schema.EventType, payload)
			}
			if !bytes.Equal(out[:11], []byte("prefix\x00\x00\x00\x00\x05")) {
				t.Fatalf("%s: header: %x", tg.enc.Schema.EventType, out[:11])
			}
			_, rest, err := tg.codec.NativeFromBinary(out[11:])
			if err != nil || len(rest) != 0 {
				t.Fatalf("%s: goavro cannot decode %x (%d left): %v", tg.enc.Schema.EventType, out[11:], len(rest), err)
			}
		}
	})
}

// TestExamplePayloads: each ../testdata/schemas/examples/<event type>.json
// (the FuzzAppend seeds for the example schemas) encodes with its schema, so
// the fuzzer starts from payloads that get past the first field.
func TestExamplePayloads(t *testing.T) {
	schemas, err := LoadDir("../testdata/schemas")
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("../testdata/schemas/examples/*.json")
	if len(files) != len(schemas) {
		t.Fatalf("%d example payloads for %d schemas", len(files), len(schemas))
	}
	for _, file := range files {
		s := schemas[strings.TrimSuffix(filepath.Base(file), ".json")]
		if s == nil {
			t.Fatalf("%s: no schema for it", file)
		}
		payload, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		body, err := s.AppendBody(nil, payload)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		codec, err := goavro.NewCodec(s.Text)
		if err != nil {
			t.Fatal(err)
		}
		if _, rest, err := codec.NativeFromBinary(body); err != nil || len(rest) != 0 {
			t.Fatalf("%s: goavro: %v (%d bytes left)", file, err, len(rest))
		}
	}
}
