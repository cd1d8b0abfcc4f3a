package relaytest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/internal/kafkatest"
	"github.com/cdc-relay/cdc-relay/internal/pgtest"
	"github.com/cdc-relay/cdc-relay/internal/registrytest"
	"github.com/cdc-relay/cdc-relay/internal/testtier"
)

// LazyOptions configure NewLazy.
type LazyOptions struct {
	// ServiceOptions configure the three services as for StartServices;
	// Ready is called as each one starts.
	ServiceOptions
	// PGReady, when set, runs once PostgreSQL started and before any caller
	// sees it (to create the package's database, say); its error fails the
	// start. Default nil.
	PGReady func(*pgtest.Cluster) error
}

// Lazy are one test package's PostgreSQL, Kafka and schema registry. Each
// starts when a test first uses it, at most once, and is then shared by
// every test of the package; a test that uses a service that could not
// start fails. TestMain calls Close after m.Run, which stops whatever
// started. Tests that use none start none.
type Lazy struct {
	// PG is the PostgreSQL cluster.
	PG *LazyCluster
	// Broker is the Kafka broker.
	Broker *LazyBroker
	// Registry is the schema registry.
	Registry *LazyRegistry
	// Apicurio is Apicurio Registry, the second registry that the
	// registry-facing tests run against (Registries).
	Apicurio *LazyApicurio
}

// NewLazy declares the services; it starts nothing.
func NewLazy(o LazyOptions) *Lazy {
	s := &Lazy{}
	s.PG = &LazyCluster{lazy[*pgtest.Cluster]{name: "postgres", group: s, ready: o.Ready,
		addr: func(c *pgtest.Cluster) string { return fmt.Sprintf("127.0.0.1:%d", c.Port()) },
		start: func() (*pgtest.Cluster, error) {
			c, err := pgtest.Start(o.PG)
			if err != nil || o.PGReady == nil {
				return c, err
			}
			if err := o.PGReady(c); err != nil {
				c.Close()
				return nil, err
			}
			return c, nil
		}}}
	s.Broker = &LazyBroker{lazy[*kafkatest.Broker]{name: "kafka", group: s, ready: o.Ready,
		addr:  (*kafkatest.Broker).Addr,
		start: func() (*kafkatest.Broker, error) { return kafkatest.Start(o.Kafka) }}}
	s.Registry = &LazyRegistry{lazy[*registrytest.Registry]{name: "registry", group: s, ready: o.Ready,
		addr:  (*registrytest.Registry).URL,
		start: registrytest.Start}}
	s.Apicurio = &LazyApicurio{lazy[*registrytest.Apicurio]{name: "apicurio", group: s, ready: o.Ready,
		addr:  (*registrytest.Apicurio).URL,
		start: registrytest.StartApicurio}}
	return s
}

// Close stops every service that started, in parallel, and joins their
// errors ("stop kafka: ..."). It starts nothing; any use after it fails.
func (s *Lazy) Close() error {
	if ap := s.Apicurio.l.take(); ap != nil {
		ap.Close()
	}
	svc := Services{PG: s.PG.l.take(), Broker: s.Broker.l.take(), Registry: s.Registry.l.take()}
	return svc.Close()
}

// Service is one of Lazy's services.
type Service interface {
	// Ensure starts the service unless it started already and returns the
	// start's error, the same on every call.
	Ensure() error
}

// Need starts those of services that have not started yet, in parallel,
// and fails t naming each one that could not start. While the service tier
// is off (testtier), it skips t instead and starts nothing.
func Need(t T, services ...Service) {
	t.Helper()
	errs := make([]error, len(services))
	var wg sync.WaitGroup
	for i, s := range services {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Ensure()
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); testtier.Off(err) {
		t.Skip(testtier.ErrOff)
	} else if err != nil {
		t.Fatalf("%v", err)
	}
}

// lazy starts one service on first use.
type lazy[S any] struct {
	name  string
	group *Lazy
	start func() (S, error)
	addr  func(S) string
	ready func(name, addr string, took time.Duration)

	mu     sync.Mutex // held while starting, so that callers wait for it
	tried  bool
	closed bool
	svc    S
	err    error
}

