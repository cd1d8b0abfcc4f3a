package relay

import "testing"

// TestDeadLetters: at least once a dead letter counts when it is handed
// over; exactly once only when its Kafka transaction committed, and never
// if the session ended before (its transaction aborted, and the next
// session reads it again).
func TestDeadLetters(t *testing.T) {
	alo := map[string]int{}
	d := &deadLetters{count: func(reason string) { alo[reason]++ }}
	d.add(3, "no_schema")
	if alo["no_schema"] != 1 {
		t.Fatalf("at-least-once: %v counted on add, want no_schema 1", alo)
	}

	got := map[string]int{}
	d = &deadLetters{count: func(reason string) { got[reason]++ }, exactlyOnce: true}
	d.add(2, "no_schema")
	d.add(5, "too_large")
	if len(got) != 0 {
		t.Fatalf("exactly-once: %v counted before any commit, want none", got)
	}
	d.begin() // the session failed: its transaction aborted
	d.add(2, "no_schema")
	d.add(5, "too_large")
	d.add(9, "no_schema")
	d.committed(5)
	if got["no_schema"] != 1 || got["too_large"] != 1 {
		t.Fatalf("after the commit up to 5: %v, want no_schema 1, too_large 1", got)
	}
	d.committed(5)
	d.committed(9)
	if got["no_schema"] != 2 || got["too_large"] != 1 {
		t.Fatalf("after the commit up to 9: %v, want no_schema 2, too_large 1 (each dead letter once)", got)
	}
}
