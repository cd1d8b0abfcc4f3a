package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMainStaysThin: cmd/cdc-relay only parses settings and calls the
// packages, in at most 1,500 non-test lines, and no non-test Go file of the
// module outside internal/bench (the benchmark harness) is over 600 lines
// (docs/CONTRIBUTING.md, "Layout"); README.md is at most 300 lines and
// docs/BENCHMARKS.md at most 400.
func TestMainStaysThin(t *testing.T) {
	lines := func(path string) int {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return bytes.Count(b, []byte("\n"))
	}
	main, _ := filepath.Glob("*.go")
	total := 0
	for _, f := range main {
		if !strings.HasSuffix(f, "_test.go") {
			total += lines(f)
		}
	}
	if total == 0 || total > 1500 {
		t.Errorf("cmd/cdc-relay has %d non-test lines, want at most 1,500: move what is not settings parsing into a package", total)
	}
	err := filepath.WalkDir("../..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == ".git" || strings.HasPrefix(d.Name(), ".")) && path != "../.." {
			return filepath.SkipDir
		}
		if d.IsDir() && filepath.ToSlash(path) == "../../internal/bench" {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			if n := lines(path); n > 600 {
				t.Errorf("%s has %d lines, want at most 600: split it", path, n)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The docs a newcomer reads first stay short (docs/ holds the rest).
	for path, most := range map[string]int{"../../README.md": 300, "../../docs/BENCHMARKS.md": 400} {
		if n := lines(path); n > most {
			t.Errorf("%s has %d lines, want at most %d: move what is not for a first read to docs/", path, n, most)
		}
	}
}
