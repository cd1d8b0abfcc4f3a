package relay

import (
	"testing"
	"time"
)

// TestRateLog: one line per key per interval, standing for the calls
// suppressed since the last one.
func TestRateLog(t *testing.T) {
	r := &rateLog{}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if n, ok := r.allow("a", t0); !ok || n != 1 {
		t.Fatalf("first = %d, %v", n, ok)
	}
	for i := 1; i <= 5; i++ {
		if _, ok := r.allow("a", t0.Add(time.Duration(i)*time.Second)); ok {
			t.Fatalf("call %d within the minute let through", i)
		}
	}
	if n, ok := r.allow("b", t0.Add(time.Second)); !ok || n != 1 {
		t.Fatalf("another table = %d, %v", n, ok)
	}
	if n, ok := r.allow("a", t0.Add(time.Minute)); !ok || n != 6 {
		t.Fatalf("after a minute = %d, %v, want 6 rows", n, ok)
	}
	var none *rateLog
	if _, ok := none.allow("a", t0); !ok {
		t.Fatal("a nil rateLog suppressed a line")
	}
}
