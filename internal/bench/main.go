// Command bench is the drain benchmark `make bench` runs. It starts a private
// PostgreSQL 15, Kafka and schema registry, builds a backlog of outbox rows
// while nothing reads the slots, then drains the same backlog twice: with
// pg_recvlogical into /dev/null (the raw decode ceiling: PostgreSQL's own
// client, doing no work per event), with cdc-relay into Kafka in
// at-least-once mode and again with --delivery exactly-once (each drain on
// its own slot, created before the load), and prints them side by side with
// the ratios of their rates and of each relay's CPU to its walsender's. With --debezium (make bench-debezium)
// it drains the backlog a third time with the Debezium PostgreSQL connector
// and its Outbox Event Router in Kafka Connect standalone, into the same
// broker, and prints the relay/Debezium ratios. With --latency it instead runs the
// steady-state latency scenario (latency.go): writers commit at fixed rates
// while pg_recvlogical (the anchor) and the relay (once in each delivery
// mode) each run on a slot of their own, one after the other at each rate
// (--anchor alternate) or at once (--anchor beside); a consumer times each
// event from commit to Kafka and the bench times it from commit to
// pg_recvlogical's output; with --debezium as well, the same is then
// measured for Debezium. --delivery picks the relay's modes, and after the
// rates an idle window (--idle, idle.go) measures the CPU of pg_recvlogical
// and of the relay while nothing is committed.
// With --broker rabbitmq (rabbitdrain.go, rabbitlatency.go) it starts
// PostgreSQL and a private RabbitMQ node instead, drains backlogs of 200k
// and 1M rows through the relay with JSON values into a topic exchange and
// one queue bound with "#", and sends the same messages again with a plain
// amqp091-go publisher with streaming confirms, the broker's limit here;
// with --debezium-server (dbzserver.go, make bench-debezium BROKER=rabbitmq)
// it drains each backlog a third time with Debezium Server's rabbitmq sink;
// with --latency it compares the relay's commit -> consumed at 1k/s with
// that publisher's publish -> consumed.
// docs/BENCHMARKS.md has results.
//
// Every process it starts dies when it exits, also on Ctrl-C.
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
	"slices"
	"strings"
	"syscall"
	"time"
)

// options are the benchmark's flags.
type options struct {
	relayBin     string        // the cdc-relay binary to measure
	broker       string        // kafka or rabbitmq (rabbitdrain.go)
	queueType    string        // with rabbitmq: the bound queue's x-queue-type
	rabbitRows   []int         // with rabbitmq: the backlog sizes drained
	schemasDir   string        // .avsc files passed to the relay
	outboxSQL    string        // DDL of the outbox table
	rows         int           // rows in the backlog
	txSize       int           // rows per transaction
	payloadBytes int           // target size of one payload's jsonb text
	runs         int           // how often the two drains are repeated
	partitions   int           // partitions of the auto-created topics
	jsonPath     string        // where to write the JSON report ("" none, "-" stdout)
	cpuProfile   string        // where to write the relay's CPU profile of run 1 ("" none)
	relayOverlay string        // go build -overlay file for a relay built from this checkout ("" none)
	timeout      time.Duration // bound on one drain
	quietWait    time.Duration // how long to wait for an idle machine before each drain
	relayArgs    []string      // extra flags for `cdc-relay run`
	messages     bool          // load the backlog as logical decoding messages instead of rows

	// The Debezium side-by-side drain (debezium.go).
	debezium     bool        // drain a third slot with Debezium in each run
	debeziumLibs string      // Connect's and Debezium's jars ("" the cache of scripts/debezium.sh)
	debeziumJVM  []string    // Connect's heap options
	debeziumOpts [][2]string // connector properties that override or extend the defaults
	brokerConfig [][2]string // broker properties that override or extend kafkatest's
	brokerJVM    []string    // JVM flags after the broker's own

	// The Debezium Server side of the RabbitMQ drain (dbzserver.go).
	withDebeziumServer bool               // drain a slot of its own with Debezium Server's rabbitmq sink
	debeziumServerDir  string             // the unpacked distribution ("" the cache of scripts/debezium-server.sh)
	debeziumServer     debeziumServerDist // found in run

	// The steady-state latency scenario (latency.go).
	latency  bool          // run it instead of the drain benchmark
	rates    []int         // events per second, one measurement each
	duration time.Duration // measured time per rate
	warmup   time.Duration // unmeasured time per rate before it
	anchor   string        // how the anchor runs next to the tool: anchorAlternate or anchorBeside
	// deliveries are the relay's delivery modes to measure, in order.
	deliveries []string
	idle       time.Duration // the idle window after the rates; 0 none

	// pinCPUs puts PostgreSQL on one half of the CPUs and everything else
	// on the other; pinned describes the split once made.
	pinCPUs bool
	pinned  string

	brokerWarmupMB int // produced (twice) before anything is measured; 0 none
	// With --latency, how long the broker's steady-state paths are driven
	// before the first measurement; 0 none.
	brokerWarmupSteady time.Duration
}

