package main

// Exactly-once delivery (--delivery exactly-once) against the real
// services: a zombie active fenced by the standby that took its slot, the
// shipped two-replica setup running without fencing, and a 1M-row
// PostgreSQL transaction delivered once within the memory bound. What
// Kafka holds is read by franz-go consumers with read_committed (what an
// exactly-once consumer sees) and read_uncommitted (what was written at
// all), not by the relay's code.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDeliverySettings: --delivery takes at-least-once (the default) or
// exactly-once and nothing else (exit 2 naming the field); the transaction
// settings default to 100ms, 10000 and 60s, as issue 18 and docs/CONFIGURATION.md say.
func TestDeliverySettings(t *testing.T) {
	c, err := LoadConfig(required, env(nil), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if c.ExactlyOnce || c.TransactionalID != "" || c.TxnInterval != 100*time.Millisecond || c.TxnMaxEvents != 10000 || c.TxnTimeout != 60*time.Second {
		t.Fatalf("defaults: exactly-once %v, transactional id %q, txn-interval %s, txn-max-events %d, txn-timeout %s; want false, \"\", 100ms, 10000, 1m0s",
			c.ExactlyOnce, c.TransactionalID, c.TxnInterval, c.TxnMaxEvents, c.TxnTimeout)
	}
	c, err = LoadConfig(append(append([]string{}, required...), "--delivery", "exactly-once", "--transactional-id", "orders-relay"), env(nil), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if !c.ExactlyOnce || c.TransactionalID != "orders-relay" {
		t.Fatalf("--delivery exactly-once --transactional-id orders-relay: exactly-once %v, transactional id %q", c.ExactlyOnce, c.TransactionalID)
	}
	c, err = LoadConfig(required, env(map[string]string{"CDC_RELAY_DELIVERY": "exactly-once", "CDC_RELAY_TXN_MAX_EVENTS": "500"}), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if !c.ExactlyOnce || c.TxnMaxEvents != 500 {
		t.Fatalf("CDC_RELAY_DELIVERY=exactly-once CDC_RELAY_TXN_MAX_EVENTS=500: exactly-once %v, txn-max-events %d", c.ExactlyOnce, c.TxnMaxEvents)
	}
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		wantKey string
	}{
		{"exactly_once", []string{"--delivery", "exactly_once"}, nil, "--delivery"},
		{"at-most-once", []string{"--delivery", "at-most-once"}, nil, "--delivery"},
		{"capitalised", []string{"--delivery", "Exactly-Once"}, nil, "--delivery"},
		{"env", nil, map[string]string{"CDC_RELAY_DELIVERY": "transactional"}, "--delivery"},
		{"txn-interval zero", []string{"--txn-interval", "0s"}, nil, "--txn-interval"},
		{"txn-max-events zero", []string{"--txn-max-events", "0"}, nil, "--txn-max-events"},
		{"txn-timeout over an hour", []string{"--txn-timeout", "2h"}, nil, "--txn-timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			code := run(append(append([]string{"run"}, required...), tc.args...), env(tc.env), &bytes.Buffer{}, &stderr)
			if code != exitConfig {
				t.Fatalf("exit code = %d, want %d; stderr: %s", code, exitConfig, stderr.String())
			}
			if out := stderr.String(); !strings.Contains(out, tc.wantKey) {
				t.Fatalf("stderr does not name %s: %s", tc.wantKey, out)
			}
		})
	}
}

// exactlyOnce are the flags of a relay in exactly-once mode, everything
// else at its default (the transactional id is cdc-relay-<relay id>, so
// two relays on one slot share it).
var exactlyOnce = []string{"--delivery", "exactly-once"}

// fenceLine is the line a relay logs once it has fenced the older
// instances (InitProducerID) and read the checkpoint.
const fenceLine = `msg="exactly-once: fenced older instances and read the checkpoint"`

// fencedReports are the lines, in out, in which a relay says that another
// instance fenced it (its own fence line aside).
func fencedReports(out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		low := strings.ToLower(l)
		if strings.Contains(l, fenceLine) {
			continue
		}
		if strings.Contains(low, "fenced") || strings.Contains(low, "invalid_producer_epoch") {
			lines = append(lines, l)
		}
	}
	return lines
}

