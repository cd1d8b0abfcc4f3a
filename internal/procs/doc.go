// Package procs narrows the Go scheduler to one processor (GOMAXPROCS 1)
// while the relay is quiet, and gives it back the runtime's default as soon
// as work needs more.
//
// At a steady trickle, a thousand single-row transactions a second, most of
// the relay's CPU goes to waking rather than to work: each event passes
// from the goroutine that reads PostgreSQL to the ones that encode and
// produce, and with a second processor idle every hand-off wakes another
// thread that spins, finds little, and parks again. With one processor
// the hand-offs stay on one thread. Measured with `make latency`'s set-up
// (docs/BENCHMARKS.md), at 1k/s that cuts the relay's CPU per event by a
// fifth, at-least-once and exactly-once alike. In a drain the same single
// processor would cost throughput, so the controller widens again within
// about a second of the load rising, a tenth of one from a trickle.
//
// What goes in: the process's CPU time (getrusage), sampled every
// Policy.Slow, or every Policy.Fast while narrow and busy. What comes out:
// runtime.GOMAXPROCS(1) once the CPU has stayed low for
// Policy.NarrowAfter, runtime.SetDefaultGOMAXPROCS after one busy sample,
// and a debug log line for each change. It owns the process's GOMAXPROCS
// while it runs, so only main starts it (a library never changes
// process-wide settings), and main does not when the GOMAXPROCS
// environment variable is set: an operator's number is kept as given.
package procs
