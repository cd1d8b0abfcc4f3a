package relaytest

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/kafkatest"
	"github.com/cdc-relay/cdc-relay/internal/pgtest"
	"github.com/cdc-relay/cdc-relay/internal/registrytest"
)

// ServiceOptions configure StartServices.
type ServiceOptions struct {
	// PG configures the PostgreSQL cluster; default pgtest's defaults.
	PG pgtest.Options
	// Kafka configures the broker; default kafkatest's defaults.
	Kafka kafkatest.Options
	// Ready, when set, is called once for each service that started, in the
	// order they became ready, with its name ("postgres", "kafka",
	// "registry"), its address (host:port; the registry's URL) and how long
	// it took; default nil.
	Ready func(name, addr string, took time.Duration)
}

// Services are a private PostgreSQL cluster, Kafka broker and schema
// registry; a field is nil when that service did not start.
type Services struct {
	// PG is the PostgreSQL cluster.
	PG *pgtest.Cluster
	// Broker is the Kafka broker.
	Broker *kafkatest.Broker
	// Registry is the schema registry.
	Registry *registrytest.Registry
}

// StartServices starts the three services in parallel and waits for all of
// them, even after one failed, so that Close stops whatever started. The
// Services are never nil; the error joins each failure ("start kafka: ...").
func StartServices(o ServiceOptions) (*Services, error) {
	s := &Services{}
	type result struct {
		name, addr string
		took       time.Duration
		err        error
	}
	// Each goroutine sets only its own field of s before it sends, so the
	// receive below orders that write before any read.
	results := make(chan result, 3)
	start := func(name string, f func() (string, error)) {
		t := time.Now()
		addr, err := f()
		results <- result{name, addr, time.Since(t), err}
	}
	go start("postgres", func() (string, error) {
		c, err := pgtest.Start(o.PG)
		if err != nil {
			return "", err
		}
		s.PG = c
		return fmt.Sprintf("127.0.0.1:%d", c.Port()), nil
	})
	go start("kafka", func() (string, error) {
		b, err := kafkatest.Start(o.Kafka)
		if err != nil {
			return "", err
		}
		s.Broker = b
		return b.Addr(), nil
	})
	go start("registry", func() (string, error) {
		r, err := registrytest.Start()
		if err != nil {
			return "", err
		}
		s.Registry = r
		return r.URL(), nil
	})
	var errs []error
	for range 3 {
		r := <-results
		if r.err != nil {
			errs = append(errs, fmt.Errorf("start %s: %w", r.name, r.err))
			continue
		}
		if o.Ready != nil {
			o.Ready(r.name, r.addr, r.took)
		}
	}
	return s, errors.Join(errs...)
}

// Close stops every service that started, in parallel, and joins their
// errors ("stop kafka: ...").
func (s *Services) Close() error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	stop := func(name string, f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("stop %s: %w", name, err))
				mu.Unlock()
			}
		}()
	}
	if s.Registry != nil {
		stop("registry", s.Registry.Close)
	}
	if s.Broker != nil {
		stop("kafka", s.Broker.Close)
	}
	if s.PG != nil {
		stop("postgres", s.PG.Close)
	}
	wg.Wait()
	return errors.Join(errs...)
}
