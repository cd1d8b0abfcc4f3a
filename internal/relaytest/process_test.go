package relaytest

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/testtier"
)

func TestStartWaitOutput(t *testing.T) {
	p := Start(t, "/bin/sh", []string{"-c", "echo one; echo two >&2; echo one more; exit 3"}, Options{Name: "sh"})
	if got, want := p.Wait(30*time.Second), 3; got != want {
		t.Fatalf("exit code %d, want %d", got, want)
	}
	if got, want := p.Lines("one"), []string{"one", "one more"}; !slices.Equal(got, want) {
		t.Fatalf("Lines(one) = %q, want %q", got, want)
	}
	if got, want := p.Output(), "one\ntwo\none more\n"; got != want {
		t.Fatalf("Output() = %q, want %q", got, want)
	}
}

// TestStartHidesTierSwitch: a started process does not see the service
// tier's switch (the relay would warn of it), but sees the rest of the
// test's environment and Options.Env.
func TestStartHidesTierSwitch(t *testing.T) {
	t.Setenv(testtier.Env, "1")
	t.Setenv("RELAYTEST_KEPT", "kept")
	p := Start(t, "/bin/sh", []string{"-c", "echo ${" + testtier.Env + "-unset} $RELAYTEST_KEPT $RELAYTEST_ADDED"}, Options{Name: "sh", Env: []string{"RELAYTEST_ADDED=added"}})
	if code := p.Wait(30 * time.Second); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	if got, want := p.Output(), "unset kept added\n"; got != want {
		t.Fatalf("output %q, want %q", got, want)
	}
}

func TestKillAndTerminate(t *testing.T) {
	p := Start(t, "/bin/sh", []string{"-c", "exec sleep 60"}, Options{Name: "sleep"})
	p.Kill()
	select {
	case <-p.Done():
	default:
		t.Fatal("Done is open after Kill")
	}
	if got := p.ExitCode(); got != -1 {
		t.Fatalf("exit code after SIGKILL %d, want -1", got)
	}
	q := Start(t, "/bin/sh", []string{"-c", "exec sleep 60"}, Options{Name: "sleep"})
	if got := q.Terminate(); got != -1 {
		t.Fatalf("exit code after SIGTERM %d, want -1", got)
	}
}

func TestWaitFor(t *testing.T) {
	n := 0
	WaitFor(t, 10*time.Second, "the third call", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Fatalf("cond called %d times, want 3", n)
	}
}

func TestTail(t *testing.T) {
	for _, c := range []struct{ in, want string }{{"abcdef", "...def"}, {"abc", "abc"}} {
		if got := Tail(c.in, 3); got != c.want {
			t.Errorf("Tail(%q, 3) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestFreezeThaw(t *testing.T) {
	p := Start(t, "/bin/sh", []string{"-c", "exec sleep 60"}, Options{Name: "sleep"})
	state := func() string {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Pid()))
		if err != nil {
			t.Fatal(err)
		}
		// pid (comm) state ...
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		return f[0]
	}
	p.Freeze()
	WaitFor(t, 10*time.Second, "state T (stopped)", func() bool { return state() == "T" })
	p.Thaw()
	WaitFor(t, 10*time.Second, "state S (sleeping)", func() bool { return state() == "S" })
	p.Kill()
}
