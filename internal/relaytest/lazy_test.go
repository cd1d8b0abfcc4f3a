package relaytest

import (
	"fmt"
	"strings"
	"testing"
)

// fatalT records Fatalf instead of stopping the test.
type fatalT struct {
	*testing.T
	fatal []string
}

func (f *fatalT) Fatalf(format string, args ...any) {
	f.fatal = append(f.fatal, fmt.Sprintf(format, args...))
}

var _ T = (*fatalT)(nil)

// TestLazyNeedFails: with CDC_RELAY_TEST_NO_SERVICES set no service can
// start, so Need fails the test naming each one, a second use fails with
// the same error without starting again, and a use without a t panics
// saying which service could not start.
func TestLazyNeedFails(t *testing.T) {
	t.Setenv("CDC_RELAY_TEST_NO_SERVICES", "1")
	s := NewLazy(LazyOptions{})
	defer s.Close()
	ft := &fatalT{T: t}
	Need(ft, s.PG, s.Broker, s.Registry, s.Apicurio)
	if len(ft.fatal) != 1 {
		t.Fatalf("Need failed the test %d times, want once: %q", len(ft.fatal), ft.fatal)
	}
	for _, want := range []string{"start postgres: pgtest: CDC_RELAY_TEST_NO_SERVICES", "start kafka: kafkatest: CDC_RELAY_TEST_NO_SERVICES", "start registry: registrytest: CDC_RELAY_TEST_NO_SERVICES", "start apicurio: registrytest: CDC_RELAY_TEST_NO_SERVICES"} {
		if !strings.Contains(ft.fatal[0], want) {
			t.Errorf("Need's failure %q does not say %q", ft.fatal[0], want)
		}
	}
	first := s.Broker.Ensure()
	if again := s.Broker.Ensure(); again != first {
		t.Errorf("second Ensure = %v, want the first start's error %v", again, first)
	}
	defer func() {
		p := fmt.Sprint(recover())
		if !strings.Contains(p, "start registry: registrytest: CDC_RELAY_TEST_NO_SERVICES") {
			t.Errorf("URL on a registry that cannot start: panic %q, want one naming the start's error", p)
		}
	}()
	s.Registry.URL()
	t.Error("URL on a registry that cannot start returned")
}

// TestLazyCloseStartsNothing: Close of services nobody used stops nothing
// and starts nothing; a use after it fails.
func TestLazyCloseStartsNothing(t *testing.T) {
	s := NewLazy(LazyOptions{})
	if err := s.Close(); err != nil {
		t.Fatalf("Close of services nobody used: %v", err)
	}
	if s.PG.l.tried || s.Broker.l.tried || s.Registry.l.tried || s.Apicurio.l.tried {
		t.Fatal("Close started a service")
	}
	if err := s.PG.Ensure(); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("Ensure after Close = %v, want an error saying the services were closed", err)
	}
}

// TestRegistries: the registry-facing tests run against AxonOps, then
// Apicurio, named so in their subtests; listing them starts neither.
func TestRegistries(t *testing.T) {
	s := NewLazy(LazyOptions{})
	defer s.Close()
	var got []string
	for _, r := range s.Registries() {
		got = append(got, r.Name())
	}
	if strings.Join(got, ",") != "axonops,apicurio" {
		t.Fatalf("Registries = %v, want axonops then apicurio", got)
	}
	if s.Registry.l.tried || s.Apicurio.l.tried {
		t.Fatal("Registries started a registry")
	}
}
