package relay

import (
	"context"
	"sync"
	"time"
)

// LagRate samples the slot lag and reports how fast it grows, so an alert can
// fire on "lag growing for 10 minutes" rather than on a spike.
type LagRate struct {
	sample func() uint64
	every  time.Duration
	window int // samples kept: the rate spans every × (window-1)

	mu      sync.Mutex
	samples []lagSample
}

type lagSample struct {
	at  time.Time
	lag uint64
}

func NewLagRate(sample func() uint64) *LagRate {
	return &LagRate{sample: sample, every: 5 * time.Second, window: 13}
}

// Run samples until ctx ends.
func (l *LagRate) Run(ctx context.Context) {
	t := time.NewTicker(l.every)
	defer t.Stop()
	for {
		l.add(time.Now(), l.sample())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (l *LagRate) add(at time.Time, lag uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.samples = append(l.samples, lagSample{at, lag})
	if len(l.samples) > l.window {
		l.samples = append(l.samples[:0], l.samples[len(l.samples)-l.window:]...)
	}
}

// BytesPerSecond is the lag's growth over the window (negative while it shrinks).
func (l *LagRate) BytesPerSecond() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.samples) < 2 {
		return 0
	}
	first, last := l.samples[0], l.samples[len(l.samples)-1]
	secs := last.at.Sub(first.at).Seconds()
	if secs <= 0 {
		return 0
	}
	return (float64(last.lag) - float64(first.lag)) / secs
}
