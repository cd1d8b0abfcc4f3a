package main

// The steady-state latency scenario (--latency): the relay runs once in
// at-least-once mode and once with --delivery exactly-once, each time with
// default flags and its own slot, while writers commit single-row outbox
// transactions at fixed rates. For each event it measures the time from the
// writer's COMMIT returning to an independent franz-go consumer receiving
// the record (read_committed in exactly-once mode), and from the same
// commit to the broker's LogAppendTime. Under the same writers,
// pg_recvlogical streams the same publication from a slot of its own
// (anchor.go), alone in a window before the relay's at each rate or beside
// the relay (--anchor): commit -> pg_recvlogical's output is the anchor,
// the ceiling of any logical-decoding client. The relay's
// cdc_relay_stage_seconds histograms, scraped at both ends of each measured
// window, give each stage's p99. With --debezium the same is then measured
// for Debezium (Kafka Connect with the Outbox Event Router, debezium.go) on
// a slot of its own, after the relay has stopped.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/freeport"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	latencySlot    = "bench_latency"
	latencyDbzSlot = "bench_latency_dbz"
	latencyPrefix  = "lat"
	// perWriter is the rate one writer connection is asked to carry: its
	// ticker fires every 4 ms. A writer whose commit takes longer than its
	// tick loses ticks (time.Ticker drops them), so at 1 ms per writer and
	// commits of 1-5 ms on a busy 2-core machine 1000/s came out as 777/s.
	perWriter = 250
	// latencyRSSPoll is how often the relay's VmRSS is sampled.
	latencyRSSPoll = 100 * time.Millisecond

	// The values of --anchor: how pg_recvlogical runs next to the tool.
	anchorAlternate = "alternate" // each rate, the anchor's window and then the tool's
	anchorBeside    = "beside"    // both at once, through every rate
)

// insertOne inserts one outbox row (g is its payload's row number) in its
// own transaction and returns its id.
const insertOne = insertRows + " RETURNING id"

// latencyResult is one rate's measurement.
type latencyResult struct {
	TargetRate   int     `json:"target_events_per_second"`
	Writers      int     `json:"writers"`
	Events       int     `json:"events"` // committed in the measured window
	Seconds      float64 `json:"seconds"`
	AchievedRate float64 `json:"achieved_events_per_second"`
	// Missing counts events of the window that the consumer never saw.
	Missing int `json:"missing"`
	// Commit to the consumer's receipt.
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
	// Commit to the broker's LogAppendTime.
	AppendP50Ms float64 `json:"append_p50_ms"`
	AppendP99Ms float64 `json:"append_p99_ms"`
	AppendMaxMs float64 `json:"append_max_ms"`
	// How long the writers' INSERT ... COMMIT round trips took.
	CommitP50Ms float64 `json:"commit_p50_ms"`
	CommitP99Ms float64 `json:"commit_p99_ms"`
	// Commit to pg_recvlogical's output (the anchor, on its own slot under
	// the same writers), and the events it never delivered.
	AnchorP50Ms   float64 `json:"anchor_p50_ms"`
	AnchorP99Ms   float64 `json:"anchor_p99_ms"`
	AnchorMaxMs   float64 `json:"anchor_max_ms"`
	AnchorMissing int     `json:"anchor_missing"`
	// The anchor's window: its events, the machine's busy CPUs and (in
	// alternate mode) its walsender's CPU seconds per 100k events. Beside
	// the tool, it is the tool's window.
	AnchorEvents              int     `json:"anchor_events"`
	AnchorMachineBusyCPUs     float64 `json:"anchor_machine_busy_cpus"`
	AnchorWalsenderCPUPer100k float64 `json:"anchor_walsender_cpu_seconds_per_100k,omitempty"`
	// The p99 of each of the relay's cdc_relay_stage_seconds stages
	// (commit_to_read, read_to_produce, produce_to_ack) over what it
	// observed during the window, interpolated inside the histogram's
	// buckets (bounds 1.5x apart), and how many observations that was.
	StageP99Ms   map[string]float64 `json:"stage_p99_ms,omitempty"`
	StageSamples map[string]int64   `json:"stage_samples,omitempty"`
	// Exactly-once: Kafka transactions committed per second of the window,
	// their mean records (the checkpoint record included), the p99 of
	// their commit (the last acknowledgements, then EndTxn), and the p50
	// and p99 of the wait of each one's first record for the coordinator
	// to complete the commit before it.
	KafkaTxnsPerSecond float64 `json:"kafka_txns_per_second,omitempty"`
	RecordsPerKafkaTxn float64 `json:"records_per_kafka_txn,omitempty"`
	KafkaCommitP99Ms   float64 `json:"kafka_commit_p99_ms,omitempty"`
	KafkaAwaitP50Ms    float64 `json:"kafka_await_p50_ms,omitempty"`
	KafkaAwaitP99Ms    float64 `json:"kafka_await_p99_ms,omitempty"`
	// The broker's GC pauses that overlap the window: how many, their
	// sum and the longest, from its GC log.
	BrokerGCPauses  int     `json:"broker_gc_pauses"`
	BrokerGCPauseMs float64 `json:"broker_gc_pause_ms"`
	BrokerGCMaxMs   float64 `json:"broker_gc_max_ms"`
	// The relay's VmRSS over the window, sampled every 100 ms.
	RSSMedianMB float64 `json:"rss_median_mb"`
	RSSMaxMB    float64 `json:"rss_max_mb"`
	// CPU seconds per 100k events of the window.
	RelayCPUPer100k     float64 `json:"relay_cpu_seconds_per_100k"`
	WalsenderCPUPer100k float64 `json:"walsender_cpu_seconds_per_100k"`
	BrokerCPUPer100k    float64 `json:"broker_cpu_seconds_per_100k"`
	// How often the relay's threads and its walsender were put on a CPU,
	// per event of the window: the wake-ups that a steady trickle costs.
	RelayRunsPerEvent     float64 `json:"relay_cpu_runs_per_event"`
	WalsenderRunsPerEvent float64 `json:"walsender_cpu_runs_per_event"`
	// MachineBusyCPUs is the whole machine's busy CPUs over the window (of
	// nproc).
	MachineBusyCPUs float64 `json:"machine_busy_cpus"`

	tool, anc windowSample // the tool's and the anchor's measured windows
}

