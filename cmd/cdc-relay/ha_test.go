package main

// High availability: a primary and a physical standby that syncs the relay's
// failover slot (PostgreSQL 17+, sync_replication_slots; see "Replication
// Slot Synchronization" in the PostgreSQL docs, logicaldecoding-explanation),
// the relay on a multi-host --pg-url, and a failover under load.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/internal/pgtest"
	"github.com/cdc-relay/cdc-relay/internal/testtier"
)

// haPair is a primary with a streaming standby that synchronises failover
// slots; target points at both through a multi-host URL with
// target_session_attrs=read-write, so it always reaches the primary.
type haPair struct {
	primary, standby *pgtest.Cluster
	target           pgTarget
}

// startHAPair starts a primary of the given major with the test database,
// and a standby of it (physical slot sb1). On 17+ the primary waits for sb1
// before sending logical changes (synchronized_standby_slots).
func startHAPair(t *testing.T, version int) *haPair {
	t.Helper()
	testtier.Need(t)
	p, err := pgtest.Start(pgtest.Options{Version: version, Settings: map[string]string{"wal_sender_timeout": "10s"}})
	if err != nil {
		t.Fatal(err)
	}
	h := &haPair{primary: p}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("primary log tail:\n%s", p.LogTail(3000))
			if h.standby != nil {
				t.Logf("standby log tail:\n%s", h.standby.LogTail(3000))
			}
		}
		p.Close()
		if h.standby != nil {
			h.standby.Close()
		}
	})
	ctx := context.Background()
	if _, err := p.CreateDatabase(ctx, testDB); err != nil {
		t.Fatal(err)
	}
	if h.standby, err = pgtest.StartStandby(p, "sb1"); err != nil {
		t.Fatal(err)
	}
	if version >= 17 {
		// After the copy: the promoted standby must not wait for sb1.
		if err := p.Exec(ctx, "", "ALTER SYSTEM SET synchronized_standby_slots = 'sb1'"); err != nil {
			t.Fatal(err)
		}
		if err := p.Exec(ctx, "", "SELECT pg_reload_conf()"); err != nil {
			t.Fatal(err)
		}
	}
	h.target = pgTarget{cluster: p, db: testDB, url: fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/%s?sslmode=disable&target_session_attrs=read-write",
		p.Port(), h.standby.Port(), testDB)}
	return h
}

// waitSlotSynced waits until the standby holds a persistent synchronised
// copy of slot. A standby snapshot logged on the primary every half second
// lets the standby persist it within seconds instead of tens of seconds.
func (h *haPair) waitSlotSynced(t *testing.T, slot string) {
	t.Helper()
	ctx := context.Background()
	sb := connectURL(t, h.standby.URL(testDB))
	last := time.Time{}
	waitFor(t, 90*time.Second, "slot "+slot+" synchronised to the standby", func() bool {
		if time.Since(last) > 500*time.Millisecond {
			h.primary.Exec(ctx, "", "SELECT pg_log_standby_snapshot()")
			last = time.Now()
		}
		var ok bool
		err := sb.QueryRow(ctx, "SELECT synced AND NOT temporary FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&ok)
		return err == nil && ok
	})
}

// waitReplayed waits until the standby has replayed the primary's WAL up
// to now: what the test made on the primary (the outbox table) is then on
// the standby too, even if the primary stops at once.
func (h *haPair) waitReplayed(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	var lsn string
	if err := connectURL(t, h.primary.URL(testDB)).QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	sb := connectURL(t, h.standby.URL(testDB))
	waitFor(t, 60*time.Second, "the standby to replay "+lsn, func() bool {
		var ok bool
		err := sb.QueryRow(ctx, "SELECT coalesce(pg_last_wal_replay_lsn() >= $1::pg_lsn, false)", lsn).Scan(&ok)
		return err == nil && ok
	})
}

// failover kills the primary (immediate shutdown) and promotes the standby,
// returning when the promotion has completed. The fixture's statements go
// to the new primary from then on. When r is not nil, the promotion waits
// until that relay reports it is waiting for one, as it would while a
// cluster manager decides.
func (h *haPair) failover(t *testing.T, f *fixture, r *relay) (promoted time.Time) {
	t.Helper()
	if err := h.primary.Stop("immediate"); err != nil {
		t.Fatal(err)
	}
	if r != nil {
		waitForWaiting(t, r)
	}
	if err := h.standby.Promote(); err != nil {
		t.Fatal(err)
	}
	promoted = time.Now()
	f.pg.cluster = h.standby
	return promoted
}

// writers commit small transactions continuously through the multi-host URL,
// reconnecting after errors, until stopped. Writer w owns aggregates
// uuidFor(w*100+0..9), so ids increase per aggregate in commit order.
type writers struct {
	stop      chan struct{}
	wg        sync.WaitGroup
	mu        sync.Mutex
	committed int // events in committed transactions
	errs      int
}

func startWriters(t *testing.T, f *fixture, n int) *writers {
	t.Helper()
	w := &writers{stop: make(chan struct{})}
	for i := range n {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			ctx := context.Background()
			var conn *pgx.Conn
			defer func() {
				if conn != nil {
					conn.Close(ctx)
				}
			}()
			pause := time.NewTimer(0)
			for k := 0; ; k++ {
				select {
				case <-w.stop:
					return
				default:
				}
				if conn == nil {
					cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
					c, err := pgx.Connect(cctx, f.pg.url)
					cancel()
					if err != nil {
						w.mu.Lock()
						w.errs++
						w.mu.Unlock()
						// Retry pace while no primary answers, not synchronisation.
						pause.Reset(50 * time.Millisecond)
						select {
						case <-w.stop:
							return
						case <-pause.C:
						}
						continue
					}
					conn = c
				}
				agg := uuidFor(i*100 + k%10)
				evs := []event{{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, k)}}
				if k%3 == 0 {
					evs = append(evs, event{AggregateType: "Order", AggregateID: agg, EventType: "OrderCancelled", Payload: orderCancelled(agg, k)})
				}
				if _, err := f.insertTx(ctx, conn, evs); err != nil {
					conn.Close(ctx)
					conn = nil
					continue
				}
				w.mu.Lock()
				w.committed += len(evs)
				w.mu.Unlock()
			}
		}()
	}
	t.Cleanup(w.halt)
	return w
}

