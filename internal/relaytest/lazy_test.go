package relaytest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cdc-relay/cdc-relay/internal/pgtest"
	"github.com/cdc-relay/cdc-relay/internal/testtier"
)

// fakeT records Fatalf and Skip instead of stopping the test.
type fakeT struct {
	*testing.T
	fatal, skipped []string
}

func (f *fakeT) Fatalf(format string, args ...any) {
	f.fatal = append(f.fatal, fmt.Sprintf(format, args...))
}

func (f *fakeT) Skip(args ...any) { f.skipped = append(f.skipped, fmt.Sprint(args...)) }

var _ T = (*fakeT)(nil)

// TestLazyNeedSkipsWhileOff: while the service tier is off, Need skips
// the test, saying how to run it, and starts nothing.
func TestLazyNeedSkipsWhileOff(t *testing.T) {
	t.Setenv(testtier.Env, "")
	s := NewLazy(LazyOptions{})
	defer s.Close()
	ft := &fakeT{T: t}
	Need(ft, s.PG, s.Broker, s.Registry, s.Apicurio)
	if len(ft.fatal) != 0 || len(ft.skipped) != 1 {
		t.Fatalf("Need failed %q and skipped %q, want one skip", ft.fatal, ft.skipped)
	}
	if !strings.Contains(ft.skipped[0], testtier.Env+"=1") {
		t.Errorf("skip %q does not say how to run the test", ft.skipped[0])
	}
	ft = &fakeT{T: t}
	s.Broker.Need(ft)
	if len(ft.fatal) != 0 || len(ft.skipped) != 1 {
		t.Fatalf("Broker.Need failed %q and skipped %q, want one skip", ft.fatal, ft.skipped)
	}
}

// TestLazyNeedFails: with the service tier on but nothing installed where
// the starters look, no service can start, so Need fails the test naming
// each one, a second use fails with the same error without starting
// again, and a use without a t panics saying which service could not
// start.
func TestLazyNeedFails(t *testing.T) {
	none := t.TempDir()
	t.Setenv(testtier.Env, "1")
	t.Setenv("CDC_RELAY_CACHE", none)
	t.Setenv("CDC_RELAY_PG_ROOT", none)
	t.Setenv("CDC_RELAY_KAFKA_LIBS", none+"/kafka")
	t.Setenv("CDC_RELAY_SCHEMA_REGISTRY_BIN", none+"/schema-registry")
	s := NewLazy(LazyOptions{ServiceOptions: ServiceOptions{PG: pgtest.Options{Version: 13}}})
	defer s.Close()
	ft := &fakeT{T: t}
	Need(ft, s.PG, s.Broker, s.Registry, s.Apicurio)
	if len(ft.fatal) != 1 || len(ft.skipped) != 0 {
		t.Fatalf("Need failed %q and skipped %q, want one failure", ft.fatal, ft.skipped)
	}
	for _, want := range []string{"start postgres: pgtest:", "start kafka: kafkatest:", "start registry: registrytest:", "start apicurio: registrytest:"} {
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
		if !strings.Contains(p, "start registry: registrytest:") {
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
