package procs

import (
	"context"
	"log/slog"
	"runtime"
	"time"
)

// Policy says when to narrow and when to widen, and how often to look. CPU
// is in cores: the process's CPU time over a sample divided by the
// sample's wall time.
type Policy struct {
	// Fast is the sampling interval while narrow and not idle: a burst
	// must widen soon.
	Fast time.Duration
	// Slow is the sampling interval otherwise: while wide (narrowing can
	// wait) and while narrow and idle (each sample is a wake-up, which is
	// most of what an idle relay costs).
	Slow time.Duration
	// Widen: narrow, a sample at or above this CPU widens.
	Widen float64
	// Narrow: wide, NarrowAfter below this CPU in a row narrows.
	Narrow float64
	// NarrowAfter is how long the CPU must stay below Narrow to narrow.
	NarrowAfter time.Duration
	// Idle: narrow, a sample below this CPU is idle and the next is Slow.
	Idle float64
}

// Default is the relay's policy. At 5k single-row events a second the
// relay uses about 0.2 of a core wide and less narrow, so everything up to
// several thousand a second runs narrow. A drain saturates one processor:
// from a trickle it widens within 0.1 s, from idle within about a second.
// The gap between Narrow and Widen keeps a load near either from flapping.
var Default = Policy{
	Fast:        100 * time.Millisecond,
	Slow:        time.Second,
	Widen:       0.6,
	Narrow:      0.35,
	NarrowAfter: 5 * time.Second,
	Idle:        0.02,
}

// controller is the policy's state: whether it runs narrow, and how long
// it has been quiet while wide.
type controller struct {
	p      Policy
	narrow bool
	quiet  time.Duration
}

// step takes one sample, cpu cores over wall, and says whether to change:
// +1 widen, -1 narrow, 0 keep. defaultProcs is the runtime's default now;
// at 1 there is nothing to narrow.
func (c *controller) step(cpu float64, wall time.Duration, defaultProcs int) int {
	if c.narrow {
		if cpu >= c.p.Widen {
			c.narrow, c.quiet = false, 0
			return +1
		}
		return 0
	}
	if defaultProcs <= 1 || cpu >= c.p.Narrow {
		c.quiet = 0
		return 0
	}
	c.quiet += wall
	if c.quiet < c.p.NarrowAfter {
		return 0
	}
	c.narrow, c.quiet = true, 0
	return -1
}

// next is how long until the next sample, after one at cpu.
func (c *controller) next(cpu float64) time.Duration {
	if c.narrow && cpu >= c.p.Idle {
		return c.p.Fast
	}
	return c.p.Slow
}

// Run adjusts GOMAXPROCS by p until ctx ends, then gives the runtime its
// default back. It returns at once where the process's CPU time cannot be
// read.
func Run(ctx context.Context, p Policy, log *slog.Logger) {
	if _, ok := cpuTime(); !ok {
		return
	}
	run(ctx, p, log, func() time.Duration { d, _ := cpuTime(); return d }, time.After)
}

// run is Run with its CPU clock and timer given, for the tests.
func run(ctx context.Context, p Policy, log *slog.Logger, cpu func() time.Duration, after func(time.Duration) <-chan time.Time) {
	c := controller{p: p}
	defer func() {
		if c.narrow {
			runtime.SetDefaultGOMAXPROCS()
		}
	}()
	used := cpu()
	at := time.Now()
	wait := p.Slow
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-after(wait):
			u := cpu()
			wall := now.Sub(at)
			if wall <= 0 {
				continue
			}
			load := float64(u-used) / float64(wall)
			used, at = u, now
			c.sample(load, wall, log)
			wait = c.next(load)
		}
	}
}

// sample takes one sample and changes GOMAXPROCS if the policy says so.
func (c *controller) sample(load float64, wall time.Duration, log *slog.Logger) {
	defaultProcs := 1
	if !c.narrow {
		defaultProcs = runtime.GOMAXPROCS(0)
	}
	switch c.step(load, wall, defaultProcs) {
	case +1:
		runtime.SetDefaultGOMAXPROCS()
		log.Debug("gomaxprocs widened", "procs", runtime.GOMAXPROCS(0), "cpu", load)
	case -1:
		runtime.GOMAXPROCS(1)
		log.Debug("gomaxprocs narrowed", "procs", 1, "from", defaultProcs, "cpu", load)
	}
}