func (w *writers) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.committed
}

func (w *writers) halt() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	w.wg.Wait()
}

// outboxIDs reads every id in the fixture's outbox table on the current
// primary (the test reads the table; the relay never does).
func (f *fixture) outboxIDs() []int64 {
	f.t.Helper()
	conn := f.connect()
	rows, err := conn.Query(context.Background(), "SELECT id FROM "+f.table+" ORDER BY id")
	if err != nil {
		f.t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		f.t.Fatal(err)
	}
	return ids
}

// TestFailover: on PostgreSQL 17 and 18, writers commit continuously, the
// primary dies (immediate shutdown) and the standby is promoted; the same
// relay process resumes on the new primary through the multi-host URL.
// Every row on the new primary's timeline is in Kafka, nothing in Kafka is
// missing from it, and first deliveries keep the order per aggregate.
// Each runs at-least-once and exactly-once (delivery_test.go): then a
// read_committed consumer sees each event of the new primary's timeline
// exactly once, in order per aggregate, and nothing else.
func TestFailover(t *testing.T) {
	t.Parallel()
	for _, v := range []int{17, 18} {
		t.Run(fmt.Sprintf("PG%d", v), func(t *testing.T) {
			t.Parallel()
			eachDelivery(t, false, func(t *testing.T, d delivery) { testFailover(t, v, d) })
		})
	}
}

