package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/cdc-relay/cdc-relay/internal/freeport"
)

// rabbitGoal is issue 39's goal for the relay's drain rate over the
// anchor's.
const rabbitGoal = 0.8

// rabbitDrain is one size's drains: the relay's and the anchor's, and with
// --debezium-server Debezium Server's with the settings it ran with.
type rabbitDrain struct {
	Load                   loadInfo     `json:"load"`
	Relay                  drainResult  `json:"relay"`
	Anchor                 drainResult  `json:"anchor"`
	DebeziumServer         *drainResult `json:"debezium_server,omitempty"`
	DebeziumServerSettings []string     `json:"debezium_server_settings,omitempty"`
}

// runRabbit is `make bench BROKER=rabbitmq` (and with --latency `make
// latency BROKER=rabbitmq`): PostgreSQL and a private RabbitMQ node, then
// for each size a backlog drained by the relay (JSON values) into the
// exchange, and the same messages sent again by the anchor, a plain
// amqp091-go publisher with streaming confirms. It returns the exit code.
func runRabbit(ctx context.Context, o options, relayBin string, fail func(error) int) int {
	progress("starting PostgreSQL 15 and RabbitMQ")
	svc, err := startRabbitServices()
	defer svc.close()
	if err != nil {
		return fail(err)
	}
	db, err := prepareDatabase(ctx, svc, o)
	if err != nil {
		return fail(err)
	}
	defer db.close()
	if o.latency {
		return runRabbitLatency(ctx, o, svc, db, relayBin, fail)
	}
	var all []rabbitDrain
	for i, rows := range o.rabbitRows {
		oi := o
		oi.rows = rows
		r, err := rabbitDrainSize(ctx, oi, svc, db, relayBin, i+1)
		if err != nil {
			return fail(fmt.Errorf("%d rows: %w", rows, err))
		}
		all = append(all, r)
		printRabbitDrain(os.Stdout, o, r)
	}
	if err := writeJSONTo(o.jsonPath, all); err != nil {
		return fail(err)
	}
	return 0
}

// rabbitDrainSize loads a backlog of o.rows behind a fresh slot, drains it
// with the relay into a fresh queue, then sends the messages the queue
// received again with the anchor into another fresh queue.
func rabbitDrainSize(ctx context.Context, o options, svc *services, db *database, relayBin string, n int) (rabbitDrain, error) {
	var r rabbitDrain
	slots := slotNames{relay: fmt.Sprintf("bench_rmq_%d", n)}
	if o.withDebeziumServer {
		slots.dbz = fmt.Sprintf("bench_rmq_dbz_%d", n)
	}
	progress("%d rows: loading in transactions of %d", o.rows, o.txSize)
	load, err := db.loadBacklog(ctx, o, slots)
	if err != nil {
		return r, err
	}
	r.Load = load
	progress("%d rows: backlog of %.1f MB WAL ready in %.1f s", o.rows, float64(load.WALBytes)/1e6, load.Seconds)

	conn, err := amqp.Dial(svc.rabbit.URL())
	if err != nil {
		return r, err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return r, err
	}
	if err := rabbitTopology(ch, o.queueType); err != nil {
		return r, err
	}
	if err := waitQuiet(ctx, o.quietWait); err != nil {
		return r, err
	}
	progress("%d rows: draining with cdc-relay into %s (%s queue %s)", o.rows, rabbitExchange, o.queueType, rabbitQueue)
	col, err := startCollector(svc.rabbit.URL(), load.MinID, load.Rows, true, nil)
	if err != nil {
		return r, err
	}
	r.Relay, err = drainRelayRabbit(ctx, o, svc, db, relayBin, slots.relay, n, load, col)
	col.close()
	if err != nil {
		return r, err
	}
	if err := dropSlot(ctx, db, slots.relay); err != nil {
		return r, err
	}

	if err := rabbitTopology(ch, o.queueType); err != nil {
		return r, err
	}
	if err := waitQuiet(ctx, o.quietWait); err != nil {
		return r, err
	}
	progress("%d rows: sending the same %d messages with the anchor (amqp091-go, deferred confirms, window %d)", o.rows, len(col.kept), anchorWindow)
	if r.Anchor, err = drainAnchor(ctx, o, svc, load, col.kept); err != nil || slots.dbz == "" {
		return r, err
	}

	if err := rabbitTopology(ch, o.queueType); err != nil {
		return r, err
	}
	if err := waitQuiet(ctx, o.quietWait); err != nil {
		return r, err
	}
	progress("%d rows: draining with Debezium Server %s (rabbitmq sink) into %s", o.rows, debeziumServerVersion, rabbitExchange)
	d, settings, err := drainDebeziumServer(ctx, o, svc, db, slots.dbz, load)
	r.DebeziumServer, r.DebeziumServerSettings = &d, settings
	if err != nil {
		return r, err
	}
	return r, dropSlot(ctx, db, slots.dbz)
}

