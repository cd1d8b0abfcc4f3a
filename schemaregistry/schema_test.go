package schemaregistry

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const demoDir = "../testdata/schemas"

func TestLoadDir(t *testing.T) {
	got, err := LoadDir(demoDir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"OrderCreated":   "com.example.orders.OrderCreated",
		"OrderCancelled": "com.example.orders.OrderCancelled",
	}
	for et, full := range want {
		s := got[et]
		if s == nil {
			t.Fatalf("no schema for %s; got %v", et, keys(got))
		}
		if s.EventType != et || s.FullName != full || s.File != filepath.Join(demoDir, et+".avsc") {
			t.Errorf("%s: got EventType %q FullName %q File %q", et, s.EventType, s.FullName, s.File)
		}
		if s.Avro == nil || s.root == nil {
			t.Errorf("%s: schema not parsed", et)
		}
		// Text is compact JSON that keeps defaults and logical types.
		if strings.ContainsAny(s.Text, "\n\t") || !json.Valid([]byte(s.Text)) {
			t.Errorf("%s: Text is not compact JSON: %s", et, s.Text)
		}
		for _, keep := range []string{`"default":null`, `"logicalType":"timestamp-millis"`, `"default":"EUR"`} {
			if !strings.Contains(s.Text, keep) {
				t.Errorf("%s: Text lost %s: %s", et, keep, s.Text)
			}
		}
	}
}

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLoadDirIgnoresOtherFiles(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"Ping.avsc":  `{"type":"record","name":"Ping","fields":[{"name":"at","type":"long"}]}`,
		"README.md":  "not a schema",
		"Ping.json":  "{",
		"Text.avsc":  `"string"`,
		"Color.avsc": `{"type":"enum","name":"Color","namespace":"x","symbols":["RED"]}`,
	})
	if err := os.Mkdir(filepath.Join(dir, "nested.avsc"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got["Ping"] == nil || got["Text"] == nil || got["Color"] == nil {
		t.Fatalf("got %v, want Ping, Text and Color", keys(got))
	}
	if got["Ping"].FullName != "Ping" || got["Text"].FullName != "string" || got["Color"].FullName != "x.Color" {
		t.Errorf("full names: %q %q %q", got["Ping"].FullName, got["Text"].FullName, got["Color"].FullName)
	}
}

func TestLoadDirErrors(t *testing.T) {
	tests := []struct {
		name     string
		files    map[string]string
		wantFile string // the bad file named by a *FileError
		wantMsg  string
	}{
		{
			name:     "unparsable JSON",
			files:    map[string]string{"Good.avsc": `"string"`, "Bad.avsc": `{"type": "record",`},
			wantFile: "Bad.avsc",
			wantMsg:  "invalid JSON",
		},
		{
			name:     "unknown type",
			files:    map[string]string{"Bad.avsc": `{"type":"record","name":"Bad","fields":[{"name":"x","type":"decimal128"}]}`},
			wantFile: "Bad.avsc",
			wantMsg:  "invalid Avro schema",
		},
		{
			name:     "bad default",
			files:    map[string]string{"Bad.avsc": `{"type":"record","name":"Bad","fields":[{"name":"x","type":"long","default":"ten"}]}`},
			wantFile: "Bad.avsc",
			wantMsg:  "invalid Avro schema",
		},
		{
			name:     "empty file",
			files:    map[string]string{"Empty.avsc": ``},
			wantFile: "Empty.avsc",
			wantMsg:  "invalid JSON",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeFiles(t, tt.files)
			got, err := LoadDir(dir)
			if err == nil {
				t.Fatalf("LoadDir = %v, want an error", keys(got))
			}
			var fe *FileError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v (%T) is not a *FileError", err, err)
			}
			wantPath := filepath.Join(dir, tt.wantFile)
			if fe.File != wantPath || !strings.Contains(err.Error(), wantPath) || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("error %q: want it to name %s and say %q", err, wantPath, tt.wantMsg)
			}
		})
	}

	t.Run("empty dir", func(t *testing.T) {
		dir := writeFiles(t, map[string]string{"notes.txt": "x"})
		_, err := LoadDir(dir)
		if err == nil || !strings.Contains(err.Error(), "--schemas-dir") || !strings.Contains(err.Error(), dir) {
			t.Fatalf("error %v: want it to name --schemas-dir and %s", err, dir)
		}
	})
	t.Run("missing dir", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "nope")
		_, err := LoadDir(dir)
		if err == nil || !strings.Contains(err.Error(), "--schemas-dir") || !strings.Contains(err.Error(), "does not exist") {
			t.Fatalf("error %v: want it to name --schemas-dir and say it does not exist", err)
		}
	})
	t.Run("every bad file is named", func(t *testing.T) {
		dir := writeFiles(t, map[string]string{"A.avsc": "{", "B.avsc": "[", "C.avsc": `"long"`})
		_, err := LoadDir(dir)
		for _, f := range []string{"A.avsc", "B.avsc"} {
			if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, f)) {
				t.Errorf("error %v does not name %s", err, f)
			}
		}
	})
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
