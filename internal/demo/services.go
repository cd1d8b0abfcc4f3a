package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/internal/kafkatest"
	"github.com/cdc-relay/cdc-relay/internal/relaytest"
)

// startServices starts PostgreSQL, Kafka and the schema registry in parallel
// and prints one line for each as it becomes ready. It waits for all three,
// even after a failure or Ctrl-C, so that close can stop whatever started.
func (d *demo) startServices() error {
	svc, err := relaytest.StartServices(relaytest.ServiceOptions{
		Ready: func(name, addr string, took time.Duration) {
			switch name {
			case "postgres":
				addr += " (PostgreSQL 15)"
			case "kafka":
				addr += " (Kafka " + kafkatest.Version + ")"
			}
			fmt.Printf("%-11s %s in %s\n", name, addr, took.Round(time.Millisecond))
		},
	})
	d.svc = svc
	d.pg, d.broker, d.registry = svc.PG, svc.Broker, svc.Registry
	return err
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
	if d.svc != nil {
		for _, up := range []struct {
			name string
			ok   bool
		}{{"registry", d.registry != nil}, {"kafka", d.broker != nil}, {"postgres", d.pg != nil}} {
			if up.ok {
				stopped = append(stopped, up.name)
			}
		}
		if err := d.svc.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		}
	}
	if d.rabbit != nil {
		d.rabbit.Close()
		stopped = append(stopped, "rabbitmq")
	}
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
