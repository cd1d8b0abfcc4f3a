// Command demo shows cdc-relay end to end: it starts a private PostgreSQL 15,
// Kafka and schema registry on random ports, runs the relay binary, writes a
// few outbox events plus one invalid one, prints every record a franz-go
// consumer reads back (Avro values decoded through the registry), then a
// summary, and stops everything. `make demo` runs it; Ctrl-C cleans up too.
//
// With --broker rabbitmq (`make demo BROKER=rabbitmq`) it starts PostgreSQL
// and a private RabbitMQ node instead, declares a consumer's quorum queue
// bound to the relay's exchange, runs the relay with JSON values, and
// prints every message an amqp091-go consumer reads from the queue, and the
// invalid event read back from the outbox.dlq stream, with their AMQP
// properties.
//
// Exit codes: 0 success, 1 failure, 2 bad flags, 130 interrupted.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/internal/freeport"
	"github.com/cdc-relay/cdc-relay/internal/kafkatest"
	"github.com/cdc-relay/cdc-relay/internal/pgtest"
	"github.com/cdc-relay/cdc-relay/internal/rabbittest"
	"github.com/cdc-relay/cdc-relay/internal/registrytest"
	"github.com/cdc-relay/cdc-relay/internal/relaytest"
)

// Deadlines for each wait; every one also ends on Ctrl-C.
const (
	readyTimeout   = 60 * time.Second // relay answers /readyz 200
	recordsTimeout = 60 * time.Second // every written event is in Kafka
	settleTimeout  = 15 * time.Second // slot confirmed and metrics counted
	stopTimeout    = 40 * time.Second // relay exits after SIGTERM (its drain allows 30 s)
)

// Names the relay uses by default, which the demo relies on.
const (
	dbName     = "demo"
	slotName   = "cdc_relay"
	eventTopic = "outbox.event.Order" // outbox.event.{aggregate_type}
	dlqTopic   = "outbox.dlq"
)

// options are the demo's flags.
type options struct {
	relayBin   string // the cdc-relay binary
	broker     string // kafka or rabbitmq
	events     int    // valid events to write
	outboxSQL  string // DDL of the outbox table
	schemasDir string // .avsc files passed to the relay
}

// main parses flags, runs the demo under a context that Ctrl-C cancels, and
// exits with its code.
func main() {
	var o options
	flag.StringVar(&o.relayBin, "relay", "bin/cdc-relay", "cdc-relay binary to run (build it with make build)")
	flag.StringVar(&o.broker, "broker", "kafka", "kafka or rabbitmq: the broker the relay publishes to")
	flag.IntVar(&o.events, "events", 12, "valid events to write; one invalid event is added")
	flag.StringVar(&o.outboxSQL, "outbox-sql", "docs/outbox.sql", "DDL of the outbox table")
	flag.StringVar(&o.schemasDir, "schemas-dir", "testdata/schemas", "directory of .avsc files for the relay")
	flag.Parse()
	if o.events < 1 || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "demo: --events must be at least 1 and there are no arguments")
		os.Exit(2)
	}
	if o.broker != "kafka" && o.broker != "rabbitmq" {
		fmt.Fprintf(os.Stderr, "demo: --broker must be kafka or rabbitmq, not %q\n", o.broker)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, o)
	stop()
	os.Exit(code)
}

// demo holds everything started, so that close can stop it in any state.
type demo struct {
	opts     options
	tmp      string              // holds every temp dir the helpers create
	svc      *relaytest.Services // the three below, closed together
	pg       *pgtest.Cluster
	broker   *kafkatest.Broker
	registry *registrytest.Registry
	rabbit   *rabbittest.Node // with --broker rabbitmq, instead of the three above
	conn     *pgx.Conn        // to database demo: writer and summary queries
	relay    *relay
	consumer reader
}

// reader is what the summary needs of a consumer: the Kafka one (consumer)
// or the RabbitMQ one (rabbitConsumer).
type reader interface {
	// await prints every message until each of want has arrived, or ctx ends.
	await(ctx context.Context, want []written) error
	// missing lists the events of want that have not arrived.
	missing(want []written) string
	// counts describes how many messages each topic or queue held.
	counts() string
	// duplicates counts messages beyond the first for each id.
	duplicates() int
	close()
}

