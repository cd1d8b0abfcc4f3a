package main

import (
	"bytes"
	"testing"

	replaypkg "github.com/cdc-relay/cdc-relay/replay"
)

// TestInitialReplaySetting: --initial-replay defaults to false and is read
// from the flag and CDC_RELAY_INITIAL_REPLAY.
func TestInitialReplaySetting(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want bool
	}{
		{"default", nil, nil, false},
		{"bare flag", []string{"--initial-replay"}, nil, true},
		{"flag false", []string{"--initial-replay=false"}, map[string]string{"CDC_RELAY_INITIAL_REPLAY": "true"}, false},
		{"env", nil, map[string]string{"CDC_RELAY_INITIAL_REPLAY": "true"}, true},
	} {
		c, err := LoadConfig(append(append([]string{}, required...), tc.args...), env(tc.env), &bytes.Buffer{})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if c.InitialReplay != tc.want {
			t.Errorf("%s: InitialReplay = %v, want %v", tc.name, c.InitialReplay, tc.want)
		}
		if got := replaypkg.Initial(c, nil) != nil; got != tc.want {
			t.Errorf("%s: replication.Deps.InitialReplay set = %v, want %v", tc.name, got, tc.want)
		}
	}
}
