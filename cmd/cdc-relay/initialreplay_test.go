package main

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// outboxWriter inserts OrderCreated rows, one per transaction, over a few
// aggregates, until stopped: one goroutine, so the ids of each aggregate
// are in commit order.
type outboxWriter struct {
	mu   sync.Mutex
	ids  []int64
	stop chan struct{}
	done chan struct{}
	err  error
}

// aggregates are the writer's aggregate ids.
const writerAggregates = 4

func startWriter(t *testing.T, f *fixture, every time.Duration) *outboxWriter {
	t.Helper()
	conn := f.connect()
	w := &outboxWriter{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		defer conn.Close(context.Background())
		for n := 0; ; n++ {
			select {
			case <-w.stop:
				return
			default:
			}
			agg := uuidFor(7000 + n%writerAggregates)
			var id int64
			if err := conn.QueryRow(context.Background(), "INSERT INTO public."+f.table+" (aggregate_type, aggregate_id, event_type, payload) VALUES ('Order', $1, 'OrderCreated', $2) RETURNING id",
				agg, orderCreated(agg, n)).Scan(&id); err != nil {
				w.err = err
				return
			}
			w.mu.Lock()
			w.ids = append(w.ids, id)
			w.mu.Unlock()
			time.Sleep(every)
		}
	}()
	t.Cleanup(w.halt)
	return w
}

func (w *outboxWriter) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.ids)
}

func (w *outboxWriter) halt() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

// finish stops the writer and returns every id it committed.
func (w *outboxWriter) finish(t *testing.T) []int64 {
	t.Helper()
	w.halt()
	if w.err != nil {
		t.Fatalf("writer: %v", w.err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]int64(nil), w.ids...)
}

// checkAggregateOrder fails unless, on each partition, the first record of
// each id of the same key comes in id order: the rows committed before the
// slot existed (replayed) before the streamed ones. A row may come twice.
func checkAggregateOrder(t *testing.T, recs []record, topic string) {
	t.Helper()
	last := map[string]int64{} // by partition and key
	seen := map[string]bool{}
	for _, r := range recs {
		if r.Topic != topic {
			continue
		}
		id, err := strconv.ParseInt(r.Headers["id"], 10, 64)
		if err != nil || seen[r.Headers["id"]] {
			continue
		}
		seen[r.Headers["id"]] = true
		k := fmt.Sprint(r.Partition, "/", r.Key)
		if id < last[k] {
			t.Errorf("aggregate %s: id %d after %d", r.Key, id, last[k])
		}
		last[k] = id
	}
}

var untilRE = regexp.MustCompile(`cdc-relay replay((?: --table \S+)+) --since (\S+) --until ([0-9T:.Z+-]+)`)

