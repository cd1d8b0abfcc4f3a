// Package backoff is the relay's one retry delay: exponential, jittered,
// capped, and reset after a success. Every wait selects on ctx.Done().
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff computes successive delays. The zero value uses the defaults
// (Min 250 ms, Max 5 s). It is not safe for concurrent use.
type Backoff struct {
	// Min is the first delay; default 250 ms.
	Min time.Duration
	// Max caps the delay; default 5 s.
	Max time.Duration

	attempt int
}

// Next returns the next delay: Min·2^n capped at Max, with ±20 % jitter.
func (b *Backoff) Next() time.Duration {
	lo, hi := b.Min, b.Max
	if lo <= 0 {
		lo = 250 * time.Millisecond
	}
	if hi <= 0 {
		hi = 5 * time.Second
	}
	d := lo
	for i := 0; i < b.attempt && d < hi; i++ {
		d *= 2
	}
	if d > hi {
		d = hi
	}
	b.attempt++
	jitter := time.Duration(rand.Int64N(int64(d)/5*2+1)) - d/5
	return d + jitter
}

// Attempts is the number of delays handed out since the last Reset: the
// consecutive failure count.
func (b *Backoff) Attempts() int { return b.attempt }

// Reset starts again from Min; call it after a success.
func (b *Backoff) Reset() { b.attempt = 0 }

// Wait sleeps for Next() or until ctx is done, returning ctx.Err() then.
func (b *Backoff) Wait(ctx context.Context) error {
	t := time.NewTimer(b.Next())
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