// latencyReport is the scenario's JSON output. In DebeziumResults the
// relay_* fields describe Kafka Connect's JVM.
type latencyReport struct {
	Machine    machineInfo     `json:"machine"`
	Duration   string          `json:"duration"`
	Warmup     string          `json:"warmup"`
	Partitions int             `json:"partitions"`
	Anchor     string          `json:"anchor"` // --anchor: alternate or beside
	RelayArgs  []string        `json:"relay_args,omitempty"`
	Results    []latencyResult `json:"results"`
	// The relay with --delivery exactly-once, read_committed.
	ExactlyOnceResults []latencyResult `json:"exactly_once_results,omitempty"`
	Debezium           *debeziumInfo   `json:"debezium,omitempty"`
	DebeziumResults    []latencyResult `json:"debezium_results,omitempty"`
	// Idle is the CPU of pg_recvlogical and of the relay while nothing is
	// committed (--idle).
	Idle []idleResult `json:"idle,omitempty"`
}

// latencyTool is what the scenario measures: the relay or Debezium.
type latencyTool struct {
	name  string // as in the tables: cdc-relay, cdc-relay exactly-once or debezium
	slot  string // its own slot (alternate: the prefix of one per rate)
	topic string // where it writes the rows (created with LogAppendTime)
	// readCommitted makes the consumer read with read_committed.
	readCommitted bool
	// start starts it on slot (created already); stop is called on every
	// return. metrics is the relay's /metrics address, "" for a tool
	// without one.
	start func(ctx context.Context, slot string) (c *child, stop func(), metrics string, err error)
	// cleanExit reports whether its exit status after SIGTERM is clean.
	cleanExit func(err error) bool
}

// relayTool is the relay with default flags, --delivery delivery and
// --relay-args.
func relayTool(o options, svc *services, db *database, relayBin, delivery string) latencyTool {
	slot, prefix := latencySlot, latencyPrefix
	if delivery == exactlyOnce {
		slot, prefix = latencySlot+"_eos", latencyPrefix+"_eos"
	}
	return latencyTool{name: relayToolName(delivery), slot: slot, topic: prefix + ".Order", readCommitted: delivery == exactlyOnce,
		start: func(ctx context.Context, slot string) (*child, func(), string, error) {
			port, err := freeport.Get()
			if err != nil {
				return nil, nil, "", err
			}
			metricsAddr := "127.0.0.1:" + strconv.Itoa(port)
			args := relayArgs(db.url, slot, publication, svc, o.schemasDir, prefix, metricsAddr)
			args = append(args, "--delivery", delivery)
			args = append(args, o.relayArgs...)
			c, err := startChild(ctx, "cdc-relay", relayBin, args, nil)
			if err != nil {
				return nil, nil, "", err
			}
			return c, c.kill, metricsAddr, nil
		},
		cleanExit: func(err error) bool { return err == nil },
	}
}

// debeziumTool is Kafka Connect standalone with the Debezium connector, as
// in the drain.
func debeziumTool(o options, svc *services) latencyTool {
	return latencyTool{name: "debezium", slot: latencyDbzSlot, topic: debeziumTopic,
		start: func(ctx context.Context, slot string) (*child, func(), string, error) {
			cw, err := startConnect(ctx, o, svc, slot)
			if err != nil {
				return nil, nil, "", err
			}
			return cw.child, cw.close, "", nil
		},
		cleanExit: func(err error) bool { return err == nil || exitedOnSignal(err) },
	}
}

// eventTimes holds per outbox id (minus base) the commit, receive,
// LogAppendTime and anchor (pg_recvlogical) instants in Unix nanoseconds,
// 0 when not (yet) seen.
type eventTimes struct {
	base                 int64
	commit, recv, append []atomic.Int64
	anchor               []atomic.Int64
	commitDur            []atomic.Int64 // the INSERT's round trip
	outOfRange, dups     atomic.Int64
}

func newEventTimes(base int64, n int) *eventTimes {
	return &eventTimes{base: base, commit: make([]atomic.Int64, n), recv: make([]atomic.Int64, n),
		append: make([]atomic.Int64, n), anchor: make([]atomic.Int64, n), commitDur: make([]atomic.Int64, n)}
}

// index maps an id to its slot, or -1.
func (e *eventTimes) index(id int64) int {
	i := id - e.base
	if i < 0 || i >= int64(len(e.commit)) {
		return -1
	}
	return int(i)
}