// tally is a lean independent consumer: franz-go with the harness's
// options, keeping only what these tests check, per id header: how often
// each id arrived and whether, per aggregate, ids arrived in increasing
// order. consume() keeps every record whole, which for the hundreds of
// thousands of records here would take hundreds of MB of the test process
// on a machine the relay's own memory bound is measured on.
type tally struct {
	t         *testing.T
	committed bool // read_committed

	mu       sync.Mutex
	seen     map[int64]int
	last     map[string]int64 // aggregate → newest id seen
	dups     int
	disorder []string
	records  int
}

// consumeTally starts a tally of every topic matching topicRegex, with
// read_committed when committed is set (read_uncommitted otherwise, what
// was written at all, aborted transactions included).
func consumeTally(t *testing.T, topicRegex string, committed bool) *tally {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(broker.Addr()), kgo.ConsumeRegex(), kgo.ConsumeTopics(topicRegex),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.MetadataMinAge(250 * time.Millisecond), kgo.MetadataMaxAge(time.Second),
		kgo.FetchMaxWait(250 * time.Millisecond)}
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	} else {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	ty := &tally{t: t, committed: committed, seen: map[int64]int{}, last: map[string]int64{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fetches := cl.PollFetches(ctx)
			ty.mu.Lock()
			fetches.EachRecord(func(r *kgo.Record) {
				ty.records++
				var idh []byte
				for _, h := range r.Headers {
					if h.Key == "id" {
						idh = h.Value
					}
				}
				id, err := strconv.ParseInt(string(idh), 10, 64)
				if err != nil {
					ty.disorder = append(ty.disorder, fmt.Sprintf("record %s[%d]@%d without a numeric id header", r.Topic, r.Partition, r.Offset))
					return
				}
				ty.seen[id]++
				if ty.seen[id] > 1 {
					ty.dups++
					return
				}
				// One aggregate is one key, so one partition, read in
				// offset order: ids must increase.
				k := string(r.Key)
				if id < ty.last[k] && len(ty.disorder) < 5 {
					ty.disorder = append(ty.disorder, fmt.Sprintf("aggregate %s: event %d after event %d (%s[%d]@%d)", k, id, ty.last[k], r.Topic, r.Partition, r.Offset))
				}
				ty.last[k] = max(ty.last[k], id)
			})
			ty.mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); cl.Close(); <-done })
	return ty
}

// countIn counts the distinct ids seen in [lo, hi].
func (ty *tally) countIn(lo, hi int64) int {
	ty.mu.Lock()
	defer ty.mu.Unlock()
	n := 0
	if hi-lo+1 < int64(len(ty.seen)) {
		for id := lo; id <= hi; id++ {
			if ty.seen[id] > 0 {
				n++
			}
		}
		return n
	}
	for id := range ty.seen {
		if id >= lo && id <= hi {
			n++
		}
	}
	return n
}

// countOf counts the ids of ids seen.
func (ty *tally) countOf(ids []int64) int {
	ty.mu.Lock()
	defer ty.mu.Unlock()
	n := 0
	for _, id := range ids {
		if ty.seen[id] > 0 {
			n++
		}
	}
	return n
}

// dupsOf counts the deliveries beyond the first of the ids of ids.
func (ty *tally) dupsOf(ids []int64) int {
	ty.mu.Lock()
	defer ty.mu.Unlock()
	n := 0
	for _, id := range ids {
		if c := ty.seen[id]; c > 1 {
			n += c - 1
		}
	}
	return n
}

// has reports whether every id in ids was seen.
func (ty *tally) has(ids []int64) bool {
	ty.mu.Lock()
	defer ty.mu.Unlock()
	for _, id := range ids {
		if ty.seen[id] == 0 {
			return false
		}
	}
	return true
}