// drainRelayRabbit runs the relay on slot and times it from process start
// until the slot's confirmed_flush_lsn reaches the load's end LSN; then it
// stops the relay and checks that the queue received every id.
func drainRelayRabbit(ctx context.Context, o options, svc *services, db *database, bin, slot string, run int, load loadInfo, col *collector) (drainResult, error) {
	d := drainResult{Tool: "cdc-relay", Rows: load.Rows}
	port, err := freeport.Get()
	if err != nil {
		return d, err
	}
	metricsAddr := "127.0.0.1:" + strconv.Itoa(port)
	args := rabbitRelayArgs(o, svc, db, slot, fmt.Sprintf("bench_r%d", run), metricsAddr)
	c, m, err := d.runRelay(ctx, o, svc, db, bin, slot, args, nil, metricsAddr, load)
	if c != nil {
		defer c.kill()
	}
	if err != nil {
		return d, err
	}
	d.DLQRecords = int64(m["cdc_relay_dlq_events_total"])
	c.signal(syscall.SIGTERM)
	if err := c.wait(ctx, stopWithin); err != nil {
		return d, c.failure("after SIGTERM: %v", err)
	}
	if err := col.wait(ctx, int64(load.Rows), 2*time.Minute); err != nil {
		return d, err
	}
	d.KafkaRecords, d.Duplicates = col.count.Load(), col.dups.Load()
	if miss, bad := col.missing(), col.bad.Load(); miss > 0 || bad > 0 || d.DLQRecords > 0 {
		return d, fmt.Errorf("queue %s: %d ids missing, %d messages not of this load, %d dead letters", rabbitQueue, miss, bad, d.DLQRecords)
	}
	return d, nil
}

// drainAnchor sends msgs again, in order, with the anchor publisher, and
// times it from the first publish to the last confirmation; then it checks
// that the queue received every one.
func drainAnchor(ctx context.Context, o options, svc *services, load loadInfo, msgs []amqp.Delivery) (drainResult, error) {
	d := drainResult{Tool: "anchor (amqp091-go)", Rows: len(msgs)}
	col, err := startCollector(svc.rabbit.URL(), load.MinID, load.Rows, false, nil)
	if err != nil {
		return d, err
	}
	defer col.close()
	p, err := newAnchorPublisher(svc.rabbit.URL(), anchorWindow)
	if err != nil {
		return d, err
	}
	defer p.close()
	self0, _ := cpuSeconds(os.Getpid())
	broker0, busy0 := cpuOrZero(svc.brokerPID), busySeconds()
	start := time.Now()
	for _, m := range msgs {
		if err := p.publish(ctx, m.RoutingKey, publishing(m)); err != nil {
			return d, err
		}
	}
	if err := p.flush(ctx); err != nil {
		return d, err
	}
	d.Seconds = time.Since(start).Seconds()
	d.SentSeconds = d.Seconds
	self1, _ := cpuSeconds(os.Getpid())
	d.ClientCPUSeconds = self1 - self0 // the bench process: the anchor and the consumer
	d.BrokerCPUSeconds = cpuOrZero(svc.brokerPID) - broker0
	d.OtherCPUSeconds = busySeconds() - busy0 - d.ClientCPUSeconds - d.BrokerCPUSeconds
	if err := col.wait(ctx, int64(len(msgs)), 2*time.Minute); err != nil {
		return d, err
	}
	d.KafkaRecords, d.Duplicates = col.count.Load(), col.dups.Load()
	if miss := col.missing(); miss > 0 {
		return d, fmt.Errorf("queue %s: %d of the anchor's ids missing", rabbitQueue, miss)
	}
	return d, nil
}

