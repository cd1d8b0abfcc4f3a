package relaytest

import "time"

// T is the part of testing.TB this package calls.
type T interface {
	Helper()
	Name() string
	Failed() bool
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
	Skip(args ...any)
	Cleanup(func())
}

// WaitFor polls cond every 50 ms until it is true, failing t once timeout
// has passed; what names the condition in the failure.
func WaitFor(t T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	waitFor(t, timeout, func() string { return what }, cond)
}

// waitFor is WaitFor with what described when it times out (what was
// last seen, say).
func waitFor(t T, timeout time.Duration, what func() string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what())
		}
		time.Sleep(50 * time.Millisecond) // polling interval, not synchronisation
	}
}

// Tail returns the last n bytes of s, marked with "..." when cut.
func Tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