// checkExactlyOnce fails the test unless every id in ids arrived exactly
// once, nothing else arrived, and each aggregate's ids came in order.
func (ty *tally) checkExactlyOnce(ids []int64) {
	ty.t.Helper()
	ty.mu.Lock()
	defer ty.mu.Unlock()
	for _, d := range ty.disorder {
		ty.t.Error(d)
	}
	want := make(map[int64]bool, len(ids))
	lost := 0
	for _, id := range ids {
		want[id] = true
		if ty.seen[id] == 0 {
			if lost < 5 {
				ty.t.Errorf("event %d lost", id)
			}
			lost++
		}
	}
	extra := 0
	for id := range ty.seen {
		if !want[id] {
			extra++
		}
	}
	ty.t.Logf("read_committed: %d events committed, %d records, %d distinct ids, %d lost, %d duplicates, %d not committed in PostgreSQL",
		len(ids), ty.records, len(ty.seen), lost, ty.dups, extra)
	if lost > 0 || ty.dups > 0 || extra > 0 || len(ty.disorder) > 0 {
		ty.t.Fatalf("not exactly once: %d lost, %d duplicates, %d ids PostgreSQL did not commit, %d out of order", lost, ty.dups, extra, len(ty.disorder))
	}
}

// bigTxSQL inserts $1 outbox rows in one statement, generated by the
// server: OrderCreated events of 16 aggregates, ids in generate_series
// order.
const bigTxSQL = `WITH ins AS (INSERT INTO public.%s (aggregate_type, aggregate_id, event_type, payload)
SELECT 'Order', a, 'OrderCreated', jsonb_build_object('order_id', a, 'customer_id', 'c-' || g, 'status', 'PENDING', 'amount_cents', g,
	'currency', 'EUR', 'items', jsonb_build_array(jsonb_build_object('sku', 'sku-' || g, 'quantity', 1, 'unit_price_cents', g)), 'created_at', 1700000000000)
FROM generate_series(1, $1::int) g, LATERAL (SELECT '00000000-0000-4000-8000-' || lpad((g %% 16)::text, 12, '0') AS a) x
RETURNING id)
SELECT array_agg(id ORDER BY id) FROM ins`

// bigTx commits n rows in one PostgreSQL transaction and returns their
// ids, in order.
func (f *fixture) bigTx(n int) []int64 {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	conn := f.connect()
	var ids []int64
	if err := conn.QueryRow(ctx, fmt.Sprintf(bigTxSQL, f.table), n).Scan(&ids); err != nil {
		f.t.Fatalf("insert %d rows: %v", n, err)
	}
	if len(ids) != n {
		f.t.Fatalf("the transaction holds %d rows, want %d", len(ids), n)
	}
	return ids
}

// vmHWM reads a process's peak resident set size (VmHWM) in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^VmHWM:\s+(\d+) kB$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no VmHWM in /proc/%d/status", pid)
	}
	kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return kb << 10
}