// runLatency is the --latency scenario. It returns the exit code.
func runLatency(ctx context.Context, o options, svc *services, db *database, relayBin string) int {
	fail := func(err error) int {
		if ctx.Err() != nil {
			fmt.Fprintln(os.Stderr, "bench: interrupted; everything started has been stopped")
			return 130
		}
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		return 1
	}
	rep := latencyReport{Duration: o.duration.String(), Warmup: o.warmup.String(), Partitions: o.partitions, Anchor: o.anchor,
		RelayArgs: o.relayArgs}
	for i, delivery := range o.deliveries {
		if i > 0 {
			if err := waitQuiet(ctx, o.quietWait); err != nil {
				return fail(err)
			}
		}
		results, err := measureLatency(ctx, o, svc, db, relayTool(o, svc, db, relayBin, delivery))
		if len(results) > 0 {
			printLatency(os.Stdout, o, relayToolName(delivery), results)
			printAnchor(os.Stdout, o, relayToolName(delivery), delivery, results)
		}
		if delivery == exactlyOnce {
			rep.ExactlyOnceResults = results
		} else {
			rep.Results = results
		}
		if err != nil {
			return fail(err)
		}
	}
	if o.debezium {
		if err := waitQuiet(ctx, o.quietWait); err != nil {
			return fail(err)
		}
		var err error
		rep.DebeziumResults, err = measureLatency(ctx, o, svc, db, debeziumTool(o, svc))
		if len(rep.DebeziumResults) > 0 {
			printLatency(os.Stdout, o, "debezium", rep.DebeziumResults)
			if len(rep.Results) > 0 {
				printLatencyRatios(os.Stdout, rep.Results, rep.DebeziumResults)
			}
		}
		if err != nil {
			return fail(err)
		}
	}
	if o.idle > 0 {
		var err error
		rep.Idle, err = measureIdle(ctx, o, svc, db, relayBin)
		if len(rep.Idle) > 0 {
			printIdle(os.Stdout, o, rep.Idle)
		}
		if err != nil {
			return fail(err)
		}
	}
	full := newReport(ctx, o, relayBin, db)
	rep.Machine, rep.Debezium = full.Machine, full.Debezium
	if err := writeJSONTo(o.jsonPath, rep); err != nil {
		return fail(err)
	}
	return 0
}

// measureLatency runs the consumer once and, for every rate in turn, the
// writers, the anchor and the tool, as --anchor says: alternate (each rate
// the anchor alone on a fresh slot, then the tool alone on a fresh slot,
// under the same writers) or beside (the anchor and the tool at once,
// each on one slot, through every rate).
func measureLatency(ctx context.Context, o options, svc *services, db *database, tool latencyTool) ([]latencyResult, error) {
	topic := tool.topic
	progress("latency: creating topic %s (LogAppendTime)", topic)
	if err := createAppendTimeTopic(ctx, svc.broker.Addr(), topic, o.partitions); err != nil {
		return nil, err
	}
	var base int64
	if err := db.conn.QueryRow(ctx, "SELECT nextval(pg_get_serial_sequence('public.outbox', 'id'))").Scan(&base); err != nil {
		return nil, fmt.Errorf("read the id sequence: %w", err)
	}
	base++
	// Room for every id the writers may take: in alternate mode they also
	// commit while the anchor and the tool start, catch up and stop.
	perRate := o.duration + o.warmup
	if o.anchor == anchorAlternate {
		perRate = 2*perRate + 2*time.Minute
	}
	capacity := 10000
	for _, r := range o.rates {
		capacity += int(float64(r) * perRate.Seconds() * 1.05)
	}
	ev := newEventTimes(base, capacity)

	// The consumer, before anything is written.
	progress("latency: starting the consumer")
	cctx, stopConsumer := context.WithCancel(ctx)
	consumerDone := make(chan struct{})
	var consumerErr error
	go func() {
		defer close(consumerDone)
		consumerErr = consume(cctx, svc.broker.Addr(), topic, tool.readCommitted, ev)
	}()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			stopConsumer()
			<-consumerDone
		}
	}
	defer stop()

	pool := &writerPool{url: db.url}
	defer pool.close()
	measure := measureAlternate
	if o.anchor == anchorBeside {
		measure = measureBeside
	}
	results, err := measure(ctx, o, svc, db, tool, pool, ev)
	stop()
	for i := range results {
		results[i].fill(ev)
	}
	if err != nil {
		return results, err
	}
	if consumerErr != nil {
		return results, fmt.Errorf("consumer: %w", consumerErr)
	}
	if d := ev.dups.Load(); d > 0 {
		progress("latency: %d duplicate records", d)
	}
	if n := ev.outOfRange.Load(); n > 0 {
		progress("latency: %d records or commits with ids outside the %d the scenario tracks", n, capacity)
	}
	return results, nil
}

// measureAlternate measures each rate in two windows of --warmup and
// --duration under the same writers, who commit throughout: first the
// anchor alone on a fresh slot, then the tool alone on a fresh slot (and so
// a relay id of its own). Each window has one walsender decoding, as a
// deployment has, instead of two queueing for the same CPUs; the tool's
// window also carries the broker and the consumer, which the anchor's does
// not.
func measureAlternate(ctx context.Context, o options, svc *services, db *database, tool latencyTool, pool *writerPool, ev *eventTimes) ([]latencyResult, error) {
	plan := fmt.Sprintf("pg_recvlogical alone, then %s alone, each %s warm-up and %s measured", tool.name, o.warmup, o.duration)
	return eachRate(ctx, o, db, pool, ev, tool.name, plan, func(r *latencyResult) error {
		return alternateRate(ctx, o, svc, db, tool, ev, r)
	})
}

// eachRate measures every rate of --rates in turn: it starts the writers
// the rate needs, calls measure while they commit, and stops them.
func eachRate(ctx context.Context, o options, db *database, pool *writerPool, ev *eventTimes, tool, plan string, measure func(r *latencyResult) error) ([]latencyResult, error) {
	var results []latencyResult
	var g atomic.Int64
	for _, rate := range o.rates {
		conns, err := pool.forRate(ctx, rate)
		if err != nil {
			return results, err
		}
		progress("latency: %d events/s with %d writers: %s", rate, len(conns), plan)
		r := latencyResult{TargetRate: rate, Writers: len(conns)}
		w := startWriters(ctx, db, conns, rate, ev, &g)
		err = measure(&r)
		if werr := w.halt(); err == nil {
			err = werr
		}
		if err != nil {
			return results, err
		}
		results = append(results, r)
		progress("latency: %d events/s: done, %s RSS %.1f MB", rate, tool, median(r.tool.rss))
	}
	return results, nil
}