// run runs the demo, always cleans up, and returns the exit code.
func run(ctx context.Context, o options) int {
	began := time.Now()
	d := &demo{opts: o}
	err := d.run(ctx)
	code := 0
	switch {
	case err == nil:
	case ctx.Err() != nil:
		fmt.Fprintln(os.Stderr, "demo: interrupted; stopping everything")
		code = 130
	default:
		fmt.Fprintf(os.Stderr, "demo: FAILED: %v\n", err)
		code = 1
	}
	d.close()
	if code == 0 {
		fmt.Printf("demo: ok in %s\n", since(began))
	}
	return code
}

// run goes through the steps in order; the first failure ends it.
func (d *demo) run(ctx context.Context) error {
	relayBin, err := filepath.Abs(d.opts.relayBin)
	if err != nil {
		return err
	}
	if _, err := os.Stat(relayBin); err != nil {
		return fmt.Errorf("relay binary: %w (run make build)", err)
	}
	ddl, err := os.ReadFile(d.opts.outboxSQL)
	if err != nil {
		return fmt.Errorf("read the outbox DDL: %w (run the demo from the repository root)", err)
	}
	if _, err := os.Stat(d.opts.schemasDir); err != nil {
		return fmt.Errorf("schemas dir: %w (run the demo from the repository root)", err)
	}
	if err := d.useTempRoot(); err != nil {
		return err
	}
	rabbit := d.opts.broker == "rabbitmq"
	start := d.startServices
	if rabbit {
		start = d.startRabbitServices
	}
	if err := start(); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	dbURL, err := d.createOutbox(ctx, ddl)
	if err != nil {
		return err
	}

	port, err := freeport.Get()
	if err != nil {
		return err
	}
	metricsAddr := "127.0.0.1:" + strconv.Itoa(port)
	args := []string{"run", "--pg-url", dbURL}
	if rabbit {
		// The consumer declares its queue before the relay publishes.
		if d.consumer, err = newRabbitConsumer(d.rabbit.URL()); err != nil {
			return err
		}
		args = append(args,
			"--rabbitmq-url", d.rabbit.URL(),
			"--rabbitmq-exchange", exchange,
			"--routing-key", "{event_type}",
			"--value-format", "json",
		)
	} else {
		args = append(args,
			"--kafka-brokers", d.broker.Addr(),
			"--schema-registry-url", d.registry.URL(),
			"--schemas-dir", d.opts.schemasDir,
		)
	}
	args = append(args, "--metrics-addr", metricsAddr, "--log-level", "info")
	t := time.Now()
	d.relay, err = startRelay(relayBin, args, metricsAddr)
	if err != nil {
		return err
	}
	if err := d.relay.waitReady(ctx, readyTimeout); err != nil {
		return err
	}
	fmt.Printf("relay       pid %d, /readyz 200 on %s in %s\n", d.relay.cmd.Process.Pid, metricsAddr, since(t))

	// Writing and consuming end early if the relay exits; the records
	// deadline starts before the writer, so it covers the whole trip.
	relayCtx, relayExited := context.WithCancelCause(ctx)
	defer relayExited(nil)
	go func() {
		select {
		case <-d.relay.done:
			relayExited(fmt.Errorf("relay exited early (%v); see its log above", d.relay.waitErr))
		case <-relayCtx.Done():
		}
	}()
	recCtx, cancel := context.WithTimeout(relayCtx, recordsTimeout)
	defer cancel()
	invalid := badAmount
	if rabbit {
		invalid = badJSON
	} else if d.consumer, err = newConsumer(d.broker.Addr(), d.registry.URL()); err != nil {
		return err
	}
	written, endLSN, err := writeEvents(recCtx, d.conn, d.opts.events, invalid)
	if err == nil {
		err = d.consumer.await(recCtx, written)
	}
	switch {
	case err == nil:
		return d.summary(ctx, written, endLSN)
	case ctx.Err() != nil:
		return ctx.Err()
	case context.Cause(relayCtx) != nil:
		return context.Cause(relayCtx)
	case errors.Is(err, context.DeadlineExceeded) && written != nil:
		to := "Kafka"
		if rabbit {
			to = "RabbitMQ"
		}
		return fmt.Errorf("not every event reached %s within %s: %s", to, recordsTimeout, d.consumer.missing(written))
	}
	return err
}

// since formats the time elapsed since t for humans.
func since(t time.Time) time.Duration {
	return time.Since(t).Round(10 * time.Millisecond)
}
