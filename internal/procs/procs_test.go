package procs

import (
	"context"
	"io"
	"log/slog"
	"runtime"
	"testing"
	"time"
)

// TestStep walks the policy through a quiet spell, a load between its two
// thresholds, and a burst.
func TestStep(t *testing.T) {
	c := controller{p: Policy{Widen: 0.6, Narrow: 0.35, NarrowAfter: 3 * time.Second}}
	steps := []struct {
		cpu   float64
		procs int
		want  int
	}{
		{0.1, 2, 0}, {0.1, 2, 0},
		{0.4, 2, 0}, // a busy sample restarts the count
		{0.1, 2, 0}, {0.1, 2, 0}, {0.1, 2, -1},
		{0.5, 1, 0}, // between the thresholds: stays narrow
		{0.6, 1, +1},
		{0.5, 2, 0}, // between the thresholds: stays wide
		{0.1, 2, 0}, {0.1, 2, 0}, {0.1, 2, -1},
	}
	for i, s := range steps {
		if got := c.step(s.cpu, time.Second, s.procs); got != s.want {
			t.Fatalf("step %d (cpu %.2f): got %+d, want %+d", i, s.cpu, got, s.want)
		}
	}
}

// TestStepOneProcessor: where the default is one processor there is
// nothing to narrow.
func TestStepOneProcessor(t *testing.T) {
	c := controller{p: Policy{Widen: 0.6, Narrow: 0.35, NarrowAfter: time.Second}}
	for i := range 5 {
		if got := c.step(0, time.Second, 1); got != 0 {
			t.Fatalf("step %d: got %+d at a default of 1", i, got)
		}
	}
}

// TestSample changes the process's GOMAXPROCS: it narrows, widens back to
// the default, and narrows again.
func TestSample(t *testing.T) {
	def := wideDefault(t)
	c := controller{p: Policy{Widen: 0.6, Narrow: 0.35, NarrowAfter: 2 * time.Second}}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for i, s := range []struct {
		cpu  float64
		want int
	}{
		{0.1, def}, {0.1, 1}, {0.5, 1}, {0.9, def}, {0.1, def}, {0.1, 1},
	} {
		c.sample(s.cpu, time.Second, log)
		if got := runtime.GOMAXPROCS(0); got != s.want {
			t.Fatalf("sample %d (cpu %.2f): GOMAXPROCS %d, want %d", i, s.cpu, got, s.want)
		}
	}
}

// TestRunRestores: run reads the CPU clock on each tick, narrows, widens
// and narrows again, and gives the runtime its default back when its
// context ends.
func TestRunRestores(t *testing.T) {
	def := wideDefault(t)
	var used time.Duration
	at := time.Now()
	ticks := make(chan time.Time) // unbuffered: a send returns once run has handled the tick before
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	p := Policy{Fast: time.Millisecond, Slow: time.Second, Widen: 0.6, Narrow: 0.35, NarrowAfter: 1500 * time.Millisecond, Idle: 0.02}
	go func() {
		defer close(done)
		run(ctx, p, slog.New(slog.NewTextHandler(io.Discard, nil)),
			func() time.Duration { return used },
			func(time.Duration) <-chan time.Time { return ticks })
	}()
	// second feeds a tick a second after the last, with busy cores of
	// CPU used in it, then a zero-length tick, which run ignores: its send
	// returns once the first has been handled.
	second := func(busy float64) {
		at = at.Add(time.Second)
		used += time.Duration(busy * float64(time.Second))
		ticks <- at
		ticks <- at
	}
	want := func(procs int, what string) {
		t.Helper()
		if got := runtime.GOMAXPROCS(0); got != procs {
			t.Fatalf("%s: GOMAXPROCS %d, want %d", what, got, procs)
		}
	}
	second(0.1)
	want(def, "after a quiet second")
	second(0.1)
	want(1, "after two quiet seconds")
	second(0.9)
	want(def, "after a busy second")
	second(0)
	second(0)
	want(1, "after two idle seconds")
	cancel()
	<-done
	if got := runtime.GOMAXPROCS(0); got != def {
		t.Fatalf("after the context ended: GOMAXPROCS %d, want the default %d", got, def)
	}
}

// TestNext: narrow, a sample with work in it makes the next one come
// fast, so that a burst widens soon; idle or wide, they come slow.
func TestNext(t *testing.T) {
	c := controller{p: Default}
	if got := c.next(0.3); got != Default.Slow {
		t.Fatalf("wide: next sample in %s, want %s", got, Default.Slow)
	}
	c.narrow = true
	if got := c.next(0.3); got != Default.Fast {
		t.Fatalf("narrow at 0.3 cores: next sample in %s, want %s", got, Default.Fast)
	}
	if got := c.next(0.001); got != Default.Slow {
		t.Fatalf("narrow and idle: next sample in %s, want %s", got, Default.Slow)
	}
}

// wideDefault makes sure the default is at least 2, so that narrowing
// shows, and returns it.
func wideDefault(t *testing.T) int {
	t.Helper()
	runtime.SetDefaultGOMAXPROCS()
	t.Cleanup(func() { runtime.SetDefaultGOMAXPROCS() })
	def := runtime.GOMAXPROCS(0)
	if def < 2 {
		t.Fatalf("the runtime's default GOMAXPROCS is %d here; this test needs at least 2 CPUs", def)
	}
	return def
}
