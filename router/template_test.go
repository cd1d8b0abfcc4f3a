package router

import "testing"

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
