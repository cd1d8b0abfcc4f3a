package main

// Fault tests: PostgreSQL restarted or killed, Kafka stopped, either
// connection blackholed through a TCP proxy, the schema registry down, and
// two replicas on one slot. Each runs a steady write load through the fault
// and checks that every committed event reaches Kafka, in order per
// aggregate, with the same relay process recovering by itself.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/internal/kafkatest"
	"github.com/cdc-relay/cdc-relay/internal/pgtest"
	"github.com/cdc-relay/cdc-relay/internal/registrytest"
	"github.com/cdc-relay/cdc-relay/internal/relaytest"
	"github.com/cdc-relay/cdc-relay/internal/tcpproxy"
	"github.com/cdc-relay/cdc-relay/internal/testtier"
)

// loadInterval spaces the load writer's transactions: 40 tx/s of 1-10 rows.
const loadInterval = 25 * time.Millisecond

// loadWriter inserts a steady load into the fixture's outbox from its own
// goroutine. A transaction that fails (the server restarted, the connection
// broke) is retried on a new connection; only committed ids are counted.
type loadWriter struct {
	f    *fixture
	url  string
	stop chan struct{}
	done chan struct{}

	mu       sync.Mutex
	ids      []int64
	failures int
	lastErr  error
}

// startLoad starts writing to the outbox of f in the database at url.
func startLoad(t *testing.T, f *fixture, url string) *loadWriter {
	t.Helper()
	w := &loadWriter{f: f, url: url, stop: make(chan struct{}), done: make(chan struct{})}
	go w.run(rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3)))
	t.Cleanup(func() { w.halt() })
	return w
}

func (w *loadWriter) run(rng *rand.Rand) {
	defer close(w.done)
	tick := time.NewTicker(loadInterval)
	defer tick.Stop()
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			closeQuietly(conn)
		}
	}()
	var pending []event
	for n := 0; ; {
		select {
		case <-w.stop:
			return
		case <-tick.C:
		}
		if pending == nil {
			pending = make([]event, 1+rng.IntN(10))
			for i := range pending {
				agg := uuidFor(1000 + rng.IntN(30))
				pending[i] = event{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, n)}
				if rng.IntN(4) == 0 {
					pending[i].EventType, pending[i].Payload = "OrderCancelled", orderCancelled(agg, n)
				}
				n++
			}
		}
		if conn == nil {
			c, err := connectForLoad(w.url)
			if err != nil {
				w.fail(err)
				continue
			}
			conn = c
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ids, err := w.f.insertTx(ctx, conn, pending)
		cancel()
		if err != nil {
			// The commit's fate may be unknown: those ids are not counted,
			// and the same events are inserted again as new rows.
			closeQuietly(conn)
			conn = nil
			w.fail(err)
			continue
		}
		w.mu.Lock()
		w.ids = append(w.ids, ids...)
		w.mu.Unlock()
		pending = nil
	}
}

// connectForLoad opens the writer's connection. pgtest runs the server with
// synchronous_commit=off; the writer turns it on so that a commit it counts
// survives an immediate shutdown.
func connectForLoad(url string) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "SET synchronous_commit = on"); err != nil {
		closeQuietly(conn)
		return nil, err
	}
	return conn, nil
}

func closeQuietly(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	conn.Close(ctx)
}

func (w *loadWriter) fail(err error) {
	w.mu.Lock()
	w.failures++
	w.lastErr = err
	w.mu.Unlock()
}

// committed counts the ids committed so far.
func (w *loadWriter) committed() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.ids)
}

// waitCommitted waits until at least n ids are committed.
func (w *loadWriter) waitCommitted(t *testing.T, n int, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, fmt.Sprintf("the writer to commit %d events", n), func() bool { return w.committed() >= n })
}

func (w *loadWriter) halt() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

// finish stops the writer and returns every committed id.
func (w *loadWriter) finish(t *testing.T) []int64 {
	t.Helper()
	w.halt()
	w.mu.Lock()
	defer w.mu.Unlock()
	t.Logf("writer: %d events committed, %d failed attempts (last: %v)", len(w.ids), w.failures, w.lastErr)
	return append([]int64(nil), w.ids...)
}