func (l *lazy[S]) ensure() (S, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var zero S
	if l.closed {
		return zero, fmt.Errorf("%s: used after the package's services were closed", l.name)
	}
	if !l.tried {
		l.tried = true
		began := time.Now()
		svc, err := l.start()
		if err != nil {
			l.err = fmt.Errorf("start %s: %w", l.name, err)
			return zero, l.err
		}
		l.svc = svc
		if l.ready != nil {
			l.ready(l.name, l.addr(svc), time.Since(began))
		}
	}
	return l.svc, l.err
}

// get returns the running service. When it cannot start (or the service
// tier is off), it stops the other services of the package (a panic skips
// TestMain's Close) and panics: methods without a t have no other way to
// fail the test, which should have called Need first.
func (l *lazy[S]) get() S {
	svc, err := l.ensure()
	if err != nil {
		l.group.Close()
		panic(fmt.Sprintf("relaytest: %v\n(call Need(t) before using %s to fail or skip only the test)", strings.TrimSpace(err.Error()), l.name))
	}
	return svc
}

func (l *lazy[S]) need(t T) S {
	t.Helper()
	svc, err := l.ensure()
	if testtier.Off(err) {
		t.Skip(testtier.ErrOff)
	} else if err != nil {
		t.Fatalf("%v", err)
	}
	return svc
}

// take marks the service closed and returns it if it started (else the
// zero S), for Close to stop.
func (l *lazy[S]) take() S {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	svc := l.svc
	var zero S
	l.svc = zero
	return svc
}

// LazyCluster is the package's PostgreSQL cluster, started on first use.
// Its methods are pgtest.Cluster's but Close (Lazy.Close stops it) and
// Promote; each starts the cluster first and panics when it cannot (see
// Need).
type LazyCluster struct{ l lazy[*pgtest.Cluster] }

// Ensure starts the cluster unless it started already.
func (c *LazyCluster) Ensure() error { _, err := c.l.ensure(); return err }

// Need returns the running cluster, starting it first, or fails t.
func (c *LazyCluster) Need(t T) *pgtest.Cluster { t.Helper(); return c.l.need(t) }

// Get returns the running cluster, starting it first.
func (c *LazyCluster) Get() *pgtest.Cluster { return c.l.get() }

// Version is pgtest.Cluster.Version.
func (c *LazyCluster) Version() int { return c.Get().Version() }

// LogPath is pgtest.Cluster.LogPath.
func (c *LazyCluster) LogPath() string { return c.Get().LogPath() }

// Port is pgtest.Cluster.Port.
func (c *LazyCluster) Port() int { return c.Get().Port() }

// Dir is pgtest.Cluster.Dir.
func (c *LazyCluster) Dir() string { return c.Get().Dir() }

// URL is pgtest.Cluster.URL.
func (c *LazyCluster) URL(db string) string { return c.Get().URL(db) }

// Start is pgtest.Cluster.Start: it starts the server again after Stop.
func (c *LazyCluster) Start() error { return c.Get().Start() }

// Stop is pgtest.Cluster.Stop.
func (c *LazyCluster) Stop(mode string) error { return c.Get().Stop(mode) }

// Restart is pgtest.Cluster.Restart.
func (c *LazyCluster) Restart(mode string) error { return c.Get().Restart(mode) }

// Exec is pgtest.Cluster.Exec.
func (c *LazyCluster) Exec(ctx context.Context, db, sql string, args ...any) error {
	return c.Get().Exec(ctx, db, sql, args...)
}

// CreateDatabase is pgtest.Cluster.CreateDatabase.
func (c *LazyCluster) CreateDatabase(ctx context.Context, name string) (string, error) {
	return c.Get().CreateDatabase(ctx, name)
}

// LogTail is pgtest.Cluster.LogTail.
func (c *LazyCluster) LogTail(n int) string { return c.Get().LogTail(n) }

