package backoff

import (
	"context"
	"testing"
	"time"
)

func TestNextGrowsAndCaps(t *testing.T) {
	b := Backoff{Min: 100 * time.Millisecond, Max: time.Second}
	wantBase := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i, base := range wantBase {
		base *= time.Millisecond
		got := b.Next()
		if got < base-base/5 || got > base+base/5 {
			t.Fatalf("attempt %d: got %v, want %v ±20%%", i, got, base)
		}
	}
	if b.Attempts() != len(wantBase) {
		t.Fatalf("Attempts = %d, want %d", b.Attempts(), len(wantBase))
	}
	b.Reset()
	if got := b.Next(); got > 120*time.Millisecond {
		t.Fatalf("after Reset got %v, want about 100ms", got)
	}
}

func TestWaitHonoursContext(t *testing.T) {
	b := Backoff{Min: time.Hour, Max: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Wait(ctx); err != context.Canceled {
		t.Fatalf("Wait = %v, want context.Canceled", err)
	}
}