// TestExactlyOnceLargeTransaction: one PostgreSQL transaction of 1,000,000
// rows, far over the in-flight bounds (50,000 events, 64 MiB by default),
// streams through a single Kafka transaction: room is freed at each produce
// ack, so it neither deadlocks nor is buffered whole. Until that Kafka
// transaction commits a read_committed consumer sees none of it; then it
// sees every row exactly once, in order per aggregate. The relay's peak RSS
// stays under the memory bound: the soft limit the relay sets from
// --max-in-flight-bytes (1.25 × it + 48 MiB, 128 MiB by default, docs/CONFIGURATION.md),
// plus 32 MiB for what that limit does not cover (goroutine stacks, kgo's
// and pgx's buffers outside the heap, and the collector's lag behind it).
func TestExactlyOnceLargeTransaction(t *testing.T) {
	const rows = 1_000_000
	const maxInFlightBytes = 64 << 20 // the default, unset below
	const bound = maxInFlightBytes + maxInFlightBytes/4 + memoryOverhead + 32<<20
	f := newFixture(t, "")
	rc := consumeTally(t, "^"+f.topicPrefix+`\..*`, true)
	ru := consumeTally(t, "^"+f.topicPrefix+`\..*`, false)
	// --txn-timeout 3m: on this shared 2-CPU machine the relay took 49 s
	// from the first record to the last ack of the 1M rows (Avro, with
	// PostgreSQL and the broker on the same CPUs), too close to the default
	// 60 s, which would halt it (by design) instead of testing the memory
	// bound.
	r := startRelay(t, f.args(append(exactlyOnce, "--log-level", "info", "--txn-timeout", "3m")...))
	r.waitStreaming(60 * time.Second)
	waitFor(t, 60*time.Second, "the fence line", func() bool { return outputCount(r, fenceLine) == 1 })

	// A first small transaction: the topic exists and the pipeline runs.
	conn := f.connect()
	warm, err := f.insertTx(context.Background(), conn, []event{{AggregateType: "Order", AggregateID: uuidFor(1), EventType: "OrderCreated", Payload: orderCreated(uuidFor(1), 1)}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the first event read_committed", func() bool { return rc.has(warm) })
	base, err := r.metric("cdc_relay_events_published_total")
	if err != nil {
		t.Fatal(err)
	}

	began := time.Now()
	big := f.bigTx(rows)
	inserted := time.Now()
	lo, hi := big[0], big[len(big)-1]
	t.Logf("%d rows inserted and committed in %s (ids %d..%d)", rows, inserted.Sub(began).Round(time.Millisecond), lo, hi)
	if hi-lo+1 != rows {
		t.Fatalf("ids %d..%d are not contiguous; nothing else writes to the table", lo, hi)
	}

	// While the relay has not had every row acknowledged, its Kafka
	// transaction cannot have committed (EndTxn comes after the last ack):
	// read_committed must see none of it, though read_uncommitted does.
	var openSamples, firstUncommitted int
	var firstSeen, allAcked time.Time
	waitFor(t, 3*time.Minute, "every row read_committed", func() bool {
		seenRC := rc.countIn(lo, hi) // before the metric: the order matters
		published, err := r.metric("cdc_relay_events_published_total")
		if err != nil {
			select {
			case <-r.done:
				t.Fatalf("the relay exited (code %d) during the transaction", r.exitCode)
			default:
			}
			return false
		}
		if published < base+rows {
			if seenRC > 0 {
				t.Fatalf("read_committed saw %d rows of the transaction while the relay had %d of %d acknowledged: part of an open Kafka transaction is visible",
					seenRC, int(published-base), rows)
			}
			if n := ru.countIn(lo, hi); n > 0 {
				openSamples++
				if firstSeen.IsZero() {
					firstSeen, firstUncommitted = time.Now(), n
				}
			}
		} else if allAcked.IsZero() {
			allAcked = time.Now()
		}
		return seenRC == rows
	})
	done := time.Now()
	t.Logf("first rows read_uncommitted %s after the commit; all acknowledged after %s; all read_committed after %s; %d samples of an open transaction with rows in Kafka (first: %d rows)",
		firstSeen.Sub(inserted).Round(time.Millisecond), allAcked.Sub(inserted).Round(time.Millisecond), done.Sub(inserted).Round(time.Millisecond), openSamples, firstUncommitted)
	if openSamples == 0 {
		t.Fatal("never saw the Kafka transaction open with rows in it (read_uncommitted), so read_committed's blindness to it went unchecked")
	}
	rc.checkExactlyOnce(append(warm, big...))
	// The Kafka transaction metrics: the 1M-row PostgreSQL transaction
	// went out in one committed Kafka transaction with its checkpoint
	// record (a transaction never holds part of one), and none aborted.
	if v, err := r.metric(`cdc_relay_kafka_transactions_total{result="committed"}`); err != nil || v < 2 {
		t.Fatalf("cdc_relay_kafka_transactions_total{result=\"committed\"} = %v (%v), want at least 2 (the first event's and the large one's)", v, err)
	}
	if v, err := r.metric(`cdc_relay_kafka_transactions_total{result="aborted"}`); err != nil || v != 0 {
		t.Fatalf("cdc_relay_kafka_transactions_total{result=\"aborted\"} = %v (%v), want 0", v, err)
	}
	if v, err := r.metric(`cdc_relay_kafka_transaction_records_bucket{le="+Inf"}`); err != nil {
		t.Fatal(err)
	} else if le, err := r.metric(`cdc_relay_kafka_transaction_records_bucket{le="16384"}`); err != nil || v-le < 1 {
		t.Fatalf("no committed Kafka transaction over 16384 records (%v of %v at most 16384, %v): the 1M rows were not one Kafka transaction", le, v, err)
	}

	peak := vmHWM(t, r.Pid())
	t.Logf("relay peak RSS (VmHWM) %.1f MiB, bound %.1f MiB", float64(peak)/(1<<20), float64(bound)/(1<<20))
	if peak > bound {
		t.Fatalf("relay peak RSS %.1f MiB is over the bound %.1f MiB (1.25 × --max-in-flight-bytes + 48 MiB + 32 MiB)", float64(peak)/(1<<20), float64(bound)/(1<<20))
	}
	if n := strings.Count(r.Output(), "level=WARN") + strings.Count(r.Output(), "level=ERROR"); n > 0 {
		t.Fatalf("%d warnings or errors during the transaction:\n%s", n, tailString(r.Output(), 3000))
	}
	stillRunning(t, r)
}

// TestExactlyOnceZombieFenced: two relays on one slot share the
// transactional id. The active one is frozen (SIGSTOP) in the middle of a
// large PostgreSQL transaction, so its Kafka transaction is open with
// records in the log. wal_sender_timeout (10 s here) ends its walsender and
// releases the slot; the standby takes it and fences, which aborts the
// zombie's transaction. Then the zombie carries on (SIGCONT) with what it
// still holds: its late writes are refused, it says it was fenced (or,
// when its PostgreSQL connection fails first, that it may have been, and
// leaves its transaction to the new holder's fence instead of aborting it),
// and it goes back to being a standby. The new active relay is never
// fenced by it. A read_committed consumer sees every
// committed event exactly once, in order per aggregate; a read_uncommitted
// one shows that the zombie's records were really in Kafka.
func TestExactlyOnceZombieFenced(t *testing.T) {
	const rows = 300_000
	f := newFixture(t, "")
	rc := consumeTally(t, "^"+f.topicPrefix+`\..*`, true)
	ru := consumeTally(t, "^"+f.topicPrefix+`\..*`, false)
	zombie := startRelay(t, f.args(exactlyOnce...))
	zombie.waitStreaming(60 * time.Second)
	waitFor(t, 60*time.Second, "the active relay's fence line", func() bool { return outputCount(zombie, fenceLine) == 1 })
	standby := startRelay(t, f.args(exactlyOnce...))
	waitStandby(t, standby)
	if n := outputCount(standby, fenceLine); n != 0 {
		t.Fatalf("the standby fenced %d times while it waited for the slot", n)
	}
	w := startLoad(t, f, dbURL)
	w.waitCommitted(t, 50, 60*time.Second)

	conn := connect(t)
	pid := slotPID(t, conn, f.slot)
	big := f.bigTx(rows)
	// Freeze once a few thousand of its records are in the log (of
	// 300,000: the transaction is far from done).
	waitFor(t, 2*time.Minute, "the large transaction's first records in Kafka (read_uncommitted)", func() bool { return ru.countOf(big) >= 2000 })
	zombie.Freeze()
	frozen := time.Now()
	inFlight := ru.countOf(big)
	t.Logf("froze the active relay with %d of %d rows of the large transaction read_uncommitted", inFlight, rows)

	waitFor(t, 60*time.Second, "PostgreSQL to release the frozen relay's slot", func() bool {
		if n := rc.countOf(big); n > 0 {
			t.Fatalf("read_committed saw %d rows of the frozen relay's open transaction", n)
		}
		return slotPID(t, conn, f.slot) != pid
	})
	t.Logf("slot released %s after the freeze (wal_sender_timeout 10 s)", time.Since(frozen).Round(time.Millisecond))
	standby.waitStreaming(60 * time.Second)
	waitFor(t, 60*time.Second, "the standby's fence line", func() bool { return outputCount(standby, fenceLine) == 1 })

	thawedAt := len(zombie.Output())
	zombie.Thaw()
	waitFor(t, 90*time.Second, "the zombie to report it was fenced", func() bool {
		return len(fencedReports(zombie.Output()[thawedAt:])) > 0
	})
	waitFor(t, 90*time.Second, "the zombie to become a standby again", func() bool {
		select {
		case <-zombie.done:
			t.Fatalf("the zombie exited (code %d) instead of becoming a standby", zombie.exitCode)
		default:
		}
		return strings.Contains(zombie.Output()[thawedAt:], `msg="standby: slot is active`)
	})
	for _, l := range fencedReports(zombie.Output()[thawedAt:]) {
		t.Logf("zombie: %s", l)
	}
	// Its reconnect counts as a fence, not as a Kafka failure, unless its
	// PostgreSQL connection, which the server closed during the freeze,
	// failed first (which of the two it learns first is a race).
	if v, err := zombie.metric(`cdc_relay_reconnects_total{cause="fenced"}`); (err != nil || v < 1) &&
		!strings.Contains(zombie.Output()[thawedAt:], "msg=reconnect cause=network") {
		t.Fatalf("zombie cdc_relay_reconnects_total{cause=\"fenced\"} = %v (%v), want at least 1 (or a reconnect of cause network: its PostgreSQL connection failed first)", v, err)
	}
	if v, err := zombie.metric(`cdc_relay_reconnects_total{cause="kafka"}`); err == nil && v != 0 {
		t.Fatalf("zombie cdc_relay_reconnects_total{cause=\"kafka\"} = %v, want 0: being fenced is not a Kafka failure", v)
	}
	if v, err := zombie.metric("cdc_relay_halted"); err != nil || v != 0 {
		t.Fatalf("zombie cdc_relay_halted = %v (%v), want 0", v, err)
	}
	if v, err := zombie.metric("cdc_relay_active"); err != nil || v != 0 {
		t.Fatalf("zombie cdc_relay_active = %v (%v), want 0: it must not hold the slot", v, err)
	}
	if n := len(fencedReports(standby.Output())); n > 0 {
		t.Fatalf("the new active relay reports being fenced: %v", fencedReports(standby.Output()))
	}

	// More load after the zombie's return, then everything committed must
	// be there once.
	w.waitCommitted(t, w.committed()+100, 60*time.Second)
	ids := append(w.finish(t), big...)
	waitFor(t, 3*time.Minute, fmt.Sprintf("%d events read_committed", len(ids)), func() bool { return rc.has(ids) })
	// The consumers read on for a while: a late write of the zombie that
	// became visible would show as a duplicate. Wait until read_uncommitted
	// has caught up with everything read_committed has.
	waitFor(t, 60*time.Second, "read_uncommitted to catch up", func() bool { return ru.has(ids) })
	rc.checkExactlyOnce(ids)
	zombieRecs := ru.dupsOf(big)
	t.Logf("read_uncommitted: %d records of the large transaction written twice (the zombie's aborted ones)", zombieRecs)
	if zombieRecs == 0 {
		t.Fatal("read_uncommitted holds no second copy of any row of the large transaction: the zombie had nothing in flight, so the test proved nothing")
	}
	stillRunning(t, standby)
	stillRunning(t, zombie)
}

// TestExactlyOnceReplicasNoFencing: the shipped two-replica Deployment (the
// settings of deploy/k8s's ConfigMap, with --delivery exactly-once) runs
// for a minute under a steady load. The slot is the leader lock: the
// standby, which only ever gets "slot is active", never fences (it never
// logs the fence line, which follows InitProducerID), the active one fences
// once, at its start, and is never fenced nor reconnects. Everything
// arrives exactly once, read_committed.
func TestExactlyOnceReplicasNoFencing(t *testing.T) {
	f := newFixture(t, "")
	// The ConfigMap's relay.yaml, as both pods read it; the fixture's flags
	// override its names and addresses (a flag beats the file), and the log
	// is text so that the harness reads it.
	var relayYAML string
	for _, doc := range yamlDocs(t, "../../deploy/k8s/configmap.yaml") {
		if y, ok := dig(doc, "data", "relay.yaml").(string); ok {
			relayYAML = y
		}
	}
	if !strings.Contains(relayYAML, "on-invalid:") {
		t.Fatalf("no relay.yaml in deploy/k8s/configmap.yaml")
	}
	cfgPath := t.TempDir() + "/relay.yaml"
	if err := os.WriteFile(cfgPath, []byte(relayYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	args := f.args(append([]string{"--config", cfgPath, "--log-format", "text"}, exactlyOnce...)...)
	c := consume(t, "^"+f.topicPrefix+`\..*`, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	active := startRelay(t, args)
	active.waitStreaming(60 * time.Second)
	waitFor(t, 60*time.Second, "the active relay's fence line", func() bool { return outputCount(active, fenceLine) == 1 })
	standby := startRelay(t, args)
	waitStandby(t, standby)
	w := startPublishing(t, f, active)

	reconnects := func(r *relay) float64 {
		v, err := r.metric("cdc_relay_reconnects_total")
		if err != nil {
			return 0 // no reconnect yet: the family is empty
		}
		return v
	}
	start := time.Now()
	checks := 0
	waitFor(t, 3*time.Minute, "a minute under load with two replicas", func() bool {
		checks++
		stillRunning(t, active)
		stillRunning(t, standby)
		if n := outputCount(standby, fenceLine); n != 0 {
			t.Fatalf("the standby fenced (%d fence lines) while the active relay held the slot", n)
		}
		if n := outputCount(active, fenceLine); n != 1 {
			t.Fatalf("the active relay fenced %d times, want once at its start", n)
		}
		for _, r := range []*relay{active, standby} {
			if l := fencedReports(r.Output()); len(l) > 0 {
				t.Fatalf("a replica reports being fenced: %s", l[0])
			}
		}
		if strings.Contains(active.Output(), "cause=kafka") {
			t.Fatalf("the active relay reconnected with cause kafka")
		}
		if v := reconnects(active); v != 0 {
			t.Fatalf("the active relay reconnected %v times", v)
		}
		if v, err := standby.metric("cdc_relay_active"); err != nil || v != 0 {
			t.Fatalf("standby cdc_relay_active = %v (%v), want 0", v, err)
		}
		return time.Since(start) >= time.Minute
	})
	t.Logf("%d checks over %s; the writer committed %d events", checks, time.Since(start).Round(time.Millisecond), w.committed())
	checkStandbyRetries(t, standby, 20)
	ids := w.finish(t)
	recs := c.waitIDs(2*time.Minute, ids)
	if dups := checkDelivery(t, recs, ids); dups != 0 || len(recs) != len(ids) {
		t.Fatalf("read_committed: %d records for %d events, %d duplicates; want each exactly once", len(recs), len(ids), dups)
	}
	t.Logf("read_committed: %d events, each exactly once", len(ids))
	if n := outputCount(standby, fenceLine) + outputCount(active, fenceLine); n != 1 {
		t.Fatalf("%d fence lines in all, want 1", n)
	}
}