// alternateRate measures one rate's anchor window, then its tool window,
// while the writers run. Each window's events are delivered before its
// client stops and its slot is dropped.
func alternateRate(ctx context.Context, o options, svc *services, db *database, tool latencyTool, ev *eventTimes, r *latencyResult) error {
	anchorSlot := fmt.Sprintf("%s_anchor_%d", tool.slot, r.TargetRate)
	if err := createSlot(ctx, db, anchorSlot); err != nil {
		return err
	}
	anc, err := startAnchor(ctx, db, anchorSlot, ev)
	if err != nil {
		return err
	}
	err = func() error {
		defer anc.c.kill()
		wal, err := waitActive(ctx, db, anc.c, anchorSlot)
		if err != nil {
			return err
		}
		from := time.Now().Add(o.warmup)
		if r.anc, err = sampleWindow(ctx, svc, from, from.Add(o.duration), nil, wal, ""); err != nil {
			return err
		}
		if n := waitSeen(ctx, ev, ev.anchor, r.anc.win, seenWithin); n > 0 {
			progress("latency: pg_recvlogical delivered all but %d events of its window", n)
		}
		select {
		case <-anc.c.done:
			return anc.c.failure("exited (%v) during the load", anc.c.err)
		default:
		}
		return anc.stop()
	}()
	if err != nil {
		return err
	}
	if err := dropSlot(ctx, db, anchorSlot); err != nil {
		return err
	}

	slot := fmt.Sprintf("%s_%d", tool.slot, r.TargetRate)
	if err := createSlot(ctx, db, slot); err != nil {
		return err
	}
	proc, stop, metricsAddr, err := tool.start(ctx, slot)
	if err != nil {
		return err
	}
	err = func() error {
		defer stop()
		wal, err := waitActive(ctx, db, proc, slot)
		if err != nil {
			return err
		}
		from := time.Now().Add(o.warmup)
		if r.tool, err = sampleWindow(ctx, svc, from, from.Add(o.duration), proc, wal, metricsAddr); err != nil {
			return err
		}
		if n := waitSeen(ctx, ev, ev.recv, r.tool.win, seenWithin); n > 0 {
			progress("latency: the consumer saw all but %d events of %s's window", n, tool.name)
		}
		return stopTool(ctx, tool, proc)
	}()
	if err != nil {
		return err
	}
	return dropSlot(ctx, db, slot)
}

// measureBeside runs the anchor and the tool at once, each on one slot,
// through every rate: the two walsenders decode side by side.
func measureBeside(ctx context.Context, o options, svc *services, db *database, tool latencyTool, pool *writerPool, ev *eventTimes) ([]latencyResult, error) {
	anchorSlot := tool.slot + "_anchor"
	for _, s := range []string{tool.slot, anchorSlot} {
		if err := createSlot(ctx, db, s); err != nil {
			return nil, err
		}
	}
	progress("latency: starting pg_recvlogical (the anchor) and %s", tool.name)
	anc, err := startAnchor(ctx, db, anchorSlot, ev)
	if err != nil {
		return nil, err
	}
	anchorStopped := false
	defer func() {
		if !anchorStopped {
			anc.stop()
		}
	}()
	if _, err := waitActive(ctx, db, anc.c, anchorSlot); err != nil {
		return nil, err
	}
	proc, stop, metricsAddr, err := tool.start(ctx, tool.slot)
	if err != nil {
		return nil, err
	}
	defer stop()
	walsender, err := waitActive(ctx, db, proc, tool.slot)
	if err != nil {
		return nil, err
	}

	plan := fmt.Sprintf("%s warm-up, then %s measured", o.warmup, o.duration)
	results, err := eachRate(ctx, o, db, pool, ev, tool.name, plan, func(r *latencyResult) error {
		from := time.Now().Add(o.warmup)
		var err error
		if r.tool, err = sampleWindow(ctx, svc, from, from.Add(o.duration), proc, walsender, metricsAddr); err != nil {
			return err
		}
		// The anchor's window is the tool's; its walsender's CPU is not
		// told apart.
		r.anc = windowSample{win: r.tool.win, busy: r.tool.busy}
		select {
		case <-proc.done:
			return proc.failure("exited (%v) during the load", proc.err)
		case <-anc.c.done:
			return anc.c.failure("exited (%v) during the load", anc.c.err)
		default:
		}
		return nil
	})
	if err != nil {
		return results, err
	}

	// Wait until the consumer and the anchor have every committed event.
	all := window{0, math.MaxInt64}
	if n := waitSeen(ctx, ev, ev.recv, all, seenWithin); n > 0 {
		progress("latency: the consumer saw all but %d committed events", n)
	}
	if n := waitSeen(ctx, ev, ev.anchor, all, seenWithin); n > 0 {
		progress("latency: pg_recvlogical delivered all but %d committed events", n)
	}
	anchorStopped = true
	if err := anc.stop(); err != nil {
		return results, err
	}
	if err := stopTool(ctx, tool, proc); err != nil {
		return results, err
	}
	for _, s := range []string{tool.slot, anchorSlot} {
		if err := dropSlot(ctx, db, s); err != nil {
			return results, err
		}
	}
	return results, nil
}

// seenWithin bounds the wait, after a window, for its events to arrive.
const seenWithin = 30 * time.Second

// waitSeen waits up to within until seen (ev.recv or ev.anchor) holds a
// time for every event committed in win, and returns how many still lack
// one.
func waitSeen(ctx context.Context, ev *eventTimes, seen []atomic.Int64, win window, within time.Duration) int {
	deadline := time.Now().Add(within)
	for {
		missing := 0
		for i := range ev.commit {
			if c := ev.commit[i].Load(); c != 0 && c >= win.from && c < win.to && seen[i].Load() == 0 {
				missing++
			}
		}
		if missing == 0 || !time.Now().Before(deadline) || ctx.Err() != nil {
			return missing
		}
		sleepUntil(ctx, time.Now().Add(50*time.Millisecond))
	}
}

