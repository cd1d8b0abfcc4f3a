package relay

import (
	"testing"
	"time"
)

func TestLagRate(t *testing.T) {
	l := NewLagRate(nil)
	t0 := time.Unix(1000, 0)
	if got := l.BytesPerSecond(); got != 0 {
		t.Fatalf("empty rate = %v", got)
	}
	for i := 0; i < 20; i++ { // grows 500 B/s, sampled every 5 s
		l.add(t0.Add(time.Duration(i)*5*time.Second), uint64(i*2500))
	}
	if got := l.BytesPerSecond(); got != 500 {
		t.Fatalf("rate = %v, want 500", got)
	}
	if len(l.samples) != l.window {
		t.Fatalf("kept %d samples, want %d", len(l.samples), l.window)
	}
	l.add(t0.Add(100*time.Second), 0) // drained: the rate turns negative
	if got := l.BytesPerSecond(); got >= 0 {
		t.Fatalf("rate after draining = %v, want negative", got)
	}
}
