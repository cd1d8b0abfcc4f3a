package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/internal/kafkatest"
	"github.com/cdc-relay/cdc-relay/internal/pgtest"
	"github.com/cdc-relay/cdc-relay/internal/registrytest"
)

// startServices starts PostgreSQL, Kafka and the schema registry in parallel
// and prints one line for each as it becomes ready. It waits for all three,
// even after a failure or Ctrl-C, so that close can stop whatever started.
func (d *demo) startServices() error {
	type result struct {
		name, addr string
		took       time.Duration
		err        error
	}
	// Each goroutine sets only its own field of d before it sends its result,
	// so the receive below orders that write before any read.
	results := make(chan result, 3)
	start := func(name string, f func() (string, error)) {
		t := time.Now()
		addr, err := f()
		results <- result{name, addr, time.Since(t), err}
	}
	go start("postgres", func() (string, error) {
		c, err := pgtest.Start(pgtest.Options{})
		if err != nil {
			return "", err
		}
		d.pg = c
		return fmt.Sprintf("127.0.0.1:%d (PostgreSQL 15)", c.Port()), nil
	})
	go start("kafka", func() (string, error) {
		b, err := kafkatest.Start(kafkatest.Options{})
		if err != nil {
			return "", err
		}
		d.broker = b
		return b.Addr() + " (Kafka " + kafkatest.Version + ")", nil
	})
	go start("registry", func() (string, error) {
		r, err := registrytest.Start()
		if err != nil {
			return "", err
		}
		d.registry = r
		return r.URL(), nil
	})
	var errs []error
	for range 3 {
		r := <-results
		if r.err != nil {
			errs = append(errs, fmt.Errorf("start %s: %w", r.name, r.err))
			continue
		}
		fmt.Printf("%-11s %s in %s\n", r.name, r.addr, r.took.Round(time.Millisecond))
	}
	return errors.Join(errs...)
}

// createOutbox creates database demo, applies ddl (the outbox table) and
// opens the connection the writer uses. It returns the database's URL.
func (d *demo) createOutbox(ctx context.Context, ddl []byte) (string, error) {
	url, err := d.pg.CreateDatabase(ctx, dbName)
	if err != nil {
		return "", err
	}
	if err := d.pg.Exec(ctx, dbName, string(ddl)); err != nil {
		return "", fmt.Errorf("apply %s: %w", d.opts.outboxSQL, err)
	}
	if d.conn, err = pgx.Connect(ctx, url); err != nil {
		return "", fmt.Errorf("connect to %s: %w", dbName, err)
	}
	fmt.Printf("database    %s with the outbox table from %s\n", dbName, d.opts.outboxSQL)
	return url, nil
}

// useTempRoot points TMPDIR at a new dir of the demo's own, so that every
// temp dir the helpers create lives below it and close can remove even what
// a start cut short by Ctrl-C left behind (pgtest does not remove its dir
// when initdb fails).
func (d *demo) useTempRoot() error {
	dir, err := os.MkdirTemp("", "cdc-relay-demo-")
	if err != nil {
		return err
	}
	d.tmp = dir
	// The postgres user must reach the data dir that pgtest creates inside.
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	return os.Setenv("TMPDIR", dir)
}

// close stops the consumer, the relay and the services, removing their temp
// dirs. It is safe in any state the demo reached.
func (d *demo) close() {
	t := time.Now()
	var stopped []string
	if d.consumer != nil {
		d.consumer.close()
	}
	if d.relay != nil {
		if _, err := d.relay.stop(stopTimeout); err != nil {
			fmt.Fprintf(os.Stderr, "demo: stop relay: %v\n", err)
		}
		stopped = append(stopped, "relay")
	}
	if d.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		d.conn.Close(ctx)
		cancel()
	}
	var wg sync.WaitGroup
	closeAsync := func(name string, f func() error) {
		stopped = append(stopped, name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(); err != nil {
				fmt.Fprintf(os.Stderr, "demo: stop %s: %v\n", name, err)
			}
		}()
	}
	if d.registry != nil {
		closeAsync("registry", d.registry.Close)
	}
	if d.broker != nil {
		closeAsync("kafka", d.broker.Close)
	}
	if d.pg != nil {
		closeAsync("postgres", d.pg.Close)
	}
	wg.Wait()
	if d.tmp != "" {
		if stopStrayPostgres(d.tmp) {
			stopped = append(stopped, "a postgres whose start was interrupted")
		}
		if err := os.RemoveAll(d.tmp); err != nil {
			fmt.Fprintf(os.Stderr, "demo: remove %s: %v\n", d.tmp, err)
		}
	}
	if len(stopped) > 0 {
		fmt.Printf("stopped     %s; temp dirs removed (%s)\n", strings.Join(stopped, ", "), since(t))
	}
}

// stopStrayPostgres stops a postmaster left running below dir, which happens
// when Ctrl-C reaches pg_ctl (it shares the demo's process group) after it
// started the server but before pgtest.Start returned. It reports whether
// there was one.
func stopStrayPostgres(dir string) bool {
	pidFiles, _ := filepath.Glob(filepath.Join(dir, "cdc-relay-pg-*", "data", "postmaster.pid"))
	found := false
	for _, f := range pidFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		first, _, _ := strings.Cut(string(b), "\n")
		pid, err := strconv.Atoi(strings.TrimSpace(first))
		if err != nil || pid <= 0 || syscall.Kill(pid, syscall.SIGQUIT) != nil { // SIGQUIT: immediate shutdown
			continue
		}
		found = true
		poll(context.Background(), 10*time.Second, func(context.Context) (bool, error) {
			return syscall.Kill(pid, 0) != nil, nil
		})
	}
	return found
}
