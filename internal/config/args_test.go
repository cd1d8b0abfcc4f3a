package config

import (
	"slices"
	"strings"
	"testing"
)

// TestArgs: a command with Args takes arguments among its flags, in any
// order; a true/false flag takes only true or false as its value there,
// so the word after it is an argument; "--" ends the flags. A command
// without Args still refuses any argument.
func TestArgs(t *testing.T) {
	brokers := []string{"--kafka-brokers", "k:9092"}
	tests := []struct {
		args       []string
		want       []string
		follow     bool
		count      string
		wantPretty bool
	}{
		{args: []string{"a", "b"}, want: []string{"a", "b"}},
		{args: []string{"a", "--count", "5", "b"}, want: []string{"a", "b"}, count: "5"},
		{args: []string{"--follow", "a"}, want: []string{"a"}, follow: true},
		{args: []string{"--follow", "false", "a"}, want: []string{"a"}},
		{args: []string{"a", "--follow", "--pretty", "b"}, want: []string{"a", "b"}, follow: true, wantPretty: true},
		{args: []string{"--count", "2", "--", "--follow", "a"}, want: []string{"--follow", "a"}, count: "2"},
		{args: nil, want: nil},
	}
	for _, tc := range tests {
		v, err := load(t, Tail, append(append([]string{}, brokers...), tc.args...), nil)
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if got := v.Args(); !slices.Equal(got, tc.want) {
			t.Errorf("%q: Args() = %q, want %q", tc.args, got, tc.want)
		}
		if got := v.ActionBool("follow"); got != tc.follow {
			t.Errorf("%q: follow = %v, want %v", tc.args, got, tc.follow)
		}
		if got := v.ActionBool("pretty"); got != tc.wantPretty {
			t.Errorf("%q: pretty = %v, want %v", tc.args, got, tc.wantPretty)
		}
		if got, _ := v.Action("count"); got != tc.count {
			t.Errorf("%q: count = %q, want %q", tc.args, got, tc.count)
		}
	}
	if _, err := load(t, Run, append(append([]string{}, required...), "extra"), nil); err == nil || !strings.Contains(err.Error(), `unexpected argument "extra"`) {
		t.Errorf("run with an argument: %v", err)
	}
	if _, err := load(t, Tail, append(append([]string{}, brokers...), "a", "--count"), nil); err == nil || !strings.Contains(err.Error(), "--count: needs a value") {
		t.Errorf("tail a --count: %v", err)
	}
	if _, err := load(t, Tail, append(append([]string{}, brokers...), "a", "--follow", "--follow"), nil); err == nil || !strings.Contains(err.Error(), "--follow: is given twice") {
		t.Errorf("--follow twice: %v", err)
	}
}