// checkDelivery checks that every id arrived and that, per aggregate, first
// deliveries are in commit order (the single writer commits ids in
// increasing order). It returns the number of duplicates.
func checkDelivery(t *testing.T, recs []record, ids []int64) int {
	t.Helper()
	want := make(map[int64]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	sortByLog(recs)
	seen := map[int64]bool{}
	last := map[string]int64{}
	dups, bad := 0, 0
	for _, r := range recs {
		id, err := strconv.ParseInt(r.Headers["id"], 10, 64)
		if err != nil {
			t.Errorf("record %s[%d]@%d without a numeric id header", r.Topic, r.Partition, r.Offset)
			continue
		}
		if seen[id] {
			dups++
			continue
		}
		seen[id] = true
		if id < last[r.Key] && bad < 5 {
			bad++
			t.Errorf("aggregate %s: event %d first delivered after event %d", r.Key, id, last[r.Key])
		}
		last[r.Key] = max(last[r.Key], id)
	}
	for id := range want {
		if !seen[id] {
			t.Fatalf("event %d lost", id)
		}
	}
	return dups
}

// stillRunning fails the test if the relay process exited: recovering means
// the same process carried on, with no restart by hand.
func stillRunning(t *testing.T, r *relay) {
	t.Helper()
	select {
	case <-r.done:
		t.Fatalf("the relay exited (code %d) instead of recovering", r.exitCode)
	default:
	}
}

// outputCount counts the relay's log lines containing s.
func outputCount(r *relay, s string) int { return strings.Count(r.Output(), s) }

// newTCPProxy starts a proxy to target, closed at cleanup.
func newTCPProxy(t *testing.T, target string) *tcpproxy.Proxy {
	t.Helper()
	p, err := tcpproxy.New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// viaProxy is dbURL with the proxy's address instead of the server's.
func viaProxy(t *testing.T, p *tcpproxy.Proxy) string {
	t.Helper()
	real := "127.0.0.1:" + strconv.Itoa(pg.Port())
	if !strings.Contains(dbURL, real) {
		t.Fatalf("dbURL %s does not contain %s", dbURL, real)
	}
	return strings.Replace(dbURL, real, p.Addr(), 1)
}

// holdFault keeps a fault in place for d under load, polling that the
// writer keeps committing meanwhile: the length of the outage is the point
// of the test.
func holdFault(t *testing.T, w *loadWriter, d time.Duration) {
	t.Helper()
	began, before := time.Now(), w.committed()
	waitFor(t, d+30*time.Second, "the outage to last "+d.String()+" under load", func() bool {
		return time.Since(began) >= d && w.committed() > before
	})
}

// startPublishing starts the load and waits until the relay publishes it.
func startPublishing(t *testing.T, f *fixture, r *relay) *loadWriter {
	t.Helper()
	w := startLoad(t, f, f.pg.url)
	r.waitMetric("cdc_relay_events_published_total", 60*time.Second, func(v float64) bool { return v >= 50 })
	return w
}

// finishLoad keeps the load going a little after recovery, stops it and
// checks that everything arrived.
func finishLoad(t *testing.T, w *loadWriter, c *consumer, timeout time.Duration) {
	t.Helper()
	w.waitCommitted(t, w.committed()+100, 60*time.Second)
	ids := w.finish(t)
	recs := c.waitIDs(timeout, ids)
	dups := checkDelivery(t, recs, ids)
	t.Logf("%d events delivered, %d records, %d duplicates", len(ids), len(recs), dups)
}

// testPostgresRestart restarts a cluster of the test's own, so that it
// runs in parallel with the tests on the shared one.
func testPostgresRestart(t *testing.T, mode string) {
	t.Parallel()
	target := startTarget(t, pgtest.DefaultVersion, nil)
	f := newFixtureOn(t, target, "")
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	r := startRelay(t, f.args())
	r.waitStreaming(60 * time.Second)
	w := startPublishing(t, f, r)

	began := time.Now()
	if err := target.cluster.Restart(mode); err != nil {
		t.Fatal(err)
	}
	t.Logf("pg_ctl restart -m %s took %s", mode, time.Since(began).Round(time.Millisecond))
	waitFor(t, 60*time.Second, "the relay to stream again", func() bool { return outputCount(r, "msg=streaming") >= 2 })
	t.Logf("relay streaming again %s after the restart began", time.Since(began).Round(time.Millisecond))
	finishLoad(t, w, c, 120*time.Second)
	stillRunning(t, r)
}

// TestFaultPostgresRestartFast: PostgreSQL restarted with pg_ctl restart -m
// fast under load: the relay reconnects by itself, nothing is lost.
func TestFaultPostgresRestartFast(t *testing.T) { testPostgresRestart(t, "fast") }

// TestFaultPostgresKillImmediate: PostgreSQL stopped with -m immediate (a
// crash: no shutdown checkpoint, the slot's last saved position may be older
// than what was confirmed) and started again: nothing is lost.
func TestFaultPostgresKillImmediate(t *testing.T) { testPostgresRestart(t, "immediate") }

// TestFaultKafkaStopped: the broker is down for 30 s under load. The relay
// retries (logging rate-limited, with the consecutive error count), keeps
// reading up to its in-flight bound, and delivers everything once the broker
// is back, without reconnecting to PostgreSQL. The broker is the test's
// own.
func TestFaultKafkaStopped(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	f.ownBroker()
	c := f.consume("^" + f.topicPrefix + `\..*`)
	r := startRelay(t, f.args())
	r.waitStreaming(60 * time.Second)
	w := startPublishing(t, f, r)

	stopping := time.Now()
	restart := f.stopBroker()
	t.Logf("broker stopped in %s", time.Since(stopping).Round(time.Millisecond))
	read := r.waitMetric("cdc_relay_events_read_total", 10*time.Second, func(float64) bool { return true })
	holdFault(t, w, 30*time.Second)
	if v, _ := r.metric("cdc_relay_events_read_total"); v <= read {
		t.Fatalf("the relay stopped reading while Kafka was down (%v events read before, %v after)", read, v)
	}
	starting := time.Now()
	restart()
	t.Logf("broker started again in %s", time.Since(starting).Round(time.Millisecond))
	published, _ := r.metric("cdc_relay_events_published_total")
	r.waitMetric("cdc_relay_events_published_total", 60*time.Second, func(v float64) bool { return v > published })
	t.Logf("relay publishing again %s after the broker answered", time.Since(starting).Round(time.Millisecond))
	finishLoad(t, w, c, 120*time.Second)
	stillRunning(t, r)

	out := r.Output()
	warnings := strings.Count(out, `msg="kafka error, retrying"`)
	if warnings == 0 || !strings.Contains(out, "consecutive_errors=") {
		t.Fatalf("no rate-limited Kafka error lines with consecutive_errors:\n%s", tailString(out, 3000))
	}
	// Per partition: the first 3 failures, then every 20th; 30 s of backoff
	// capped at 5 s is about 10 attempts.
	if warnings > 30 {
		t.Fatalf("%d Kafka error lines for a 30 s outage: not rate-limited", warnings)
	}
	if n := outputCount(r, "msg=streaming"); n != 1 {
		t.Fatalf("the relay reconnected to PostgreSQL %d times for a Kafka outage", n-1)
	}
	t.Logf("kafka error lines during the outage: %d", warnings)
}

// TestFaultPostgresBlackholed: the relay's connection to PostgreSQL goes
// silent (packets dropped, socket open). The relay notices through its read
// deadline — max(--read-timeout, wal_sender_timeout/2 + 5 s), 10 s here —
// reconnects (every attempt bounded by the connect and setup timeouts while
// the path stays dead), and streams again once the path is back.
func TestFaultPostgresBlackholed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	px := newTCPProxy(t, "127.0.0.1:"+strconv.Itoa(pg.Port()))
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	r := startRelay(t, f.args("--pg-url", viaProxy(t, px), "--read-timeout", "3s", "--status-interval", "500ms"))
	r.waitStreaming(60 * time.Second)
	w := startPublishing(t, f, r) // the writer connects directly

	px.Blackhole()
	began := time.Now()
	waitFor(t, 40*time.Second, "the relay to notice the silent stream", func() bool { return outputCount(r, "cause=read_timeout") > 0 })
	noticed := time.Since(began)
	t.Logf("silent stream noticed after %s", noticed.Round(time.Millisecond))
	if noticed > 16*time.Second {
		t.Fatalf("the relay took %s to notice a dead stream; its read timeout is 10 s", noticed)
	}
	// While the path stays dead, an attempt fails in bounded time (the
	// connect timeout, 10 s) instead of hanging, and is retried.
	waitFor(t, 40*time.Second, "a reconnect attempt through the dead path to fail", func() bool { return outputCount(r, "msg=reconnect") >= 2 })
	t.Logf("an attempt on the dead path failed %s after the blackhole began", time.Since(began).Round(time.Millisecond))
	// Not ready meanwhile, saying why.
	waitFor(t, 30*time.Second, "/readyz 503 reconnecting with its cause", func() bool {
		code, body := r.getJSON("/readyz")
		return code == 503 && body["state"] == "reconnecting" && strings.Contains(body["reason"], "cause: ")
	})
	px.Resume()
	waitFor(t, 60*time.Second, "the relay to stream again", func() bool { return outputCount(r, "msg=streaming") >= 2 })
	t.Logf("streaming again %s after the blackhole began", time.Since(began).Round(time.Millisecond))
	waitFor(t, 30*time.Second, "/readyz 200 again", func() bool { code, _ := r.getJSON("/readyz"); return code == 200 })
	finishLoad(t, w, c, 120*time.Second)
	stillRunning(t, r)
}

// consumeFrom is consume against another broker.
func consumeFrom(t *testing.T, addr, topicRegex string) *consumer {
	t.Helper()
	return consume(t, topicRegex, kgo.SeedBrokers(addr))
}

// proxiedBroker starts a broker of the test's own that advertises a TCP
// proxy, so that every client connection to it passes through the proxy.
func proxiedBroker(t *testing.T, extra map[string]string) (*tcpproxy.Proxy, *kafkatest.Broker) {
	t.Helper()
	testtier.Need(t)
	px := newTCPProxy(t, "")
	b := relaytest.PrivateBroker(t, kafkatest.Options{AdvertisedHost: px.Addr(), ExtraConfig: extra})
	px.SetTarget(b.Addr())
	return px, b
}

// TestFaultKafkaBlackholed: a broker of its own advertises a TCP proxy, so
// every client connection to it passes through the proxy; the proxy then
// drops everything for 20 s under load. Produce requests stall, fail at the
// request timeout and are retried, in order, on new connections; nothing is
// lost and the relay never reconnects to PostgreSQL.
func TestFaultKafkaBlackholed(t *testing.T) {
	t.Parallel()
	px, b := proxiedBroker(t, map[string]string{"num.partitions": "3"})

	f := newFixture(t, "")
	c := consumeFrom(t, b.Addr(), "^"+f.topicPrefix+`\..*`)
	r := startRelay(t, f.args("--kafka-brokers", px.Addr()))
	r.waitStreaming(60 * time.Second)
	w := startPublishing(t, f, r)

	px.Blackhole()
	published, _ := r.metric("cdc_relay_events_published_total")
	holdFault(t, w, 20*time.Second)
	px.Resume()
	r.waitMetric("cdc_relay_events_published_total", 60*time.Second, func(v float64) bool { return v > published })
	finishLoad(t, w, c, 120*time.Second)
	stillRunning(t, r)
	if n := outputCount(r, "msg=streaming"); n != 1 {
		t.Fatalf("the relay reconnected to PostgreSQL %d times for a Kafka outage", n-1)
	}
}

// startRegistry starts a schema registry of the test's own, so that
// stopping it does not disturb other tests.
func startRegistry(t *testing.T) *registrytest.Registry {
	t.Helper()
	testtier.Need(t)
	reg, err := registrytest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	return reg
}

// TestFaultRegistryDownAtStartup: the relay starts while the registry is
// unreachable; it retries with backoff instead of exiting, and streams
// everything once the registry answers.
func TestFaultRegistryDownAtStartup(t *testing.T) {
	t.Parallel()
	reg := startRegistry(t)
	// The relay reaches the registry through a proxy that counts attempts.
	px := newTCPProxy(t, strings.TrimPrefix(reg.URL(), "http://"))
	if err := reg.Stop(); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, "")
	// The publication and slot exist already (a previous run made them), so
	// what is written while the relay waits for the registry is kept for it.
	f.exec(fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE public.%s WITH (publish = 'insert')", f.publication, f.table))
	f.exec("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", f.slot)
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	r := startRelay(t, f.args("--schema-registry-url", "http://"+px.Addr()))
	w := startLoad(t, f, dbURL)
	waitFor(t, 30*time.Second, "the relay to retry the registry", func() bool { return px.Accepted() >= 4 })
	stillRunning(t, r)
	if !strings.Contains(r.Output(), `msg="schema registry request failed, retrying"`) {
		t.Fatalf("no retry line:\n%s", tailString(r.Output(), 3000))
	}
	if err := reg.Restart(); err != nil {
		t.Fatal(err)
	}
	r.waitStreaming(60 * time.Second)
	finishLoad(t, w, c, 90*time.Second)
	stillRunning(t, r)
}

// TestFaultRegistryDownWhileStreaming: once a (topic, event type) has its
// schema id, events keep flowing with the registry down: ids are cached.
func TestFaultRegistryDownWhileStreaming(t *testing.T) {
	t.Parallel()
	reg := startRegistry(t)
	f := newFixture(t, "")
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	r := startRelay(t, f.args("--schema-registry-url", reg.URL()))
	r.waitStreaming(60 * time.Second)
	w := startPublishing(t, f, r)
	waitFor(t, 30*time.Second, "both event types in Kafka", func() bool {
		types := map[string]bool{}
		for _, rec := range c.records() {
			types[rec.Headers["event_type"]] = true
		}
		return types["OrderCreated"] && types["OrderCancelled"]
	})
	if err := reg.Stop(); err != nil {
		t.Fatal(err)
	}
	// Everything committed while the registry is down arrives while it is
	// still down.
	finishLoad(t, w, c, 60*time.Second)
	stillRunning(t, r)
	if n := outputCount(r, "msg=streaming"); n != 1 {
		t.Fatalf("the relay reconnected %d times while the registry was down", n-1)
	}
}

// slotPID returns the pid of the process streaming from the slot, 0 if none.
func slotPID(t *testing.T, conn *pgx.Conn, slot string) int32 {
	t.Helper()
	var pid *int32
	if err := conn.QueryRow(context.Background(), "SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if pid == nil {
		return 0
	}
	return *pid
}

// standbyAttempt matches a standby's log lines for one attempt on the slot.
var standbyAttempt = regexp.MustCompile(`time=(\S+) level=\S+ msg="standby: slot (is|still) active`)

// standbyGaps returns the attempts seen in a relay's log and the times
// between them, in order.
func standbyGaps(t *testing.T, out string) (attempts int, gaps []time.Duration) {
	t.Helper()
	var prev time.Time
	for _, m := range standbyAttempt.FindAllStringSubmatch(out, -1) {
		at, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			t.Fatalf("log time %q: %v", m[1], err)
		}
		if !prev.IsZero() {
			gaps = append(gaps, at.Sub(prev))
		}
		prev = at
		attempts++
	}
	return attempts, gaps
}