// stopTool stops the tool with SIGTERM and checks its exit.
func stopTool(ctx context.Context, tool latencyTool, proc *child) error {
	proc.signal(syscall.SIGTERM)
	if err := proc.wait(ctx, max(stopWithin, connectStopWithin)); !tool.cleanExit(err) {
		return proc.failure("after SIGTERM: %v", err)
	}
	return nil
}

// createSlot creates a pgoutput slot.
func createSlot(ctx context.Context, db *database, slot string) error {
	if _, err := db.conn.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", slot); err != nil {
		return fmt.Errorf("create slot %s: %w", slot, err)
	}
	return nil
}

// dropSlot drops a slot once its walsender has gone (it outlives its client
// by a moment).
func dropSlot(ctx context.Context, db *database, slot string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := db.slot(ctx, slot)
		if err != nil {
			return err
		}
		if st.activePID == 0 {
			break
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("drop slot %s: still active (walsender %d) 30 s after its client stopped", slot, st.activePID)
		}
		sleepUntil(ctx, time.Now().Add(slotPoll))
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	if _, err := db.conn.Exec(ctx, "SELECT pg_drop_replication_slot($1)", slot); err != nil {
		return fmt.Errorf("drop slot %s: %w", slot, err)
	}
	return nil
}

// window is the part of a rate's phase that counts, in Unix nanoseconds.
type window struct{ from, to int64 }

// writerRun is the writers committing at one rate until halted.
type writerRun struct {
	halted chan struct{}
	wg     sync.WaitGroup
	errs   chan error
}

// startWriters starts one goroutine per connection, each committing one
// row per tick, the ticks of all spread over one interval so that together
// they commit rate rows per second. Each commit's time is recorded in ev
// by the row's id.
func startWriters(ctx context.Context, db *database, conns []*pgx.Conn, rate int, ev *eventTimes, g *atomic.Int64) *writerRun {
	w := &writerRun{halted: make(chan struct{}), errs: make(chan error, len(conns))}
	interval := time.Duration(float64(time.Second) * float64(len(conns)) / float64(rate))
	pad := db.pad
	for i, c := range conns {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			// Spread the writers' ticks over one interval.
			sleepUntil(ctx, time.Now().Add(interval*time.Duration(i)/time.Duration(len(conns))))
			t := time.NewTicker(interval)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-w.halted:
					return
				case <-t.C:
				}
				var id int64
				n := g.Add(1)
				t0 := time.Now()
				if err := c.QueryRow(ctx, insertOne, pad, n, n).Scan(&id); err != nil {
					w.errs <- fmt.Errorf("writer %d: %w", i, err)
					return
				}
				t1 := time.Now()
				if k := ev.index(id); k >= 0 {
					ev.commit[k].Store(t1.UnixNano())
					ev.commitDur[k].Store(int64(t1.Sub(t0)))
				} else {
					ev.outOfRange.Add(1)
				}
			}
		}()
	}
	return w
}

// halt stops the writers after their current commits and returns the
// first error of any.
func (w *writerRun) halt() error {
	close(w.halted)
	w.wg.Wait()
	close(w.errs)
	return <-w.errs
}

// windowSample is what was read of the processes over one measured window.
type windowSample struct {
	win window
	// CPU seconds over the window: the tool (0 without one), the walsender
	// serving it, the broker, and the whole machine's busy time.
	toolCPU, walsenderCPU, brokerCPU, busy float64
	// How often the tool's threads and the walsender were put on a CPU
	// over the window (schedStat): their wake-ups.
	toolRuns, walsenderRuns int64
	rss                     []float64 // the tool's VmRSS, MB, every latencyRSSPoll
	before, after           relayScrape
	gcLog                   string // the broker's GC log
}