func testFailover(t *testing.T, version int, d delivery) {
	h := startHAPair(t, version)
	f := newFixtureOn(t, h.target, "")
	createLogAppendTimeTopic(t, f.topic("Order"))
	c := d.consume(t, "^"+f.topicPrefix+`\..*`)
	r := startRelay(t, d.with(f.args()))
	r.waitStreaming(60 * time.Second)
	h.waitSlotSynced(t, f.slot)
	// status works on the standby too and shows the synchronised failover slot.
	code, out := runCommand([]string{"status", "--pg-url", h.standby.URL(testDB), "--slot", f.slot})
	if code != 0 || !strings.Contains(out, "failover             yes") {
		t.Fatalf("status on the standby = %d, want the failover slot:\n%s", code, out)
	}

	w := startWriters(t, f, 3)
	waitFor(t, 60*time.Second, "events flowing to Kafka", func() bool { return len(distinctIDs(c.records())) >= 300 })
	promoted := h.failover(t, f, r)
	before := w.count()
	waitFor(t, 60*time.Second, "writers committing on the new primary", func() bool { return w.count() >= before+500 })
	w.halt()

	ids := f.outboxIDs()
	recs := c.waitIDs(120*time.Second, ids)
	select {
	case <-r.done:
		t.Fatalf("the relay exited (code %d) instead of resuming on the new primary", r.exitCode)
	default:
	}
	onPrimary := map[string]bool{}
	for _, id := range ids {
		onPrimary[strconv.FormatInt(id, 10)] = true
	}
	seen := distinctIDs(recs)
	var phantoms []string
	for id := range seen {
		if !onPrimary[id] {
			phantoms = append(phantoms, id)
		}
	}
	if len(phantoms) > 0 {
		slices.Sort(phantoms)
		t.Fatalf("%d event(s) in Kafka are not on the new primary (phantoms): %v", len(phantoms), phantoms[:min(len(phantoms), 20)])
	}
	checkFirstDeliveryOrder(t, recs)
	if d.once() {
		end := currentLSN(t, f.connect())
		waitFor(t, 30*time.Second, "the relay to confirm past the last event", func() bool { return f.confirmedFlush() >= end })
		recs = c.records()
		checkOnce(t, recs, idStrings(ids))
	}

	// The broker stamps each record when it appends it: the first stamp
	// after the promotion is the first event published on the new primary.
	var first time.Time
	for _, rec := range recs {
		if rec.Timestamp.After(promoted) && (first.IsZero() || rec.Timestamp.Before(first)) {
			first = rec.Timestamp
		}
	}
	dups := 0
	for _, n := range seen {
		dups += n - 1
	}
	t.Logf("PostgreSQL %d: writers committed %d events, %d of them on the new primary's timeline (the rest never reached the standby); %d records in Kafka, %d duplicates; promotion to first event published: %.2f s",
		version, w.count(), len(ids), len(recs), dups, first.Sub(promoted).Seconds())
	if first.Sub(promoted) > 5*time.Second {
		t.Errorf("first event published %.2f s after the promotion, want at most 5 s", first.Sub(promoted).Seconds())
	}
	if code := r.terminate(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// createLogAppendTimeTopic creates a 3-partition topic whose records carry
// the broker's append time, so the test can tell when each was published.
func createLogAppendTimeTopic(t *testing.T, name string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	configs := map[string]*string{"message.timestamp.type": kadm.StringPtr("LogAppendTime")}
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 3, 1, configs, name); err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
}

// checkFirstDeliveryOrder: per aggregate, the first delivery of each event
// comes in id order (each aggregate has one writer, so ids increase in
// commit order).
func checkFirstDeliveryOrder(t *testing.T, recs []record) {
	t.Helper()
	byPartition := map[int32][]record{}
	for _, rec := range recs {
		byPartition[rec.Partition] = append(byPartition[rec.Partition], rec)
	}
	for _, p := range slices.Sorted(maps.Keys(byPartition)) {
		rs := byPartition[p]
		sort.Slice(rs, func(i, j int) bool { return rs[i].Offset < rs[j].Offset })
		seen := map[string]bool{}
		last := map[string]int64{}
		for _, rec := range rs {
			id := rec.Headers["id"]
			if seen[id] {
				continue
			}
			seen[id] = true
			n, _ := strconv.ParseInt(id, 10, 64)
			if n < last[rec.Key] {
				t.Fatalf("aggregate %s: event %d first delivered after %d", rec.Key, n, last[rec.Key])
			}
			last[rec.Key] = n
		}
	}
}

// waitForWaiting asserts /readyz is exactly the waiting-for-promotion answer.
func waitForWaiting(t *testing.T, r *relay) {
	t.Helper()
	var code int
	var body map[string]string
	waitFor(t, 60*time.Second, "/readyz to report waiting for promotion", func() bool {
		code, body = r.getJSON("/readyz")
		return code == 503 && body["state"] == "waiting"
	})
	if len(body) != 2 || body["reason"] != "standby: waiting for promotion" {
		t.Fatalf("/readyz = %d %v, want 503 {\"state\":\"waiting\",\"reason\":\"standby: waiting for promotion\"}", code, body)
	}
}

// TestStartedAgainstStandby: a relay whose hosts are all standbys waits
// (/readyz 503 waiting, no exit, no slot on the standby) and streams after
// the promotion. One relay is pointed at the standby alone (it finds the
// server in recovery), the other at the multi-host URL while the primary is
// down (no host is read-write).
func TestStartedAgainstStandby(t *testing.T) {
	t.Parallel()
	h := startHAPair(t, 17)
	f := newFixtureOn(t, h.target, "")
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	h.waitReplayed(t)
	if err := h.primary.Stop("fast"); err != nil {
		t.Fatal(err)
	}
	single := f.args()
	setFlag(single, "--pg-url", h.standby.URL(testDB))
	r1 := startRelay(t, single)
	r2 := startRelay(t, f.args())
	for _, r := range []*relay{r1, r2} {
		waitForWaiting(t, r)
		waitFor(t, 30*time.Second, "several attempts while waiting", func() bool {
			return strings.Count(r.Output(), "still waiting for promotion") >= 3
		})
		select {
		case <-r.done:
			t.Fatalf("the relay exited (code %d) while waiting for promotion:\n%s", r.exitCode, tailString(r.Output(), 3000))
		default:
		}
	}
	r1.kill()
	sb := connectURL(t, h.standby.URL(testDB))
	var n int
	if err := sb.QueryRow(context.Background(), "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", f.slot).Scan(&n); err != nil || n != 0 {
		t.Fatalf("slots named %s on the standby: %d (%v), want none", f.slot, n, err)
	}
	if err := h.standby.Promote(); err != nil {
		t.Fatal(err)
	}
	f.pg.cluster = h.standby
	r2.waitStreaming(60 * time.Second)
	ctx := context.Background()
	agg := uuidFor(3)
	ids, err := f.insertTx(ctx, f.connect(), []event{{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	c.waitIDs(60*time.Second, ids)
	if code, body := r2.getJSON("/readyz"); code != 200 {
		t.Fatalf("/readyz after promotion = %d %v", code, body)
	}
	if code := r2.terminate(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// TestFailoverWithoutFailoverSlot: with --slot-failover false on 17 the
// slot is not synchronised; after a failover the relay exits 3 saying events
// may be missing, and creates no slot on the new primary, also when started
// again. It runs at-least-once and exactly-once (delivery_test.go), which
// exits 3 by the same rules.
func TestFailoverWithoutFailoverSlot(t *testing.T) {
	t.Parallel()
	eachDelivery(t, true, testFailoverWithoutFailoverSlot)
}

func testFailoverWithoutFailoverSlot(t *testing.T, d delivery) {
	h := startHAPair(t, 17)
	f := newFixtureOn(t, h.target, "")
	c := d.consume(t, "^"+f.topicPrefix+`\..*`)
	code, out := runCommand(commandArgs("check", d.with(f.args("--slot-failover", "false"))))
	if code != 0 || !strings.Contains(out, "won't survive a promotion") {
		t.Fatalf("check = %d, want a warning that the slot won't survive a promotion:\n%s", code, out)
	}
	r := startRelay(t, d.with(f.args("--slot-failover", "false", "--halt-linger", "0s")))
	r.waitStreaming(60 * time.Second)
	ctx := context.Background()
	agg := uuidFor(4)
	ids, err := f.insertTx(ctx, f.connect(), []event{{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	c.waitIDs(60*time.Second, ids)
	// The standby must have the row, so that only the slot is missing.
	sb := connectURL(t, h.standby.URL(testDB))
	waitFor(t, 30*time.Second, "the standby to replay the row", func() bool {
		var n int
		err := sb.QueryRow(ctx, "SELECT count(*) FROM "+f.table).Scan(&n)
		return err == nil && n == 1
	})
	h.failover(t, f, nil)
	wantGapExit(t, r, f.slot)
	// A supervisor's restart halts the same way: the checkpoint remembers.
	wantGapExit(t, startRelay(t, d.with(f.args("--slot-failover", "false", "--halt-linger", "0s"))), f.slot)
	var n int
	if err := f.connect().QueryRow(ctx, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", f.slot).Scan(&n); err != nil || n != 0 {
		t.Fatalf("slots named %s on the new primary: %d (%v), want none: the relay must never create one after a failover", f.slot, n, err)
	}
	// The most common hand-made slot: rows on the new primary, then the
	// slot made again there by hand. It is ahead of the checkpoint, which
	// lies on the server's timeline history: exit 3 again, never a stream
	// that skips the rows.
	if _, err := f.insertTx(ctx, f.connect(), []event{{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, 2)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.connect().Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", f.slot); err != nil {
		t.Fatal(err)
	}
	out = wantGapExit(t, startRelay(t, d.with(f.args("--slot-failover", "false", "--halt-linger", "0s"))), f.slot)
	if !strings.Contains(out, "ahead of the relay's checkpoint") {
		t.Fatalf("a slot made by hand on the promoted primary does not say it is ahead of the checkpoint:\n%s", tailString(out, 3000))
	}
}

// TestNoHostAnswers: a multi-host URL where no host answers: the relay keeps
// retrying with backoff and /readyz names the hosts it tried.
func TestNoHostAnswers(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	args := f.args()
	setFlag(args, "--pg-url", "postgres://postgres@127.0.0.1:1,127.0.0.1:2/"+testDB+"?sslmode=disable&target_session_attrs=read-write")
	r := startRelay(t, args)
	var body map[string]string
	waitFor(t, 30*time.Second, "/readyz to name the hosts tried", func() bool {
		var code int
		code, body = r.getJSON("/readyz")
		return code == 503 && body["state"] == "reconnecting"
	})
	if !strings.Contains(body["reason"], "127.0.0.1:1, 127.0.0.1:2") {
		t.Fatalf("/readyz reason %q does not name both hosts", body["reason"])
	}
	r.waitMetric("cdc_relay_reconnects_total", 30*time.Second, func(v float64) bool { return v >= 3 })
	select {
	case <-r.done:
		t.Fatalf("the relay exited (code %d) although it should retry", r.exitCode)
	default:
	}
}
