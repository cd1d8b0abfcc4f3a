package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStatusFileEnvMissingSlotJSON: status reads CDC_RELAY_PG_URL_FILE, and
// --json on a missing slot prints JSON on stdout and exits 1.
func TestStatusFileEnvMissingSlotJSON(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	path := filepath.Join(t.TempDir(), "pg-url")
	if err := os.WriteFile(path, []byte(f.pg.url+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := env(map[string]string{"CDC_RELAY_PG_URL_FILE": path})
	var stdout, stderr bytes.Buffer
	code := run([]string{"status", "--slot", f.slot, "--json"}, e, &stdout, &stderr)
	if code != exitFailed {
		t.Fatalf("status --json on a missing slot: exit %d, want %d; stderr %s", code, exitFailed, stderr.String())
	}
	var got struct {
		Slot   string `json:"slot"`
		Exists *bool  `json:"exists"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("stdout is not JSON: %v: %q", err, stdout.String())
	}
	if got.Slot != f.slot || got.Exists == nil || *got.Exists {
		t.Errorf("status --json = %s, want slot %s and exists false", stdout.String(), f.slot)
	}
	// check and replay read the same _FILE; the slot then exists.
	args := commandArgs("check", f.args())
	for i := 0; i < len(args); i++ {
		if args[i] == "--pg-url" {
			args = append(args[:i], args[i+2:]...)
			break
		}
	}
	stdout.Reset()
	if code := run(args, e, &stdout, &stdout); code != exitOK || !strings.Contains(stdout.String(), "all checks passed") {
		t.Fatalf("check with CDC_RELAY_PG_URL_FILE = %d:\n%s", code, stdout.String())
	}
	replayArgs := append([]string{"replay", "--since", "1h", "--dry-run"}, args[1:]...)
	stdout.Reset()
	if code := run(replayArgs, e, &stdout, &stdout); code != exitOK {
		t.Fatalf("replay with CDC_RELAY_PG_URL_FILE = %d:\n%s", code, stdout.String())
	}
}