// sampleWindow waits until from and then samples the processes until to:
// proc's CPU and RSS (proc may be nil), its walsender's and the broker's
// CPU, the machine's busy time, and the relay's /metrics at both ends
// (none when metricsAddr is "").
func sampleWindow(ctx context.Context, svc *services, from, to time.Time, proc *child, walsender int, metricsAddr string) (windowSample, error) {
	s := windowSample{win: window{from.UnixNano(), to.UnixNano()}, gcLog: svc.gcLog}
	toolCPU := func() float64 {
		if proc == nil {
			return 0
		}
		v, _ := cpuSeconds(proc.pid())
		return v
	}
	toolRuns := func() int64 {
		if proc == nil {
			return 0
		}
		return schedRuns(proc.pid())
	}
	sleepUntil(ctx, from)
	var err error
	if s.before, err = scrapeStages(ctx, metricsAddr); err != nil {
		return s, proc.failure("%v", err)
	}
	tool0, wal0, broker0, busy0 := toolCPU(), cpuOrZero(walsender), cpuOrZero(svc.brokerPID), busySeconds()
	toolRuns0, walRuns0 := toolRuns(), schedRuns(walsender)
	tick := time.NewTicker(latencyRSSPoll)
	for time.Now().Before(to) && ctx.Err() == nil {
		if proc != nil {
			if kb, err := statusKB(proc.pid(), "VmRSS"); err == nil {
				s.rss = append(s.rss, float64(kb)/1024)
			}
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	tick.Stop()
	s.toolCPU, s.walsenderCPU = toolCPU()-tool0, cpuOrZero(walsender)-wal0
	s.toolRuns, s.walsenderRuns = toolRuns()-toolRuns0, schedRuns(walsender)-walRuns0
	s.brokerCPU, s.busy = cpuOrZero(svc.brokerPID)-broker0, busySeconds()-busy0
	if s.after, err = scrapeStages(ctx, metricsAddr); err != nil {
		return s, proc.failure("%v", err)
	}
	return s, ctx.Err()
}

// fill computes the result's figures from its windows' samples and the
// events committed in them, once every event has had the chance to arrive.
func (r *latencyResult) fill(ev *eventTimes) {
	var recv, app, dur, anc []float64
	r.Events, r.Missing, r.AnchorEvents, r.AnchorMissing = 0, 0, 0, 0
	for i := range ev.commit {
		c := ev.commit[i].Load()
		if c == 0 {
			continue // not committed
		}
		if c >= r.anc.win.from && c < r.anc.win.to {
			r.AnchorEvents++
			if a := ev.anchor[i].Load(); a != 0 {
				anc = append(anc, float64(a-c)/1e6)
			} else {
				r.AnchorMissing++
			}
		}
		if c < r.tool.win.from || c >= r.tool.win.to {
			continue
		}
		r.Events++
		dur = append(dur, float64(ev.commitDur[i].Load())/1e6)
		rv := ev.recv[i].Load()
		if rv == 0 {
			r.Missing++
			continue
		}
		recv = append(recv, float64(rv-c)/1e6)
		app = append(app, float64(ev.append[i].Load()-c)/1e6)
	}
	r.P50Ms, r.P99Ms, r.MaxMs = pct(recv, 0.50), pct(recv, 0.99), pct(recv, 1)
	r.AppendP50Ms, r.AppendP99Ms, r.AppendMaxMs = pct(app, 0.50), pct(app, 0.99), pct(app, 1)
	r.CommitP50Ms, r.CommitP99Ms = pct(dur, 0.50), pct(dur, 0.99)
	r.AnchorP50Ms, r.AnchorP99Ms, r.AnchorMaxMs = pct(anc, 0.50), pct(anc, 0.99), pct(anc, 1)

	s := r.tool
	r.Seconds = float64(s.win.to-s.win.from) / 1e9
	if r.Seconds <= 0 {
		return
	}
	r.AchievedRate = float64(r.Events) / r.Seconds
	if r.Events > 0 {
		per := 100000 / float64(r.Events)
		r.RelayCPUPer100k, r.WalsenderCPUPer100k, r.BrokerCPUPer100k = s.toolCPU*per, s.walsenderCPU*per, s.brokerCPU*per
		r.RelayRunsPerEvent, r.WalsenderRunsPerEvent = float64(s.toolRuns)/float64(r.Events), float64(s.walsenderRuns)/float64(r.Events)
	}
	r.MachineBusyCPUs = s.busy / r.Seconds
	if pauses, err := readGCPauses(s.gcLog); err == nil {
		r.BrokerGCPauses, r.BrokerGCPauseMs, r.BrokerGCMaxMs = pausesIn(pauses, s.win)
	}
	r.RSSMedianMB = median(s.rss)
	if len(s.rss) > 0 {
		r.RSSMaxMB = slices.Max(s.rss)
	}
	if as := float64(r.anc.win.to-r.anc.win.from) / 1e9; as > 0 {
		r.AnchorMachineBusyCPUs = r.anc.busy / as
		if r.AnchorEvents > 0 && r.anc.walsenderCPU > 0 {
			r.AnchorWalsenderCPUPer100k = r.anc.walsenderCPU * 100000 / float64(r.AnchorEvents)
		}
	}
	if s.before.stages == nil || s.after.stages == nil {
		return
	}
	r.StageP99Ms, r.StageSamples = map[string]float64{}, map[string]int64{}
	for _, st := range relayStages {
		h := s.after.stages[st].sub(s.before.stages[st])
		r.StageP99Ms[st] = h.quantile(0.99) * 1000
		r.StageSamples[st] = int64(h.total())
	}
	if n := s.after.txns - s.before.txns; n > 0 {
		r.KafkaTxnsPerSecond = n / r.Seconds
		r.RecordsPerKafkaTxn = (s.after.txnRecords - s.before.txnRecords) / n
		r.KafkaCommitP99Ms = s.after.txn["commit"].sub(s.before.txn["commit"]).quantile(0.99) * 1000
		await := s.after.txn["await"].sub(s.before.txn["await"])
		r.KafkaAwaitP50Ms, r.KafkaAwaitP99Ms = await.quantile(0.50)*1000, await.quantile(0.99)*1000
	}
}

// relayStages are the values of cdc_relay_stage_seconds' stage label, in
// the order an event passes them.
var relayStages = []string{"commit_to_read", "read_to_produce", "produce_to_ack"}

// relayScrape is what the window's figures need of the relay's /metrics at
// one instant.
type relayScrape struct {
	stages map[string]histogram // cdc_relay_stage_seconds by stage
	txn    map[string]histogram // cdc_relay_kafka_transaction_seconds by phase
	// Kafka transactions committed and their records
	// (cdc_relay_kafka_transaction_records' count and sum).
	txns, txnRecords float64
}

// scrapeStages reads the relay's stage and Kafka transaction figures; none
// when addr is "" (a tool without the relay's metrics).
func scrapeStages(ctx context.Context, addr string) (relayScrape, error) {
	var sc relayScrape
	if addr == "" {
		return sc, nil
	}
	b, err := fetchMetrics(ctx, addr)
	if err != nil {
		return sc, err
	}
	return parseRelayScrape(b)
}

// parseRelayScrape reads a relayScrape from the relay's /metrics text.
func parseRelayScrape(b []byte) (relayScrape, error) {
	var sc relayScrape
	var err error
	if sc.stages, err = parseHistograms(b, "cdc_relay_stage_seconds", "stage"); err != nil {
		return sc, err
	}
	if sc.txn, err = parseHistograms(b, "cdc_relay_kafka_transaction_seconds", "phase"); err != nil {
		return sc, err
	}
	m, err := parseSamples(b)
	if err != nil {
		return sc, err
	}
	sc.txns, sc.txnRecords = m["cdc_relay_kafka_transaction_records_count"], m["cdc_relay_kafka_transaction_records_sum"]
	return sc, nil
}

// pct returns the q-quantile (nearest rank) of xs, sorting xs.
func pct(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	k := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[min(max(k, 0), len(xs)-1)]
}

// sleepUntil sleeps until t or until ctx is done.
func sleepUntil(ctx context.Context, t time.Time) {
	tm := time.NewTimer(time.Until(t))
	defer tm.Stop()
	select {
	case <-ctx.Done():
	case <-tm.C:
	}
}

// waitActive waits until the tool's slot has a walsender and returns its
// pid.
func waitActive(ctx context.Context, db *database, relay *child, slot string) (int, error) {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-relay.done:
			return 0, relay.failure("exited (%v) at startup", relay.err)
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(slotPoll):
		}
		st, err := db.slot(ctx, slot)
		if err != nil {
			return 0, err
		}
		if st.activePID != 0 {
			return st.activePID, nil
		}
	}
	return 0, relay.failure("slot %s not active within 60 s", slot)
}