// Connect is pgtest.Cluster.Connect.
func (c *LazyCluster) Connect(ctx context.Context, db string) (*pgx.Conn, error) {
	return c.Get().Connect(ctx, db)
}

// SetHBA is pgtest.Cluster.SetHBA.
func (c *LazyCluster) SetHBA(ctx context.Context, lines ...string) error {
	return c.Get().SetHBA(ctx, lines...)
}

// LazyBroker is the package's Kafka broker, started on first use. Its
// methods are kafkatest.Broker's (but Close and Kill); each starts the
// broker first and panics when it cannot (see Need).
type LazyBroker struct{ l lazy[*kafkatest.Broker] }

// Ensure starts the broker unless it started already.
func (b *LazyBroker) Ensure() error { _, err := b.l.ensure(); return err }

// Need returns the running broker, starting it first, or fails t.
func (b *LazyBroker) Need(t T) *kafkatest.Broker { t.Helper(); return b.l.need(t) }

// Get returns the running broker, starting it first.
func (b *LazyBroker) Get() *kafkatest.Broker { return b.l.get() }

// Addr is kafkatest.Broker.Addr.
func (b *LazyBroker) Addr() string { return b.Get().Addr() }

// SASLAddr is kafkatest.Broker.SASLAddr.
func (b *LazyBroker) SASLAddr() string { return b.Get().SASLAddr() }

// SASLSSLAddr is kafkatest.Broker.SASLSSLAddr.
func (b *LazyBroker) SASLSSLAddr() string { return b.Get().SASLSSLAddr() }

// SSLAddr is kafkatest.Broker.SSLAddr.
func (b *LazyBroker) SSLAddr() string { return b.Get().SSLAddr() }

// LogPath is kafkatest.Broker.LogPath.
func (b *LazyBroker) LogPath() string { return b.Get().LogPath() }

// Dir is kafkatest.Broker.Dir.
func (b *LazyBroker) Dir() string { return b.Get().Dir() }

// Stop is kafkatest.Broker.Stop.
func (b *LazyBroker) Stop() error { return b.Get().Stop() }

// Restart is kafkatest.Broker.Restart.
func (b *LazyBroker) Restart() error { return b.Get().Restart() }

// SchemaRegistry is a registry that the registry-facing tests run against,
// through its Confluent-compatible API: LazyRegistry (AxonOps) or
// LazyApicurio.
type SchemaRegistry interface {
	Service
	// Name names the registry's subtest: "axonops" or "apicurio".
	Name() string
	// URL is the relay's --schema-registry-url for it.
	URL() string
	// Do, Register, Versions, LatestID and SetLevel are
	// registrytest.Registry's REST helpers.
	Do(t testing.TB, method, path string, in, out any) int
	Register(t testing.TB, subject, schema string) int
	Versions(t testing.TB, subject string) []int
	LatestID(t testing.TB, subject string) int
	SetLevel(t testing.TB, subject, level string)
}

var (
	_ SchemaRegistry = (*LazyRegistry)(nil)
	_ SchemaRegistry = (*LazyApicurio)(nil)
)

// Registries are the registries every registry-facing test runs against,
// each as a subtest named by its Name: AxonOps, then Apicurio. Each starts
// on first use, at most once per test binary.
func (s *Lazy) Registries() []SchemaRegistry { return []SchemaRegistry{s.Registry, s.Apicurio} }

// LazyRegistry is the package's schema registry, started on first use. Its
// methods are registrytest.Registry's (but Close); each starts the
// registry first and panics when it cannot (see Need).
type LazyRegistry struct{ l lazy[*registrytest.Registry] }

// Ensure starts the registry unless it started already.
func (r *LazyRegistry) Ensure() error { _, err := r.l.ensure(); return err }

// Need returns the running registry, starting it first, or fails t.
func (r *LazyRegistry) Need(t T) *registrytest.Registry { t.Helper(); return r.l.need(t) }

// Get returns the running registry, starting it first.
func (r *LazyRegistry) Get() *registrytest.Registry { return r.l.get() }

// URL is registrytest.Registry.URL.
func (r *LazyRegistry) URL() string { return r.Get().URL() }

