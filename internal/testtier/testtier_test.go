package testtier

import (
	"fmt"
	"strings"
	"testing"
)

// skipT records Skip instead of stopping the test.
type skipT struct {
	*testing.T
	skipped []string
}

func (s *skipT) Skip(args ...any) { s.skipped = append(s.skipped, fmt.Sprint(args...)) }

var _ Skipper = (*skipT)(nil)

// TestTier: the tier is on for any value but "" and "0"; while it is off,
// Check refuses in a test binary and Need skips saying how to run the test.
func TestTier(t *testing.T) {
	for _, tc := range []struct {
		value string
		on    bool
	}{{"", false}, {"0", false}, {"1", true}, {"yes", true}} {
		t.Run(fmt.Sprintf("%q", tc.value), func(t *testing.T) {
			t.Setenv(Env, tc.value)
			if got := On(); got != tc.on {
				t.Fatalf("On() = %v, want %v", got, tc.on)
			}
			err := Check()
			if got := Off(err); got == tc.on {
				t.Fatalf("Check() = %v with the tier on = %v", err, tc.on)
			}
			st := &skipT{T: t}
			Need(st)
			if got := len(st.skipped) == 1; got == tc.on {
				t.Fatalf("Need skipped %q with the tier on = %v", st.skipped, tc.on)
			}
			for _, s := range st.skipped {
				if !strings.Contains(s, "make test") || !strings.Contains(s, Env+"=1") {
					t.Errorf("skip message %q does not say how to run the test", s)
				}
			}
		})
	}
}

// TestOffWrapped: a starter's error that wraps ErrOff is still Off.
func TestOffWrapped(t *testing.T) {
	if !Off(fmt.Errorf("start kafka: %w", ErrOff)) {
		t.Fatal("Off of a wrapped ErrOff = false")
	}
	if Off(fmt.Errorf("start kafka: %s", "no libs")) {
		t.Fatal("Off of another error = true")
	}
}

// TestQuickJIT: a test binary that runs no benchmark starts its JVMs with
// C1 alone.
func TestQuickJIT(t *testing.T) {
	if got := QuickJIT(); len(got) != 1 || got[0] != "-XX:TieredStopAtLevel=1" {
		t.Errorf("QuickJIT() in a test = %q, want [-XX:TieredStopAtLevel=1]", got)
	}
}
