package testtier

import (
	"errors"
	"flag"
	"os"
	"testing"
)

// Env is the environment variable that switches the service tier on: any
// value but "" and "0".
const Env = "CDC_RELAY_TEST_SERVICES"

// ErrOff is Check's error in a test binary while the service tier is off.
// Need skips with it; relaytest's lazy services skip the test that meets it.
var ErrOff = errors.New("this test starts PostgreSQL, Kafka, a schema registry, RabbitMQ or Java, and the service tier is off: run `make test`, or set " + Env + "=1 (after `make setup`) to run it")

// On reports whether the service tier is on.
func On() bool {
	v := os.Getenv(Env)
	return v != "" && v != "0"
}

// Check returns ErrOff when it runs in a test binary and the service tier
// is off, else nil. Programs that are not tests (make demo, make bench) are
// never stopped by it.
func Check() error {
	if testing.Testing() && !On() {
		return ErrOff
	}
	return nil
}

// Skipper is the part of testing.TB that Need calls.
type Skipper interface {
	Helper()
	Skip(args ...any)
}

// Need skips t unless the service tier is on. A test that starts a service
// without a starter that calls Check calls it first.
func Need(t Skipper) {
	t.Helper()
	if !On() {
		t.Skip(ErrOff)
	}
}

// Off reports whether err is (or wraps) ErrOff: a start refused because
// the service tier is off, which should skip the test, not fail it.
func Off(err error) bool { return errors.Is(err, ErrOff) }

// Lean reports whether the JVMs this process starts (a Kafka broker, a
// Connect worker) should start lean, to spend less of the machine's CPU: in
// a test binary that runs no benchmark. A whole make test is bound by the
// machine's 2 cores. Programs that are not tests (make bench, make demo)
// and test binaries that run benchmarks start them as in production.
func Lean() bool {
	if !testing.Testing() {
		return false
	}
	f := flag.Lookup("test.bench")
	return f == nil || f.Value.String() == ""
}

// QuickJIT is the JIT flag for a JVM that a test starts (Lean): C1 alone,
// which costs a broker about 40 % less CPU to start (3.6 against 6.1 CPU s
// here, 2026-12-07); nil otherwise, the full tiered JIT.
func QuickJIT() []string {
	if !Lean() {
		return nil
	}
	return []string{"-XX:TieredStopAtLevel=1"}
}