// waitStandby waits until r is a standby that has tried the slot a few times.
func waitStandby(t *testing.T, r *relay) {
	t.Helper()
	waitFor(t, 30*time.Second, "standby retries", func() bool {
		n, _ := standbyGaps(t, r.Output())
		return n >= 3
	})
	stillRunning(t, r)
	if v, err := r.metric("cdc_relay_active"); err != nil || v != 0 {
		t.Fatalf("standby cdc_relay_active = %v (%v), want 0", v, err)
	}
}

// checkStandbyRetries checks, over a standby's whole wait, that it tried the
// slot about every 2 s: the backoff waits at most 1.92 s, and the attempt
// itself (a connection, IDENTIFY_SYSTEM, START_REPLICATION) comes on top.
// On a machine busy with other tests one attempt can take a second or more,
// so the median gap must stay within 2.5 s and none may pass 6 s: a
// standby that backed off like a reconnect (up to 5 s, plus jitter) fails
// the first, one that stopped trying the second.
func checkStandbyRetries(t *testing.T, r *relay, atLeast int) {
	t.Helper()
	n, gaps := standbyGaps(t, r.Output())
	sorted := slices.Clone(gaps)
	slices.Sort(sorted)
	var median, longest time.Duration
	if len(sorted) > 0 {
		median, longest = sorted[len(sorted)/2], sorted[len(sorted)-1]
	}
	t.Logf("standby: %d attempts, median gap %s, longest %s", n, median.Round(time.Millisecond), longest.Round(time.Millisecond))
	if n < atLeast {
		t.Fatalf("the standby tried the slot %d times, want at least %d", n, atLeast)
	}
	if median > 2500*time.Millisecond {
		t.Fatalf("the standby's median wait between attempts was %s; it must retry about every 2 s (gaps %v)", median, gaps)
	}
	if longest > 6*time.Second {
		t.Fatalf("the standby waited %s between two attempts; it must retry about every 2 s (gaps %v)", longest, gaps)
	}
}