// main parses flags, runs the benchmark under a context that Ctrl-C
// cancels, and exits with its code.
func main() {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, o)
	stop()
	os.Exit(code)
}

// parseFlags reads and checks the command line.
func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.StringVar(&o.relayBin, "relay", "bin/cdc-relay", "cdc-relay binary to measure (make build)")
	fs.StringVar(&o.broker, "broker", "kafka", "kafka or rabbitmq: with rabbitmq, drain backlogs of 200000 and 1000000 rows (or --rows) through the relay with JSON values into a topic exchange and one queue bound with #, and send the same messages again with a plain amqp091-go publisher with streaming confirms (the anchor); with --latency, p50/p99 at --rates against that anchor")
	fs.StringVar(&o.queueType, "queue-type", "quorum", "with --broker rabbitmq: the bound queue's x-queue-type, quorum (what the article's consumers use) or classic")
	fs.StringVar(&o.schemasDir, "schemas-dir", "testdata/schemas", "directory of .avsc files for the relay")
	fs.StringVar(&o.outboxSQL, "outbox-sql", "docs/outbox_bigserial.sql", "DDL of the outbox table (bigserial ids: the drains are checked by id)")
	fs.IntVar(&o.rows, "rows", 200000, "rows in the backlog")
	fs.IntVar(&o.txSize, "tx-size", 1000, "rows per transaction")
	fs.IntVar(&o.payloadBytes, "payload-bytes", 300, "approximate size of one jsonb payload (its text form)")
	fs.BoolVar(&o.messages, "messages", false, "load the backlog as transactional logical decoding messages (pg_logical_emit_message: the table-less outbox) instead of rows; the relay and pg_recvlogical read them with messages on")
	fs.IntVar(&o.runs, "runs", 1, "repeat load and drains this often with fresh slots; odd runs drain with pg_recvlogical first, even runs with the relay first (Debezium always last)")
	fs.IntVar(&o.partitions, "partitions", 1, "partitions of the topics the relay writes (broker num.partitions)")
	fs.Var((*jsonFlag)(&o.jsonPath), "json", "also print the results as JSON after the tables; --json=FILE writes them to FILE instead")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "build the relay from this checkout with a profiling hook added by go build -overlay (instead of using --relay) and write its CPU profile of run 1 here, allocations to FILE.allocs, the exactly-once drain's to FILE.eos and FILE.eos.allocs")
	fs.StringVar(&o.relayOverlay, "relay-overlay", "", "build the relay from this checkout with this go build -overlay file applied (instead of using --relay), to measure a patch without editing the tree")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "bound on one drain")
	fs.DurationVar(&o.quietWait, "quiet-wait", 2*time.Minute, "before each drain, wait up to this long for the machine to be idle (under 0.25 CPUs busy for a second); 0 does not wait")
	fs.BoolVar(&o.latency, "latency", false, "run the steady-state latency scenario instead of the drain: the relay runs once while writers commit single-row transactions at --rates")
	ratesFlag := fs.String("rates", "1000,5000,20000", "with --latency: commit rates to measure, events per second, comma-separated")
	fs.DurationVar(&o.duration, "duration", 20*time.Second, "with --latency: measured time per rate")
	fs.DurationVar(&o.warmup, "warmup", 3*time.Second, "with --latency: unmeasured warm-up per rate")
	fs.StringVar(&o.anchor, "anchor", anchorAlternate, "with --latency: how pg_recvlogical (the anchor) is measured next to the relay under the same writers: "+anchorAlternate+" (each rate: the anchor alone on a fresh slot for --warmup and --duration, then the relay alone on a fresh slot as long, the writers committing throughout, so one walsender decodes at a time) or "+anchorBeside+" (both at once through every rate, their two walsenders sharing the CPUs)")
	deliveryFlag := fs.String("delivery", atLeastOnce+","+exactlyOnce, "with --latency: the relay's delivery modes to measure, in this order, comma-separated: "+atLeastOnce+", "+exactlyOnce+" or both")
	fs.DurationVar(&o.idle, "idle", time.Minute, "with --latency: after the rates, measure the CPU of pg_recvlogical and of the relay in each --delivery mode, with their walsenders, all at once on slots of their own while nothing is committed, for this long; 0 skips it")
	fs.BoolVar(&o.debezium, "debezium", false, "in each run, also drain a third slot with the Debezium PostgreSQL connector and its Outbox Event Router in Kafka Connect standalone (jars from bash scripts/debezium.sh), after the other two; with --latency, measure Debezium after the relay")
	fs.StringVar(&o.debeziumLibs, "debezium-libs", "", "with --debezium: directory of Connect's and Debezium's jars (default $CDC_RELAY_CACHE/debezium-"+debeziumVersion+"/libs, ~/.cache/cdc-relay without CDC_RELAY_CACHE)")
	dbzJVM := fs.String("debezium-jvm-opts", "-Xms256M -Xmx2G", "with --debezium: Connect's heap options, space-separated (the default is what Kafka's connect-standalone.sh sets)")
	dbzOpts := fs.String("debezium-connector-opts", "", "with --debezium: connector properties that override or extend the benchmark's, space-separated key=value, e.g. \"poll.interval.ms=10\"")
	fs.BoolVar(&o.withDebeziumServer, "debezium-server", false, "with --broker rabbitmq: after the relay and the anchor, also drain the backlog on a slot of its own with Debezium Server "+debeziumServerVersion+"'s rabbitmq sink and the Outbox Event Router, into the same exchange and queue (distribution and Java 21+ from bash scripts/debezium-server.sh); --debezium-jvm-opts sets its heap, --debezium-connector-opts overrides its application.properties, e.g. \"debezium.source.max.batch.size=4096\"")
	fs.StringVar(&o.debeziumServerDir, "debezium-server-dir", "", "with --debezium-server: the directory holding the unpacked debezium-server/ (default $CDC_RELAY_CACHE/debezium-server-"+debeziumServerVersion+", ~/.cache/cdc-relay without CDC_RELAY_CACHE)")
	fs.IntVar(&o.brokerWarmupMB, "broker-warmup-mb", 256, "before the first measurement, produce this many MB to a topic of its own, uncompressed and again with lz4, so that the broker's JIT has compiled its produce path; 0 skips it")
	fs.DurationVar(&o.brokerWarmupSteady, "broker-warmup-steady", 30*time.Second, "with --latency, before the first measurement and after --broker-warmup-mb, drive the broker this long with one-record produce requests, small transactions over two topics and read_committed fetches, so that its JIT has compiled what the latency scenario uses; 0 skips it")
	fs.BoolVar(&o.pinCPUs, "pin-cpus", false, "Linux: run PostgreSQL (every backend and walsender) on the first half of the CPUs and everything else (the broker, the registry, the relay, pg_recvlogical and this benchmark with its writers' client side and consumer) on the second, as if the database had a host of its own; on 2 CPUs, one each")
	brokerOpts := fs.String("broker-config", "", "broker properties that override or extend the test broker's, space-separated key=value, e.g. \"add.partitions.to.txn.retry.backoff.ms=2\"")
	brokerJVMOpts := fs.String("broker-jvm-opts", "", "JVM flags for the test broker after its own (Kafka's start-script flags "+strings.Join(brokerJVM, " ")+", and with --latency "+strings.Join(latencyBrokerJVM, " ")+"), space-separated, e.g. \"-Xmn52m\" for G1's smallest young generation of a 1 GB heap")
	extra := fs.String("relay-args", "", "extra flags for cdc-relay run, space-separated, e.g. \"--status-interval 100ms\"")
	err := fs.Parse(args)
	if err != nil {
		return o, err
	}
	o.relayArgs = strings.Fields(*extra)
	o.brokerJVM = strings.Fields(*brokerJVMOpts)
	if o.latency {
		o.brokerJVM = append(slices.Clip(latencyBrokerJVM), o.brokerJVM...)
	}
	o.debeziumJVM = strings.Fields(*dbzJVM)
	if o.debeziumOpts, err = keyValues("--debezium-connector-opts", *dbzOpts); err != nil {
		return o, err
	}
	if o.brokerConfig, err = keyValues("--broker-config", *brokerOpts); err != nil {
		return o, err
	}
	rs, err := parseRates(*ratesFlag)
	if err != nil {
		return o, err
	}
	o.rates = rs
	if o.deliveries, err = parseDeliveries(*deliveryFlag); err != nil {
		return o, err
	}
	if err := rabbitFlags(fs, &o); err != nil {
		return o, err
	}
	if err := debeziumServerFlags(o); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected argument %q: settings are flags", fs.Arg(0))
	case o.rows < 1:
		return o, errors.New("--rows must be at least 1")
	case o.txSize < 1:
		return o, errors.New("--tx-size must be at least 1")
	case o.messages && (o.debezium || o.latency):
		return o, errors.New("--messages measures the drain of the relay and pg_recvlogical only: leave out --debezium and --latency")
	case o.brokerWarmupMB < 0:
		return o, errors.New("--broker-warmup-mb must not be negative")
	case o.brokerWarmupSteady < 0:
		return o, errors.New("--broker-warmup-steady must not be negative")
	case o.payloadBytes < 1:
		return o, errors.New("--payload-bytes must be at least 1")
	case o.runs < 1:
		return o, errors.New("--runs must be at least 1")
	case o.partitions < 1:
		return o, errors.New("--partitions must be at least 1")
	case o.idle < 0:
		return o, errors.New("--idle must not be negative")
	case o.duration <= 0 || o.warmup < 0:
		return o, errors.New("--duration must be positive and --warmup not negative")
	case o.anchor != anchorAlternate && o.anchor != anchorBeside:
		return o, fmt.Errorf("--anchor: %q is neither %s nor %s", o.anchor, anchorAlternate, anchorBeside)
	case o.latency && o.cpuProfile != "":
		return o, errors.New("--cpuprofile is for the drain benchmark")
	}
	for _, p := range []*string{&o.relayBin, &o.schemasDir, &o.outboxSQL, &o.relayOverlay, &o.debeziumLibs, &o.debeziumServerDir} {
		if *p == "" {
			continue
		}
		abs, err := filepath.Abs(*p)
		if err != nil {
			return o, err
		}
		*p = abs
	}
	if _, err := os.Stat(o.relayBin); err != nil && o.cpuProfile == "" && o.relayOverlay == "" {
		return o, fmt.Errorf("--relay: %w (run make build)", err)
	}
	return o, nil
}

