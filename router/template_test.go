package router

import (
	"slices"
	"testing"
)

// TestNewErrorMessages: the messages --topic-template's errors carry, word
// for word.
func TestNewErrorMessages(t *testing.T) {
	for template, want := range map[string]string{
		"":                 "--topic-template is empty: set it, e.g. outbox.event.{aggregate_type}",
		"a.{event_type":    `--topic-template "a.{event_type": unclosed '{': use {aggregate_type} or {event_type}`,
		"a.{aggregate_id}": `--topic-template "a.{aggregate_id}": unknown placeholder {aggregate_id}: use {aggregate_type} or {event_type}`,
	} {
		if _, err := New(template); err == nil || err.Error() != want {
			t.Errorf("New(%q) = %v, want %s", template, err, want)
		}
	}
}

// TestParseTemplate: literals and placeholders in order, and the errors,
// which list the allowed names however many there are.
func TestParseTemplate(t *testing.T) {
	tests := []struct {
		template string
		allowed  []string
		want     []Part
		wantErr  string
	}{
		{"", []string{"{a}"}, nil, ""},
		{"plain", []string{"{a}"}, []Part{{Lit: "plain"}}, ""},
		{"{a}", []string{"{a}"}, []Part{{Placeholder: "{a}"}}, ""},
		{"x.{a}-{b}.y", []string{"{a}", "{b}"}, []Part{{Lit: "x."}, {Placeholder: "{a}"}, {Lit: "-"}, {Placeholder: "{b}"}, {Lit: ".y"}}, ""},
		{"{a}{a}", []string{"{a}"}, []Part{{Placeholder: "{a}"}, {Placeholder: "{a}"}}, ""},
		{"x.{a", []string{"{a}"}, nil, `"x.{a": unclosed '{': use {a}`},
		{"{c}", []string{"{a}", "{b}"}, nil, `"{c}": unknown placeholder {c}: use {a} or {b}`},
		{"{A}", []string{"{a}", "{b}", "{c}"}, nil, `"{A}": unknown placeholder {A}: use {a}, {b} or {c}`},
	}
	for _, tc := range tests {
		got, err := ParseTemplate(tc.template, tc.allowed...)
		if tc.wantErr != "" {
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("ParseTemplate(%q) = %v, want %s", tc.template, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ParseTemplate(%q) = %+v, %v, want %+v", tc.template, got, err, tc.want)
		}
	}
}
