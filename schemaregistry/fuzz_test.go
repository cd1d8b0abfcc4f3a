package schemaregistry

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/linkedin/goavro/v2"
)

// FuzzAppend feeds arbitrary bytes as the payload for a schema with every
// type. Append must never panic; on success goavro must decode exactly the
// body; on failure the error is a *PayloadError and dst is unchanged; input
// that encoding/json rejects must be rejected.
func FuzzAppend(f *testing.F) {
	s := loadSchema(f, "testdata/alltypes.avsc")
	codec, err := goavro.NewCodec(s.Text)
	if err != nil {
		f.Fatal(err)
	}
	files, _ := filepath.Glob("testdata/payloads/*.json")
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"u":{"string":"x"},"l":1e19}`))
	enc := newEncoder(5, s)
	f.Fuzz(func(t *testing.T, payload []byte) {
		dst := []byte("prefix")
		out, err := enc.Append(dst, payload)
		if err != nil {
			var pe *PayloadError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is a %T, want *PayloadError", err, err)
			}
			if !bytes.Equal(out, []byte("prefix")) {
				t.Fatalf("dst changed on error: %q", out)
			}
			return
		}
		if !json.Valid(payload) {
			t.Fatalf("invalid JSON %q was encoded", payload)
		}
		if !bytes.Equal(out[:11], []byte("prefix\x00\x00\x00\x00\x05")) {
			t.Fatalf("header: %x", out[:11])
		}
		_, rest, err := codec.NativeFromBinary(out[11:])
		if err != nil || len(rest) != 0 {
			t.Fatalf("goavro cannot decode %x (%d left): %v", out[11:], len(rest), err)
		}
	})
}