// TestFirstStartExistingRows: without --initial-replay the relay never reads
// the table. Rows written before its first start (the slot's creation)
// are never decoded: check warns before, and run warns after creating the
// slot, printing a replay command (every table, --until the database clock
// read right after the creation) that works as printed. With a writer
// running across the slot's creation, the stream and that replay together
// publish every row.
func TestFirstStartExistingRows(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	t.Cleanup(func() { f.exec("DROP PUBLICATION IF EXISTS " + f.publication) })
	conn := f.connect()
	defer conn.Close(context.Background())
	for i := 0; i < 5; i++ {
		insertInto(t, conn, "public."+f.table, i)
	}
	table := "public." + f.table
	var out string
	waitFor(t, 60*time.Second, "check's first-start warning (statistics are flushed within a second or so)", func() bool {
		_, out = runCommand(commandArgs("check", f.args()))
		return strings.Contains(out, "seem to hold rows written before the slot will exist")
	})
	for _, w := range []string{"WARN  first start: " + table + " (n_live_tup 5, n_tup_ins 5)", "--initial-replay", "cdc-relay replay --table " + table + " --since 1970-01-01T00:00:00Z --until <"} {
		if !strings.Contains(out, w) {
			t.Errorf("check output lacks %q:\n%s", w, out)
		}
	}

	c := consume(t, "^"+f.topicPrefix+`\..*`)
	w := startWriter(t, f, 5*time.Millisecond)
	waitFor(t, 30*time.Second, "the writer", func() bool { return w.count() > 20 })
	r := startRelay(t, f.args())
	r.waitStreaming(60 * time.Second)
	waitFor(t, 30*time.Second, "rows written while streaming", func() bool { return w.count() > 200 })
	ids := w.finish(t)

	var m []string
	waitFor(t, 30*time.Second, "the first-start WARN", func() bool {
		m = untilRE.FindStringSubmatch(r.Output())
		return m != nil
	})
	if !strings.Contains(r.Output(), "level=WARN msg=\"first start: "+table) || !strings.Contains(r.Output(), "pg_stat_user_tables") {
		t.Errorf("no first-start WARN naming %s:\n%s", table, tailString(r.Output(), 4000))
	}
	if strings.TrimSpace(m[1]) != "--table "+table || m[2] != "1970-01-01T00:00:00Z" {
		t.Fatalf("replay command %q", m[0])
	}
	until, err := time.Parse(time.RFC3339Nano, m[3])
	if err != nil {
		t.Fatalf("--until %q: %v", m[3], err)
	}
	var before int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM public."+f.table+" WHERE created_at < $1", until).Scan(&before); err != nil {
		t.Fatal(err)
	}
	if before < 25 {
		t.Fatalf("only %d rows before --until %s", before, m[3])
	}

	// The command as printed, with the fixture's other settings.
	args := append(append([]string{"replay"}, withTables(f.args()[1:])...), strings.Fields(strings.TrimPrefix(m[0], "cdc-relay replay"))...)
	code, stdout, _ := runReplay(t, nil, args)
	if code != 0 {
		t.Fatalf("replay exit %d", code)
	}
	if !strings.Contains(stdout, "replayed ") {
		t.Errorf("replay summary missing:\n%s", stdout)
	}
	// Every row of the table: the five, the writer's before the slot
	// (replayed) and after it (streamed).
	every := tableIDs(t, f)
	if len(every) != len(ids)+5 {
		t.Fatalf("%d rows in the table, the writer committed %d", len(every), len(ids))
	}
	c.waitIDs(120*time.Second, every)
	if code := r.terminate(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// TestInitialReplay: with --initial-replay, a first start publishes the rows
// written before the slot existed through the replay path, then streams.
// A writer inserts rows across the slot's creation: every row reaches
// Kafka (an independent franz-go consumer), a row at the boundary perhaps
// twice, and each aggregate's rows come in commit order, those from before
// the slot first. A restart replays nothing again. It runs at-least-once
// and exactly-once (the replayed rows are at-least-once either way).
func TestInitialReplay(t *testing.T) { t.Parallel(); eachDelivery(t, false, testInitialReplay) }

func testInitialReplay(t *testing.T, d delivery) {
	f := newFixture(t, "")
	t.Cleanup(func() { f.exec("DROP PUBLICATION IF EXISTS " + f.publication) })
	conn := f.connect()
	defer conn.Close(context.Background())
	c := d.consume(t, "^"+f.topicPrefix+`\..*`)
	w := startWriter(t, f, 3*time.Millisecond)
	waitFor(t, 30*time.Second, "the writer", func() bool { return w.count() > 100 })
	r := startRelay(t, d.with(f.args("--initial-replay")))
	r.waitStreaming(120 * time.Second)
	waitFor(t, 30*time.Second, "rows written while streaming", func() bool { return w.count() > 600 })
	ids := w.finish(t)
	out := r.Output()
	for _, want := range []string{"initial replay: publishing the rows created before the slot existed", "initial replay complete: streaming", "initial replay: replayed "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, tailString(out, 4000))
		}
	}
	if strings.Contains(out, "seem to hold rows written before the slot existed") {
		t.Errorf("a first-start WARN under --initial-replay:\n%s", tailString(out, 4000))
	}
	recs := c.waitIDs(180*time.Second, ids)
	checkAggregateOrder(t, recs, f.topic("Order"))
	dups := 0
	for _, n := range distinctIDs(recs) {
		if n > 1 {
			dups++
		}
	}
	t.Logf("%d rows, %d records, %d ids twice", len(ids), len(recs), dups)
	if code := r.terminate(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	// The checkpoint without the marker was written: a restart streams at once.
	r = startRelay(t, d.with(f.args("--initial-replay")))
	r.waitStreaming(60 * time.Second)
	if strings.Contains(r.Output(), "initial replay: publishing") {
		t.Errorf("the restart replayed again:\n%s", tailString(r.Output(), 4000))
	}
	if code := r.terminate(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// bulkOrders inserts 3000 OrderCreated rows of one aggregate (uuidFor(agg))
// in one statement, before the relay starts, and returns their ids in order.
func bulkOrders(t *testing.T, f *fixture, agg int) []int64 {
	t.Helper()
	f.exec(fmt.Sprintf(`INSERT INTO public.%s (aggregate_type, aggregate_id, event_type, payload)
		SELECT 'Order', '%s', 'OrderCreated', format('{"order_id": "%s", "customer_id": "c-%%s", "status": "PENDING", "amount_cents": %%s, "currency": "EUR", "items": [{"sku": "s", "quantity": 1, "unit_price_cents": 1}], "created_at": 1700000000000}', g, g)::jsonb
		FROM generate_series(1, 3000) g`, f.table, uuidFor(agg), uuidFor(agg)))
	return tableIDs(t, f)
}

// tableIDs lists the ids of the fixture's table, in order.
func tableIDs(t *testing.T, f *fixture) []int64 {
	t.Helper()
	rows, err := f.connect().Query(context.Background(), "SELECT id FROM public."+f.table+" ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestInitialReplayCrash: a kill -9 during the initial replay leaves the
// pending marker in the checkpoint, and the next start replays again; every
// row reaches Kafka.
func TestInitialReplayCrash(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	t.Cleanup(func() { f.exec("DROP PUBLICATION IF EXISTS " + f.publication) })
	ids := bulkOrders(t, f, 8001)
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	// A small in-flight bound makes the replay slow enough to be killed.
	args := f.args("--initial-replay", "--max-in-flight-events", "5")
	r := startRelay(t, args)
	waitFor(t, 120*time.Second, "the initial replay under way", func() bool {
		return strings.Contains(r.Output(), "initial replay: publishing") && len(c.records()) > 10
	})
	r.kill()
	if strings.Contains(r.Output(), "initial replay complete") {
		t.Fatalf("the initial replay completed before the kill:\n%s", tailString(r.Output(), 3000))
	}
	got := len(distinctIDs(c.records()))
	if got >= len(ids) {
		t.Fatalf("every row was published before the kill (%d)", got)
	}
	r = startRelay(t, f.args("--initial-replay"))
	r.waitStreaming(120 * time.Second)
	if !strings.Contains(r.Output(), "initial replay: publishing") || !strings.Contains(r.Output(), "initial replay complete") {
		t.Fatalf("the next start did not replay again:\n%s", tailString(r.Output(), 4000))
	}
	recs := c.waitIDs(180*time.Second, ids)
	checkAggregateOrder(t, recs, f.topic("Order"))
	later := insertInto(t, f.connect(), "public."+f.table, 99)
	c.waitIDs(60*time.Second, []int64{later})
	if code := r.terminate(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// TestInitialReplayKeepsSlot: an initial replay longer than the server's
// wal_sender_timeout keeps the replication connection (status updates
// while nothing is read from it), and the relay streams afterwards without
// a reconnect.
func TestInitialReplayKeepsSlot(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	t.Cleanup(func() { f.exec("DROP PUBLICATION IF EXISTS " + f.publication) })
	f.exec(fmt.Sprintf(`INSERT INTO public.%s (aggregate_type, aggregate_id, event_type, payload)
		SELECT 'Order', '%s', 'OrderCreated', format('{"order_id": "%s", "customer_id": "c-%%s", "status": "PENDING", "amount_cents": %%s, "currency": "EUR", "items": [{"sku": "s", "quantity": 1, "unit_price_cents": 1}], "created_at": 1700000000000}', g, g)::jsonb
		FROM generate_series(1, 2500) g`, f.table, uuidFor(8002), uuidFor(8002)))
	args := f.args("--initial-replay", "--max-in-flight-events", "1")
	setFlag(args, "--pg-url", f.pg.url+"&options=-c%20wal_sender_timeout%3D4s")
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	r := startRelay(t, args)
	r.waitStreaming(180 * time.Second)
	out := r.Output()
	m := regexp.MustCompile(`initial replay complete: streaming.* took=(\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no completed initial replay:\n%s", tailString(out, 4000))
	}
	took, err := time.ParseDuration(m[1])
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "msg=reconnect") {
		t.Errorf("the relay reconnected:\n%s", tailString(out, 4000))
	}
	if took < 8*time.Second {
		t.Logf("the replay took %s only, less than twice wal_sender_timeout (4s): the keepalive was not put to the test", took)
	}
	conn := f.connect()
	defer conn.Close(context.Background())
	later := insertInto(t, conn, "public."+f.table, 99)
	c.waitIDs(60*time.Second, []int64{later})
	if n := len(distinctIDs(c.records())); n != 2501 {
		t.Errorf("%d distinct ids in Kafka, want 2501", n)
	}
	if code := r.terminate(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// TestInitialReplayNeedsCreatedAt: --initial-replay on a table without a
// created_at column exits 2 naming the flag, before creating anything.
func TestInitialReplayNeedsCreatedAt(t *testing.T) {
	t.Parallel()
	f := newFixture(t, `CREATE TABLE %s (
	id bigserial PRIMARY KEY,
	aggregate_type text NOT NULL,
	aggregate_id text NOT NULL,
	event_type text NOT NULL,
	payload jsonb NOT NULL
)`)
	t.Cleanup(func() { f.exec("DROP PUBLICATION IF EXISTS " + f.publication) })
	exitsConfig(t, f.args("--initial-replay"), "--initial-replay", "public."+f.table, "created_at")
	if slotExists(t, connect(t), f.slot) {
		t.Errorf("slot %s was created", f.slot)
	}
}

// TestInitialReplayTakeover: a replica standing by while the active one
// runs the initial replay takes the slot over when the active one is
// killed, and replays again (the pending marker), then streams.
func TestInitialReplayTakeover(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	t.Cleanup(func() { f.exec("DROP PUBLICATION IF EXISTS " + f.publication) })
	ids := bulkOrders(t, f, 8003)
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	a := startRelay(t, f.args("--initial-replay", "--max-in-flight-events", "2"))
	waitFor(t, 120*time.Second, "the initial replay under way", func() bool {
		return strings.Contains(a.Output(), "initial replay: publishing") && len(c.records()) > 10
	})
	b := startRelay(t, f.args("--initial-replay"))
	waitFor(t, 60*time.Second, "the second replica standing by", func() bool {
		return strings.Contains(b.Output(), "standby: slot is active in another process")
	})
	a.kill()
	if strings.Contains(a.Output(), "initial replay complete") {
		t.Fatalf("the initial replay completed before the kill:\n%s", tailString(a.Output(), 3000))
	}
	b.waitStreaming(120 * time.Second)
	for _, want := range []string{"takeover: this instance now holds the slot", "initial replay: publishing", "initial replay complete"} {
		if !strings.Contains(b.Output(), want) {
			t.Errorf("the replica's output lacks %q:\n%s", want, tailString(b.Output(), 4000))
		}
	}
	recs := c.waitIDs(180*time.Second, ids)
	checkAggregateOrder(t, recs, f.topic("Order"))
	later := insertInto(t, f.connect(), "public."+f.table, 99)
	c.waitIDs(60*time.Second, []int64{later})
	if code := b.terminate(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}
