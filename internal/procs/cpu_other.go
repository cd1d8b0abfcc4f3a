//go:build !unix

package procs

import "time"

// cpuTime cannot read the process's CPU time here; Run does nothing.
func cpuTime() (time.Duration, bool) { return 0, false }