// writerPool holds the writers' connections, each with synchronous_commit
// on: with the cluster's default (off) a commit's WAL waits for the WAL
// writer (up to wal_writer_delay, 200 ms) before the walsender may send it,
// which would measure PostgreSQL's setting, not the relay. fsync is off, so
// the flush itself is cheap. The insert is planned once per connection
// (plan_cache_mode force_generic_plan): by default PostgreSQL plans it
// again at every execution, because generate_series over parameters looks
// cheaper with their values known, and those plans cost about 55 µs of
// the writers' backends per transaction, a quarter of a CPU at 5k/s taken
// from the walsenders, the relay and the broker on the same machine.
type writerPool struct {
	url   string
	conns []*pgx.Conn
}

func (p *writerPool) grow(ctx context.Context, n int) error {
	cfg, err := pgx.ParseConfig(p.url)
	if err != nil {
		return fmt.Errorf("writer connection: %w", err)
	}
	cfg.RuntimeParams["synchronous_commit"] = "on"
	cfg.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	for len(p.conns) < n {
		c, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			return fmt.Errorf("writer connection: %w", err)
		}
		p.conns = append(p.conns, c)
	}
	return nil
}

// forRate grows the pool to the writers rate needs (perWriter each) and
// returns them.
func (p *writerPool) forRate(ctx context.Context, rate int) ([]*pgx.Conn, error) {
	n := max(1, int(math.Ceil(float64(rate)/perWriter)))
	if err := p.grow(ctx, n); err != nil {
		return nil, err
	}
	return p.conns[:n], nil
}

func (p *writerPool) close() {
	for _, c := range p.conns {
		c.Close(context.Background())
	}
}

// createAppendTimeTopic creates topic with message.timestamp.type
// LogAppendTime, so that each record's timestamp is the broker's append
// time.
func createAppendTimeTopic(ctx context.Context, broker, topic string, partitions int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic = topic
	t.NumPartitions = int32(partitions)
	t.ReplicationFactor = 1
	c := kmsg.NewCreateTopicsRequestTopicConfig()
	c.Name = "message.timestamp.type"
	c.Value = kmsg.StringPtr("LogAppendTime")
	t.Configs = append(t.Configs, c)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	for _, rt := range resp.Topics {
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", topic, err)
		}
	}
	return nil
}

