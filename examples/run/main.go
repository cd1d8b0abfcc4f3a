// Command run is `make example`: it starts a private PostgreSQL 15, Kafka
// and schema registry, the relay, two instances of the loyalty consumer and
// the orders writer (binaries built by the Makefile into --bin), waits until
// every order is accrued and every cancellation reversed, prints a summary
// from the loyalty database and stops everything. Ctrl-C cleans up too.
// --mode message has the writer emit its events table-less (logical
// decoding messages, outbox.ModeMessage) instead of outbox rows; nothing
// else changes.
//
// Exit codes: 0 success, 1 failure, 2 bad flags.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/internal/freeport"
	"github.com/cdc-relay/cdc-relay/internal/kafkatest"
	"github.com/cdc-relay/cdc-relay/internal/relaytest"
)

func main() {
	bin := flag.String("bin", "bin", "directory holding cdc-relay, orders and loyalty")
	orders := flag.Int("orders", 300, "orders to place")
	mode := flag.String("mode", "table", "how orders writes its events: table (outbox rows) or message (table-less, logical decoding messages)")
	flag.Parse()
	if *orders < 1 || flag.NArg() > 0 || (*mode != "table" && *mode != "message") {
		fmt.Fprintln(os.Stderr, "example: --orders must be at least 1, --mode table or message, and there are no arguments")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, *bin, *orders, *mode)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "example:", err)
		os.Exit(1)
	}
}

// procs are the child processes, stopped on return.
type procs struct {
	mu   sync.Mutex
	list []*exec.Cmd
}

func (p *procs) start(name, bin string, args ...string) (*exec.Cmd, error) {
	cmd := exec.Command(bin, args...)
	log, err := os.Create(filepath.Join(os.TempDir(), "cdc-relay-example-"+name+".log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	fmt.Printf("%-10s started (log %s)\n", name, log.Name())
	p.mu.Lock()
	p.list = append(p.list, cmd)
	p.mu.Unlock()
	return cmd, nil
}

func (p *procs) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.list {
		c.Process.Signal(syscall.SIGTERM)
	}
	for _, c := range p.list {
		c.Wait()
	}
}

func run(ctx context.Context, bin string, orders int, mode string) error {
	svc, err := relaytest.StartServices(relaytest.ServiceOptions{
		Kafka: kafkatest.Options{ExtraConfig: map[string]string{"num.partitions": "3", "group.initial.rebalance.delay.ms": "0"}},
	})
	defer svc.Close()
	if err != nil {
		return err
	}
	pg, broker, registry := svc.PG, svc.Broker, svc.Registry
	fmt.Printf("services   PostgreSQL :%d, Kafka %s, registry %s\n", pg.Port(), broker.Addr(), registry.URL())
	url, err := pg.CreateDatabase(ctx, "shop")
	if err != nil {
		return err
	}
	ddl, err := os.ReadFile("docs/outbox.sql")
	if err != nil {
		return err
	}
	if err := pg.Exec(ctx, "shop", string(ddl)); err != nil {
		return err
	}
	var ps procs
	defer ps.stop()
	port, err := freeport.Get()
	if err != nil {
		return err
	}
	if _, err := ps.start("relay", filepath.Join(bin, "cdc-relay"), "run", "--pg-url", url, "--kafka-brokers", broker.Addr(),
		"--schema-registry-url", registry.URL(), "--schemas-dir", "testdata/schemas", "--metrics-addr", "127.0.0.1:"+strconv.Itoa(port)); err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	count := func(q string) int64 {
		var n int64
		if err := conn.QueryRow(ctx, q).Scan(&n); err != nil {
			return -1
		}
		return n
	}
	if err := wait(ctx, 60*time.Second, "the relay's slot", func() bool {
		return count("SELECT count(*) FROM pg_replication_slots WHERE active") == 1
	}); err != nil {
		return err
	}
	loyalty := []string{"--pg-url", url, "--kafka-brokers", broker.Addr(), "--schema-registry-url", registry.URL()}
	if _, err := ps.start("loyalty-1", filepath.Join(bin, "loyalty"), append(loyalty, "--setup")...); err != nil {
		return err
	}
	if err := wait(ctx, 60*time.Second, "the loyalty tables", func() bool {
		return count("SELECT count(*) FROM pg_tables WHERE tablename = 'loyalty_effects'") == 1
	}); err != nil {
		return err
	}
	if _, err := ps.start("loyalty-2", filepath.Join(bin, "loyalty"), loyalty...); err != nil {
		return err
	}
	writer, err := ps.start("orders", filepath.Join(bin, "orders"), "--pg-url", url, "--setup", "--orders", strconv.Itoa(orders), "--rate", "100", "--mode", mode)
	if err != nil {
		return err
	}
	if err := writer.Wait(); err != nil {
		return fmt.Errorf("orders: %w", err)
	}
	cancelled := count("SELECT count(*) FROM orders WHERE status = 'CANCELLED'")
	if err := wait(ctx, 120*time.Second, "every order accrued and every cancellation reversed", func() bool {
		return count("SELECT count(DISTINCT order_id) FROM bonus_accruals") == int64(orders) &&
			count("SELECT count(*) FROM bonus_accruals WHERE reversed") == cancelled
	}); err != nil {
		return err
	}
	fmt.Printf("\n%d orders placed, %d cancelled (--mode %s); %d events in the outbox table\n", orders, cancelled, mode, count("SELECT count(*) FROM outbox"))
	fmt.Printf("loyalty: %d accruals (%d reversed), %d events marked in processed_messages\n",
		count("SELECT count(*) FROM bonus_accruals"), count("SELECT count(*) FROM bonus_accruals WHERE reversed"),
		count("SELECT count(*) FROM processed_messages"))
	rows, err := conn.Query(ctx, "SELECT customer_id, points FROM loyalty_balances ORDER BY points DESC, customer_id LIMIT 5")
	if err != nil {
		return err
	}
	var top []string
	for rows.Next() {
		var c string
		var p int64
		rows.Scan(&c, &p)
		top = append(top, fmt.Sprintf("%s %d", c, p))
	}
	fmt.Printf("top balances: %s\n", strings.Join(top, ", "))
	return rows.Err()
}

// wait polls cond every 100 ms until it holds, the timeout passes or ctx ends.
func wait(ctx context.Context, timeout time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s", timeout, what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}