// TestStandbyTakeoverAfterKill: a second relay on the slot is a standby;
// when the active one is killed with SIGKILL under load, the standby takes
// over within 10 s of PostgreSQL releasing the slot, and nothing is lost.
func TestStandbyTakeoverAfterKill(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	active := startRelay(t, f.args())
	active.waitStreaming(60 * time.Second)
	standby := startRelay(t, f.args())
	waitStandby(t, standby)
	w := startPublishing(t, f, active)

	conn := connect(t)
	pid := slotPID(t, conn, f.slot)
	active.kill()
	waitFor(t, 30*time.Second, "PostgreSQL to release the slot", func() bool { return slotPID(t, conn, f.slot) != pid })
	released := time.Now()
	standby.waitStreaming(15 * time.Second)
	took := time.Since(released)
	t.Logf("takeover %s after the slot was released", took.Round(time.Millisecond))
	if took > 10*time.Second {
		t.Fatalf("takeover took %s after the slot was released, want at most 10 s", took)
	}
	checkStandbyRetries(t, standby, 3)
	finishLoad(t, w, c, 120*time.Second)
	stillRunning(t, standby)
}

// TestStandbyTakeoverAfterBlackhole: the active relay's connection to
// PostgreSQL is blackholed, so PostgreSQL sees no close: only
// wal_sender_timeout (10 s in this harness) ends the walsender and releases
// the slot. The standby takes over within 10 s of that; the old active one
// notices through its read deadline and, once its path is back, becomes the
// standby. Nothing is lost.
func TestStandbyTakeoverAfterBlackhole(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	px := newTCPProxy(t, "127.0.0.1:"+strconv.Itoa(pg.Port()))
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	active := startRelay(t, f.args("--pg-url", viaProxy(t, px), "--read-timeout", "3s", "--status-interval", "500ms"))
	active.waitStreaming(60 * time.Second)
	standby := startRelay(t, f.args())
	waitStandby(t, standby)
	w := startPublishing(t, f, active)

	conn := connect(t)
	pid := slotPID(t, conn, f.slot)
	px.Blackhole()
	began := time.Now()
	waitFor(t, 60*time.Second, "PostgreSQL to release the slot", func() bool { return slotPID(t, conn, f.slot) != pid })
	released := time.Now()
	t.Logf("slot released %s after the blackhole began (wal_sender_timeout 10 s)", released.Sub(began).Round(time.Millisecond))
	standby.waitStreaming(15 * time.Second)
	took := time.Since(released)
	t.Logf("takeover %s after the slot was released", took.Round(time.Millisecond))
	if took > 10*time.Second {
		t.Fatalf("takeover took %s after the slot was released, want at most 10 s", took)
	}
	// Ten seconds of waiting: the backoff reached its cap.
	checkStandbyRetries(t, standby, 6)
	waitFor(t, 40*time.Second, "the old active relay to notice", func() bool { return outputCount(active, "cause=read_timeout") > 0 })
	px.Resume()
	waitFor(t, 60*time.Second, "the old active relay to become the standby", func() bool {
		return strings.Contains(active.Output(), `msg="standby: slot is active`)
	})
	finishLoad(t, w, c, 120*time.Second)
	stillRunning(t, standby)
	stillRunning(t, active)
}

// sortByLog orders records as the topics hold them: by topic, partition
// and offset.
func sortByLog(recs []record) {
	sort.SliceStable(recs, func(i, j int) bool {
		if recs[i].Topic != recs[j].Topic {
			return recs[i].Topic < recs[j].Topic
		}
		if recs[i].Partition != recs[j].Partition {
			return recs[i].Partition < recs[j].Partition
		}
		return recs[i].Offset < recs[j].Offset
	})
}