// printRabbitDrain prints one size's drains side by side and the relay's
// rate over the anchor's against the goal.
func printRabbitDrain(w io.Writer, o options, r rabbitDrain) {
	fmt.Fprintf(w, "\nDrain to RabbitMQ: %d rows (%.1f MB payload jsonb, %d transactions), JSON values, topic exchange %s -> %s queue %s bound with #, consumed alongside\n",
		r.Load.Rows, float64(r.Load.PayloadBytes)/1e6, r.Load.Transactions, rabbitExchange, o.queueType, rabbitQueue)
	fmt.Fprintln(w, "cdc-relay: process start -> slot confirmed the end LSN; anchor: first publish -> last confirm (its CPU is the bench process's, consumer included)")
	ds := []drainResult{r.Relay, r.Anchor}
	if dbz := r.DebeziumServer; dbz != nil {
		ds = append(ds, *dbz)
		fmt.Fprintf(w, "Debezium Server: process start -> the consumer had every message (its slot confirmed the end LSN %s); %s\n",
			confirmedAfter(*dbz), strings.Join(r.DebeziumServerSettings, " "))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "tool\tmessages\tseconds\tstartup s\tevents/s\tafter startup\tclient CPU s\twalsender CPU s\tbroker CPU s\tother CPU s\tpeak RSS MB\tduplicates\t")
	for _, d := range ds {
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.2f\t%.0f\t%.0f\t%.2f\t%.2f\t%.2f\t%.2f\t%.1f\t%d\t\n", d.Tool, d.KafkaRecords, d.Seconds, d.StartupSeconds,
			safeDiv(float64(d.Rows), d.Seconds), safeDiv(float64(d.Rows), d.Seconds-d.StartupSeconds), d.ClientCPUSeconds, d.WalsenderCPUSeconds, d.BrokerCPUSeconds, d.OtherCPUSeconds,
			float64(d.PeakRSSKB)/1024, d.Duplicates)
	}
	tw.Flush()
	ratio := safeDiv(r.Anchor.Seconds, r.Relay.Seconds)
	fmt.Fprintf(w, "cdc-relay / anchor events/s: %.2fx (goal >= %.1fx: %s); after the relay's startup (connect, declare, slot active): %.2fx\n",
		ratio, rabbitGoal, verdict(ratio >= rabbitGoal), safeDiv(r.Anchor.Seconds, r.Relay.Seconds-r.Relay.StartupSeconds))
	if dbz := r.DebeziumServer; dbz != nil {
		fmt.Fprintf(w, "cdc-relay / Debezium Server events/s: %.2fx (after each one's startup: %.2fx); Debezium Server / cdc-relay: %.1fx peak RSS, %.1fx client CPU\n",
			safeDiv(dbz.Seconds, r.Relay.Seconds), safeDiv(dbz.Seconds-dbz.StartupSeconds, r.Relay.Seconds-r.Relay.StartupSeconds),
			safeDiv(float64(dbz.PeakRSSKB), float64(r.Relay.PeakRSSKB)), safeDiv(dbz.ClientCPUSeconds, r.Relay.ClientCPUSeconds))
	}
}

// confirmedAfter says when Debezium Server's slot confirmed the load's
// end, or how far short it stayed.
func confirmedAfter(d drainResult) string {
	if d.ConfirmedSeconds > 0 {
		return fmt.Sprintf("after %.2f s", d.ConfirmedSeconds)
	}
	return fmt.Sprintf("not within %s: %d bytes short", debeziumConfirmGrace, d.ConfirmLagBytes)
}

// rabbitFlags checks --broker and --queue-type, and sets the sizes the
// RabbitMQ drain measures: 200k and 1M rows, or --rows alone when given.
// The Kafka-only flags are refused with rabbitmq.
func rabbitFlags(fs *flag.FlagSet, o *options) error {
	switch o.broker {
	case "kafka":
		return nil
	case "rabbitmq":
	default:
		return fmt.Errorf("--broker: %q is neither kafka nor rabbitmq", o.broker)
	}
	if o.queueType != "quorum" && o.queueType != "classic" {
		return fmt.Errorf("--queue-type: %q is neither quorum nor classic", o.queueType)
	}
	o.rabbitRows = []int{200000, 1000000}
	var err error
	rates := false
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "rows":
			o.rabbitRows = []int{o.rows}
		case "rates":
			rates = true
		case "debezium", "messages", "pin-cpus", "cpuprofile", "partitions", "broker-config", "broker-jvm-opts", "delivery", "anchor", "idle":
			err = fmt.Errorf("--%s is not measured with --broker rabbitmq", f.Name)
		}
	})
	if !rates {
		o.rates = []int{1000} // issue 39: p50 and p99 at 1k/s
	}
	return err
}

// rabbitRelayArgs are the `cdc-relay run` flags of both RabbitMQ scenarios:
// their own slot, streams under prefix, JSON values, a metrics port and
// --relay-args.
func rabbitRelayArgs(o options, svc *services, db *database, slot, prefix, metricsAddr string) []string {
	args := []string{"run",
		"--pg-url", db.url,
		"--slot", slot,
		"--publication", publication,
		"--table", "public.outbox",
		"--rabbitmq-url", svc.rabbit.URL(),
		"--rabbitmq-exchange", rabbitExchange,
		"--rabbitmq-dlq-stream", prefix + ".dlq",
		"--rabbitmq-checkpoint-stream", prefix + ".checkpoints",
		"--value-format", "json",
		"--metrics-addr", metricsAddr,
		"--log-level", "warn",
	}
	return append(args, o.relayArgs...)
}