// consume reads topic from the start with a 10 ms fetch wait
// (read_committed if readCommitted is set) and records, per
// outbox id, when the record came back from PollFetches and its
// LogAppendTime, until ctx is done.
func consume(ctx context.Context, broker, topic string, readCommitted bool, ev *eventTimes) error {
	opts := []kgo.Opt{kgo.SeedBrokers(broker), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(10 * time.Millisecond), kgo.FetchMinBytes(1)}
	if readCommitted {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	reported := 0
	for {
		fs := cl.PollFetches(ctx)
		now := time.Now().UnixNano()
		if ctx.Err() != nil {
			return nil
		}
		// Fetch errors are retried by the client; report the first few.
		for _, fe := range fs.Errors() {
			if reported < 5 {
				reported++
				progress("latency: consumer: %s[%d]: %v (retrying)", fe.Topic, fe.Partition, fe.Err)
			}
		}
		fs.EachRecord(func(r *kgo.Record) {
			id := int64(-1)
			for _, h := range r.Headers {
				if h.Key == "id" {
					id, _ = strconv.ParseInt(string(h.Value), 10, 64)
				}
			}
			k := ev.index(id)
			if k < 0 {
				ev.outOfRange.Add(1)
				return
			}
			if !ev.recv[k].CompareAndSwap(0, now) {
				ev.dups.Add(1)
				return
			}
			ev.append[k].Store(r.Timestamp.UnixNano())
		})
	}
}

// printLatency prints the latency table of tool.
func printLatency(w io.Writer, o options, tool string, rs []latencyResult) {
	fmt.Fprintf(w, "\nSteady-state latency of %s: single-row transactions, %s measured per rate after %s warm-up, %d partition(s)\n", tool, o.duration, o.warmup, o.partitions)
	fmt.Fprintln(w, "latency = commit returned to the writer -> record received by a franz-go consumer (FetchMaxWait 10 ms, the least franz-go allows); append = -> broker LogAppendTime")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target/s\twriters\tachieved/s\tevents\tmissing\tp50 ms\tp99 ms\tmax ms\tappend p50\tappend p99\tappend max\tcommit p99 ms\t"+tool+" RSS MB (median/max)\t"+tool+" CPU s/100k\twalsender CPU s/100k\t"+tool+" / walsender CPU\t"+tool+" / walsender runs per event\tbroker CPU s/100k\tmachine busy CPUs\tbroker GC pauses (sum / max ms)\t")
	for _, r := range rs {
		fmt.Fprintf(tw, "%d\t%d\t%.0f\t%d\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.1f / %.1f\t%.2f\t%.2f\t%.2fx\t%.1f / %.1f\t%.2f\t%.2f\t%d (%.0f / %.0f)\t\n",
			r.TargetRate, r.Writers, r.AchievedRate, r.Events, r.Missing, r.P50Ms, r.P99Ms, r.MaxMs,
			r.AppendP50Ms, r.AppendP99Ms, r.AppendMaxMs, r.CommitP99Ms, r.RSSMedianMB, r.RSSMaxMB,
			r.RelayCPUPer100k, r.WalsenderCPUPer100k, safeDiv(r.RelayCPUPer100k, r.WalsenderCPUPer100k), r.RelayRunsPerEvent, r.WalsenderRunsPerEvent,
			r.BrokerCPUPer100k, r.MachineBusyCPUs, r.BrokerGCPauses, r.BrokerGCPauseMs, r.BrokerGCMaxMs)
	}
	tw.Flush()
}

// anchorGoal is the issue 18 goal for the relay's p99 over the anchor's, by
// delivery mode, in milliseconds.
func anchorGoal(delivery string) float64 {
	if delivery == exactlyOnce {
		return 25
	}
	return 10
}

// printAnchor prints, per rate, the relay's end-to-end p99 next to
// pg_recvlogical's under the same writers, the difference against the goal
// (reported, not enforced), each stage's p99 from the relay's histograms,
// and the machine's busy CPUs in the anchor's window and in the relay's.
func printAnchor(w io.Writer, o options, tool, delivery string, rs []latencyResult) {
	goal := anchorGoal(delivery)
	consumer := "read_uncommitted"
	if delivery == exactlyOnce {
		consumer = "read_committed"
	}
	how := "alone on a fresh slot in a window just before the relay's, the relay then alone on a fresh slot"
	if o.anchor == anchorBeside {
		how = "on its own slot beside the relay, both at once"
	}
	fmt.Fprintf(w, "\n%s against the anchor (pg_recvlogical %s, same writers throughout; commit -> its output line read by the bench); the relay's consumer reads %s\n", tool, how, consumer)
	fmt.Fprintln(w, "stage p99s: from the relay's cdc_relay_stage_seconds over the window (a sample of the events), interpolated inside buckets 1.5x apart, so each is within a bucket's width")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "target/s\tanchor events\tanchor p50 ms\tanchor p99 ms\tanchor missing\t%s p99 ms\tp99 - anchor p99\tgoal <= +%.0f ms\tcommit_to_read p99\tread_to_produce p99\tproduce_to_ack p99\tstage samples\tbusy CPUs anchor / relay window\t\n", tool, goal)
	for _, r := range rs {
		diff := r.P99Ms - r.AnchorP99Ms
		var samples []string
		for _, st := range relayStages {
			samples = append(samples, strconv.FormatInt(r.StageSamples[st], 10))
		}
		fmt.Fprintf(tw, "%d\t%d\t%.2f\t%.2f\t%d\t%.2f\t%+.2f\t%s\t%.2f\t%.2f\t%.2f\t%s\t%.2f / %.2f\t\n",
			r.TargetRate, r.AnchorEvents, r.AnchorP50Ms, r.AnchorP99Ms, r.AnchorMissing, r.P99Ms, diff, verdict(diff <= goal),
			r.StageP99Ms["commit_to_read"], r.StageP99Ms["read_to_produce"], r.StageP99Ms["produce_to_ack"], strings.Join(samples, "/"),
			r.AnchorMachineBusyCPUs, r.MachineBusyCPUs)
	}
	tw.Flush()
	if delivery != exactlyOnce {
		return
	}
	fmt.Fprintln(w, "Kafka transactions over the window: committed per second, mean records each (its checkpoint record included), the p99 of a commit (the last acknowledgements, then EndTxn), and how long each one's first record waited for the coordinator to complete the commit before it")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target/s\tKafka txns/s\trecords/txn\tcommit p99 ms\tawait p50 ms\tawait p99 ms\t")
	for _, r := range rs {
		fmt.Fprintf(tw, "%d\t%.1f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", r.TargetRate, r.KafkaTxnsPerSecond, r.RecordsPerKafkaTxn, r.KafkaCommitP99Ms, r.KafkaAwaitP50Ms, r.KafkaAwaitP99Ms)
	}
	tw.Flush()
}

// printLatencyRatios prints, per rate both measured, Debezium's latency
// percentiles and RSS over the relay's.
func printLatencyRatios(w io.Writer, relay, dbz []latencyResult) {
	fmt.Fprintln(w, "\nDebezium / cdc-relay at the same target rates (consumer latency; RSS median):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target/s\tp50\tp99\tmax\tRSS\tCPU s/100k\t")
	for _, d := range dbz {
		for _, r := range relay {
			if r.TargetRate != d.TargetRate {
				continue
			}
			fmt.Fprintf(tw, "%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t\n", d.TargetRate, safeDiv(d.P50Ms, r.P50Ms), safeDiv(d.P99Ms, r.P99Ms),
				safeDiv(d.MaxMs, r.MaxMs), safeDiv(d.RSSMedianMB, r.RSSMedianMB), safeDiv(d.RelayCPUPer100k, r.RelayCPUPer100k))
		}
	}
	tw.Flush()
}

// parseRates reads --rates, a comma-separated list of events per second.
func parseRates(s string) ([]int, error) {
	var rs []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--rates: %q is not a positive number", f)
		}
		rs = append(rs, n)
	}
	return rs, nil
}

// writeJSONTo writes v as indented JSON to path ("-" is stdout, "" nothing).
func writeJSONTo(path string, v any) error {
	if path == "" {
		return nil
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if path == "-" {
		_, err = os.Stdout.Write(b)
		return err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("--json: %w", err)
	}
	return nil
}