// parseDeliveries reads --delivery: delivery modes, each at most once.
func parseDeliveries(s string) ([]string, error) {
	var ds []string
	for _, d := range strings.Split(s, ",") {
		d = strings.TrimSpace(d)
		if d != atLeastOnce && d != exactlyOnce {
			return nil, fmt.Errorf("--delivery: %q is neither %s nor %s", d, atLeastOnce, exactlyOnce)
		}
		if slices.Contains(ds, d) {
			return nil, fmt.Errorf("--delivery: %s given twice", d)
		}
		ds = append(ds, d)
	}
	return ds, nil
}

// keyValues splits a flag's space-separated key=value pairs.
func keyValues(flagName, s string) ([][2]string, error) {
	var kvs [][2]string
	for _, kv := range strings.Fields(s) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%s: %q is not key=value", flagName, kv)
		}
		kvs = append(kvs, [2]string{k, v})
	}
	return kvs, nil
}

// run starts the services, measures every run, prints the report and stops
// everything. It returns the exit code.
func run(ctx context.Context, o options) int {
	fail := func(err error) int {
		if ctx.Err() != nil {
			fmt.Fprintln(os.Stderr, "bench: interrupted; everything started has been stopped")
			return 130
		}
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		return 1
	}
	tmp, err := os.MkdirTemp("", "cdc-relay-bench-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(tmp)
	if o.debezium {
		if o.debeziumLibs, err = debeziumLibs(o.debeziumLibs); err != nil {
			return fail(err)
		}
	}
	if o.withDebeziumServer {
		if o.debeziumServer, err = findDebeziumServer(o.debeziumServerDir); err != nil {
			return fail(err)
		}
	}
	relayBin := o.relayBin
	if o.cpuProfile != "" || o.relayOverlay != "" {
		progress("building the relay from this checkout (profiling hook: %t, overlay: %q)", o.cpuProfile != "", o.relayOverlay)
		if relayBin, err = buildRelay(ctx, tmp, o.cpuProfile != "", o.relayOverlay); err != nil {
			return fail(err)
		}
	}

	var pinPG func(dataDir string) error
	if o.broker == "rabbitmq" {
		return runRabbit(ctx, o, relayBin, fail)
	}
	if o.pinCPUs {
		if pinPG, o.pinned, err = pinBench(); err != nil {
			return fail(err)
		}
	}
	progress("starting PostgreSQL 15, Kafka and the schema registry")
	svc, err := startServices(o.partitions, o.brokerConfig, o.brokerJVM)
	defer svc.close() // also after a partial start
	if err != nil {
		return fail(err)
	}
	if pinPG != nil {
		if err := pinPG(filepath.Join(svc.pg.Dir(), "data")); err != nil {
			return fail(err)
		}
		progress("pinned: %s", o.pinned)
	}
	if ctx.Err() != nil {
		return fail(ctx.Err())
	}
	if err := warmBroker(ctx, svc.broker.Addr(), o.payloadBytes, o.brokerWarmupMB); err != nil {
		return fail(err)
	}
	db, err := prepareDatabase(ctx, svc, o)
	if err != nil {
		return fail(err)
	}
	defer db.close()

	if o.latency {
		if err := warmBrokerSteady(ctx, svc.broker.Addr(), o.partitions, o.brokerWarmupSteady); err != nil {
			return fail(err)
		}
		return runLatency(ctx, o, svc, db, relayBin)
	}
	rep := newReport(ctx, o, relayBin, db)
	for i := 1; i <= o.runs; i++ {
		r, err := measureRun(ctx, o, svc, db, relayBin, i)
		if err != nil {
			return fail(fmt.Errorf("run %d: %w", i, err))
		}
		rep.Runs = append(rep.Runs, r)
		printRun(os.Stdout, r)
	}
	rep.summarise()
	if o.runs > 1 {
		printMedian(os.Stdout, rep)
	}
	if err := rep.writeJSON(o.jsonPath); err != nil {
		return fail(err)
	}
	if o.cpuProfile != "" {
		fmt.Printf("\nCPU profile of the relay in run 1: %s, exactly-once %s.eos (go tool pprof -top %s)\n", o.cpuProfile, o.cpuProfile, o.cpuProfile)
	}
	return 0
}

// measureRun loads a fresh backlog behind fresh slots and drains it with
// each tool on its own slot: pg_recvlogical, the relay in at-least-once
// mode and the relay with --delivery exactly-once, in that order on odd
// runs and in the reverse order on even runs, then with --debezium with
// Debezium.
func measureRun(ctx context.Context, o options, svc *services, db *database, relayBin string, n int) (runResult, error) {
	r := runResult{Run: n, RecvlogicalFirst: n%2 == 1}
	slots := slotNames{relay: fmt.Sprintf("bench_relay_%d", n), relayEOS: fmt.Sprintf("bench_relay_eos_%d", n), recv: fmt.Sprintf("bench_recv_%d", n)}
	if o.debezium {
		slots.dbz = fmt.Sprintf("bench_dbz_%d", n)
	}
	progress("run %d: loading %d rows in transactions of %d", n, o.rows, o.txSize)
	load, err := db.loadBacklog(ctx, o, slots)
	if err != nil {
		return r, err
	}
	r.Load = load
	progress("run %d: backlog of %.1f MB WAL ready in %.1f s (%s..%s)", n, float64(load.WALBytes)/1e6, load.Seconds, load.StartLSN, load.EndLSN)

	recv := func() error {
		if err := waitQuiet(ctx, o.quietWait); err != nil {
			return err
		}
		progress("run %d: draining with pg_recvlogical", n)
		d, err := drainRecvlogical(ctx, o, svc, db, slots.recv, load)
		r.Recvlogical = d
		return err
	}
	relay := func(delivery string) func() error {
		return func() error {
			if err := waitQuiet(ctx, o.quietWait); err != nil {
				return err
			}
			progress("run %d: draining with cdc-relay --delivery %s", n, delivery)
			profile := ""
			if n == 1 {
				profile = o.cpuProfile
			}
			if delivery == exactlyOnce {
				if profile != "" {
					profile += ".eos"
				}
				d, err := drainRelay(ctx, o, svc, db, relayBin, slots.relayEOS, n, delivery, load, profile)
				r.RelayEOS = d
				return err
			}
			d, err := drainRelay(ctx, o, svc, db, relayBin, slots.relay, n, delivery, load, profile)
			r.Relay = d
			return err
		}
	}
	dbz := func() error {
		if err := waitQuiet(ctx, o.quietWait); err != nil {
			return err
		}
		progress("run %d: draining with Debezium (Kafka Connect standalone)", n)
		d, err := drainDebezium(ctx, o, svc, db, slots.dbz, load)
		r.Debezium = &d
		return err
	}
	order := []func() error{recv, relay(atLeastOnce), relay(exactlyOnce)}
	if !r.RecvlogicalFirst {
		order = []func() error{relay(exactlyOnce), relay(atLeastOnce), recv}
	}
	if o.debezium {
		order = append(order, dbz)
	}
	for _, f := range order {
		if err := f(); err != nil {
			return r, err
		}
	}
	r.RecvlogicalRates = ratesOf(r.Recvlogical, load)
	r.RelayRates = ratesOf(r.Relay, load)
	r.RelayEOSRates = ratesOf(r.RelayEOS, load)
	if r.Debezium != nil {
		dr := ratesOf(*r.Debezium, load)
		r.DebeziumRates = &dr
	}
	return r, db.dropSlots(ctx, slots)
}

// jsonFlag is --json: alone it means stdout ("-"), --json=FILE a file.
type jsonFlag string

// String returns the destination.
func (j *jsonFlag) String() string { return string(*j) }

// Set takes the destination; "true" is what the flag package passes for a
// bare --json.
func (j *jsonFlag) Set(v string) error {
	if v == "true" {
		v = "-"
	}
	*j = jsonFlag(v)
	return nil
}

// IsBoolFlag lets --json stand alone.
func (j *jsonFlag) IsBoolFlag() bool { return true }

// progress prints a timestamped progress line on stderr.
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s bench: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}