// LogPath is registrytest.Registry.LogPath.
func (r *LazyRegistry) LogPath() string { return r.Get().LogPath() }

// Stop is registrytest.Registry.Stop.
func (r *LazyRegistry) Stop() error { return r.Get().Stop() }

// Restart is registrytest.Registry.Restart.
func (r *LazyRegistry) Restart() error { return r.Get().Restart() }

// The REST helpers take a t, so a registry that cannot start fails just
// that test.

// Do is registrytest.Registry.Do.
func (r *LazyRegistry) Do(t testing.TB, method, path string, in, out any) int {
	t.Helper()
	return r.Need(t).Do(t, method, path, in, out)
}

// Register is registrytest.Registry.Register.
func (r *LazyRegistry) Register(t testing.TB, subject, schema string) int {
	t.Helper()
	return r.Need(t).Register(t, subject, schema)
}

// Versions is registrytest.Registry.Versions.
func (r *LazyRegistry) Versions(t testing.TB, subject string) []int {
	t.Helper()
	return r.Need(t).Versions(t, subject)
}

// LatestID is registrytest.Registry.LatestID.
func (r *LazyRegistry) LatestID(t testing.TB, subject string) int {
	t.Helper()
	return r.Need(t).LatestID(t, subject)
}

// SetLevel is registrytest.Registry.SetLevel.
func (r *LazyRegistry) SetLevel(t testing.TB, subject, level string) {
	t.Helper()
	r.Need(t).SetLevel(t, subject, level)
}

// Name is "axonops".
func (r *LazyRegistry) Name() string { return "axonops" }

// LazyApicurio is the package's Apicurio Registry, started on first use
// (about 5 s on an idle machine, Java 21+) and stopped by Lazy.Close. Its
// methods are registrytest.Apicurio's (but Close); each starts the registry
// first.
type LazyApicurio struct{ l lazy[*registrytest.Apicurio] }

// Ensure starts the registry unless it started already.
func (a *LazyApicurio) Ensure() error { _, err := a.l.ensure(); return err }

// Need starts the registry if needed and returns it; t fails when it
// cannot start.
func (a *LazyApicurio) Need(t T) *registrytest.Apicurio { t.Helper(); return a.l.need(t) }

// Get returns the running registry (see LazyCluster.Get).
func (a *LazyApicurio) Get() *registrytest.Apicurio { return a.l.get() }

// Name is "apicurio".
func (a *LazyApicurio) Name() string { return "apicurio" }

// URL is registrytest.Apicurio.URL, the Confluent-compatible API.
func (a *LazyApicurio) URL() string { return a.Get().URL() }

// RegistryV2URL is registrytest.Apicurio.RegistryV2URL.
func (a *LazyApicurio) RegistryV2URL() string { return a.Get().RegistryV2URL() }

// LogPath is registrytest.Apicurio.LogPath.
func (a *LazyApicurio) LogPath() string { return a.Get().LogPath() }

// Do is registrytest.Apicurio.Do.
func (a *LazyApicurio) Do(t testing.TB, method, path string, in, out any) int {
	t.Helper()
	return a.Need(t).Do(t, method, path, in, out)
}

// Register is registrytest.Apicurio.Register.
func (a *LazyApicurio) Register(t testing.TB, subject, schema string) int {
	t.Helper()
	return a.Need(t).Register(t, subject, schema)
}

// Versions is registrytest.Apicurio.Versions.
func (a *LazyApicurio) Versions(t testing.TB, subject string) []int {
	t.Helper()
	return a.Need(t).Versions(t, subject)
}

// LatestID is registrytest.Apicurio.LatestID.
func (a *LazyApicurio) LatestID(t testing.TB, subject string) int {
	t.Helper()
	return a.Need(t).LatestID(t, subject)
}

// SetLevel is registrytest.Apicurio.SetLevel.
func (a *LazyApicurio) SetLevel(t testing.TB, subject, level string) {
	t.Helper()
	a.Need(t).SetLevel(t, subject, level)
}
