package inbox

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/outbox"
)

// TestEndToEnd runs the example writer (orders), the real relay and two
// instances of the example consumer (loyalty) as processes, kills the
// relay with -9 three times and a consumer with -9 three times while
// events flow, and stops Kafka for a while. Afterwards every order has
// exactly one bonus accrual, every cancellation exactly one reversal, in
// order, and the duplicates that reached the consumers were counted and
// skipped.
func TestEndToEnd(t *testing.T) { endToEnd(t) }

// TestEndToEndBatch is TestEndToEnd with the consumers running 100 events
// per transaction (Config.BatchSize).
func TestEndToEndBatch(t *testing.T) { endToEnd(t, "--batch-size", "100") }

// TestEndToEndSQL is TestEndToEnd with the consumers applying events
// through database/sql (Config.SQLDB, SQLHandler).
func TestEndToEndSQL(t *testing.T) { endToEnd(t, "--database-sql") }

// endToEnd is TestEndToEnd with extra flags for the loyalty consumers.
func endToEnd(t *testing.T, loyaltyFlags ...string) {
	url := newDB(t)
	s := suffix()
	prefix := "e" + s
	topic, relayDLQ, consumer := prefix+".Order", prefix+".relay-dlq", "loyalty_"+s
	consumerDLQ := prefix + ".loyalty-dlq"
	createTopic(t, topic, 3)
	createTopic(t, consumerDLQ, 1)
	execDoc(t, url, "outbox.sql")

	relayArgv := relayArgs(url, s, prefix, relayDLQ)
	relays := []*proc{startRelay(t, url, s, relayArgv)}
	loyaltyArgs := []string{"--pg-url", url, "--kafka-brokers", broker.Addr(), "--schema-registry-url", registry.URL(),
		"--topics", topic, "--consumer", consumer, "--dlq-topic", consumerDLQ, "--session-timeout", "6s", "--workers", "4"}
	loyaltyArgs = append(loyaltyArgs, loyaltyFlags...)
	consumers := []*proc{start(t, "loyalty-a", loyaltyBin, append(loyaltyArgs, "--setup")...)}
	waitFor(t, 60*time.Second, "the loyalty tables", func() bool {
		n, _ := queryInt(url, "SELECT count(*) FROM pg_tables WHERE tablename = 'loyalty_effects'")
		return n == 1
	})
	consumers = append(consumers, start(t, "loyalty-b", loyaltyBin, loyaltyArgs...))
	// The writer places orders until the faults are over; every count
	// below comes from the database.
	writer := start(t, "orders", ordersBin, "--pg-url", url, "--setup", "--orders", "0", "--rate", "45", "--cancel-every", "3")

	var killed []*proc // consumers killed: their output counts too
	placed := func() int64 { n, _ := queryInt(url, "SELECT count(*) FROM orders"); return n }
	accrued := func() int64 { n, _ := queryInt(url, "SELECT count(*) FROM bonus_accruals"); return n }
	killRelay := func(at int64) {
		waitFor(t, 120*time.Second, fmt.Sprintf("%d orders placed", at), func() bool { return placed() >= at })
		relays[len(relays)-1].Kill()
		t.Logf("relay killed at %d orders", placed())
		relays = append(relays, start(t, "relay", relayBin, relayArgv...))
	}
	killConsumer := func(i int, at int64) {
		// Mid-batch: while the consumers are applying events.
		waitFor(t, 120*time.Second, fmt.Sprintf("%d accruals", at), func() bool { return accrued() >= at })
		name := []string{"loyalty-a", "loyalty-b"}[i]
		consumers[i].Kill()
		t.Logf("%s killed at %d accruals", name, accrued())
		killed = append(killed, consumers[i])
		consumers[i] = start(t, name, loyaltyBin, loyaltyArgs...)
	}
	killRelay(80)
	killConsumer(0, 120)
	waitFor(t, 120*time.Second, "250 orders placed", func() bool { return placed() >= 250 })
	if err := broker.Stop(); err != nil {
		t.Fatal(err)
	}
	at := placed()
	t.Logf("Kafka stopped at %d orders", at)
	waitFor(t, 60*time.Second, "orders placed while Kafka is down", func() bool { return placed() >= at+100 })
	if err := broker.Restart(); err != nil {
		t.Fatal(err)
	}
	now := placed()
	t.Logf("Kafka restarted at %d orders", now)
	killRelay(now + 100)
	killConsumer(1, accrued()+40)
	killRelay(now + 250)
	killConsumer(0, accrued()+40)
	waitFor(t, 120*time.Second, "orders after the last kill", func() bool { return placed() >= now+350 })
	writer.Cmd.Process.Signal(syscall.SIGTERM)
	if code := writer.Wait(60 * time.Second); code != 0 {
		t.Fatalf("orders exited %d", code)
	}
	orders := mustInt(t, url, "SELECT count(*) FROM orders")
	cancelled := mustInt(t, url, "SELECT count(*) FROM orders WHERE status = 'CANCELLED'")
	var accruedOrders, reversed int64
	t.Cleanup(func() {
		if t.Failed() {
			marks, _ := queryInt(url, "SELECT count(*) FROM processed_messages WHERE consumer = $1", consumer)
			events, _ := queryInt(url, "SELECT count(*) FROM outbox")
			t.Logf("at the end: %d of %d orders accrued, %d of %d cancellations reversed, %d of %d events marked", accruedOrders, orders, reversed, cancelled, marks, events)
		}
	})
	waitFor(t, 180*time.Second, "every order accrued and every cancellation reversed", func() bool {
		n, err := queryInt(url, "SELECT count(DISTINCT order_id) FROM bonus_accruals")
		r, err2 := queryInt(url, "SELECT count(*) FROM bonus_accruals WHERE reversed")
		accruedOrders, reversed = n, r
		return err == nil && err2 == nil && n == orders && r >= cancelled
	})
	// Let the consumers commit and settle: every event marked.
	events := mustInt(t, url, "SELECT count(*) FROM outbox")
	waitFor(t, 60*time.Second, "a mark for every event", func() bool {
		n, _ := queryInt(url, "SELECT count(*) FROM processed_messages WHERE consumer = $1", consumer)
		return n >= events
	})

	// Exactly once: one accrual per order, one reversal per cancellation,
	// one effect per event.
	if n := mustInt(t, url, "SELECT count(*) FROM (SELECT order_id FROM bonus_accruals GROUP BY order_id HAVING count(*) <> 1) x"); n != 0 {
		t.Errorf("%d orders have more or less than one accrual", n)
	}
	if n := mustInt(t, url, "SELECT count(*) FROM bonus_accruals"); n != orders {
		t.Errorf("%d accruals, want %d", n, orders)
	}
	if n := mustInt(t, url, "SELECT count(*) FROM bonus_accruals a JOIN orders o ON o.id::text = a.order_id WHERE a.reversed <> (o.status = 'CANCELLED')"); n != 0 {
		t.Errorf("%d accruals whose reversal does not match the order's status", n)
	}
	if n := mustInt(t, url, "SELECT count(*) FROM loyalty_effects"); n != events {
		t.Errorf("%d effects applied, want one per event: %d", n, events)
	}
	if n := mustInt(t, url, "SELECT count(*) FROM processed_messages WHERE consumer = $1", consumer); n != events {
		t.Errorf("%d marks, want %d", n, events)
	}
	if n := mustInt(t, url, "SELECT (SELECT coalesce(sum(points), 0) FROM loyalty_balances) - (SELECT coalesce(sum(points), 0) FROM bonus_accruals WHERE NOT reversed)"); n != 0 {
		t.Errorf("balances differ from the accruals by %d points", n)
	}
	// Order per aggregate: every reversal was applied after its accrual.
	if n := mustInt(t, url, `SELECT count(*) FROM loyalty_effects c JOIN loyalty_effects r ON r.order_id = c.order_id
		WHERE c.event_type = 'OrderCreated' AND r.event_type = 'OrderCancelled' AND r.seq < c.seq`); n != 0 {
		t.Errorf("%d cancellations applied before their order's accrual", n)
	}
	// What reached Kafka, read independently: every event at least once.
	recs := readAll(t, topic, int(events), 60*time.Second)
	ids := map[string]int{}
	for _, r := range recs {
		for _, h := range r.Headers {
			if h.Key == "id" {
				ids[string(h.Value)]++
			}
		}
	}
	if int64(len(ids)) != events {
		t.Errorf("%d distinct ids in Kafka, want %d", len(ids), events)
	}
	// Duplicates: redelivered by the relay or by a consumer restart, each
	// counted by the consumer that skipped it.
	dups, dlq := 0, 0
	for _, p := range append(consumers, killed...) {
		dups += len(p.Lines("duplicate "))
		dlq += strings.Count(p.Output(), "dead-letter topic")
	}
	t.Logf("%d events, %d orders (%d cancelled), %d records in Kafka (%d relay duplicates), %d duplicates skipped by the consumers",
		events, orders, cancelled, len(recs), len(recs)-len(ids), dups)
	if dups == 0 {
		t.Error("no duplicate reached a consumer despite the kills; the dedupe path was not exercised")
	}
	if dlq != 0 {
		t.Errorf("%d dead letters: no event should have failed", dlq)
	}
}

// traceKey carries the test's trace context, as OpenTelemetry's span would.
type traceKey struct{}

// TestEndToEndTableless: the outbox API written in ModeMessage (the
// table-less form) and in ModeTable, the only difference being
// Config.Mode, goes through the real relay to Kafka and into an inbox
// consumer. The first third of the transactions emit logical messages only;
// the rest interleave messages and uuid-table rows for the same aggregates
// in one transaction. The relay is killed with -9 while events flow, inside
// a transaction of 600 events, so part of it is redelivered.
// Afterwards each event was applied exactly once, under the UUIDv7 id that
// Write returned, with the traceparent the propagator added, and each
// aggregate's events were applied in the order they were written, rows and
// messages alike; the outbox table holds the rows and nothing else.
func TestEndToEndTableless(t *testing.T) {
	url := newDB(t)
	s := suffix()
	prefix := "m" + s
	topic := prefix + ".Order"
	createTopic(t, topic, 3)
	execDoc(t, url, "outbox.sql")
	execSQL(t, url, `CREATE TABLE written (seq bigserial PRIMARY KEY, id uuid NOT NULL, aggregate_id text NOT NULL, mode text NOT NULL, traceparent text NOT NULL, amount bigint NOT NULL);
		CREATE TABLE applied (seq bigserial PRIMARY KEY, id text NOT NULL, aggregate_id text NOT NULL, order_id text NOT NULL, traceparent text NOT NULL, amount bigint NOT NULL)`)

	// At most 4 events in flight make the relay take a while over the big
	// transaction below, so the kill lands inside it: its commit is not
	// confirmed, and the records already in Kafka are redelivered.
	relayArgv := append(relayArgs(url, s, prefix, prefix+".relay-dlq"), "--message-prefix", "outbox", "--max-in-flight-events", "4")
	relay := startRelay(t, url, s, relayArgv)
	cfg := baseConfig(t, url, topic, func(ctx context.Context, tx pgx.Tx, ev *Event[map[string]any]) error {
		orderID, _ := ev.Value["order_id"].(string)
		amount, _ := ev.Value["amount_cents"].(int64)
		_, err := tx.Exec(ctx, "INSERT INTO applied (id, aggregate_id, order_id, traceparent, amount) VALUES ($1, $2, $3, $4, $5)",
			ev.ID, ev.AggregateID, orderID, ev.Headers["traceparent"], amount)
		return err
	})
	cfg.Workers = 4
	consumer := runConsumer(t, cfg)

	// The service code: one function, two writers that differ in Mode only.
	propagate := func(ctx context.Context, h map[string]string) {
		if tp, ok := ctx.Value(traceKey{}).(string); ok {
			h["traceparent"] = tp
		}
	}
	writers := map[string]*outbox.Writer{}
	for name, mode := range map[string]outbox.Mode{"message": outbox.ModeMessage, "row": outbox.ModeTable} {
		w, err := outbox.New(outbox.Config{Mode: mode, Propagator: propagate})
		if err != nil {
			t.Fatal(err)
		}
		writers[name] = w
	}
	// 240 transactions of 6 events for two aggregates, three each; the
	// 80th has 600 events. The first 80 emit messages only; from then on
	// each aggregate's events alternate between messages and rows.
	const txs, perTx, bigTx, bigN = 240, 6, 80, 600
	const total = txs*perTx - perTx + bigN
	aggs := make([]string, 10)
	for i := range aggs {
		aggs[i] = fmt.Sprintf("%s-0000-4000-8000-%012d", s, i)
	}
	pool := newPool(t, url)
	var written atomic.Int64
	writeTx := func(i, n int) error {
		b := make([]byte, 24)
		rand.Read(b)
		ctx := context.WithValue(context.Background(), traceKey{}, fmt.Sprintf("00-%x-%x-01", b[:16], b[16:]))
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			for j := range n {
				agg := aggs[(i+j%2*5)%len(aggs)]
				mode := "message"
				if i >= bigTx && (i+j/2)%2 == 1 { // each aggregate alternates
					mode = "row"
				}
				amount := written.Load() + int64(j)
				id, err := writers[mode].Write(ctx, tx, outbox.Event{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated",
					Payload: map[string]any{"order_id": agg, "customer_id": "c-1", "status": "PENDING", "amount_cents": amount, "items": []any{}, "created_at": time.Now().UnixMilli()}})
				if err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, "INSERT INTO written (id, aggregate_id, mode, traceparent, amount) VALUES ($1, $2, $3, $4, $5)",
					id, agg, mode, ctx.Value(traceKey{}), amount); err != nil {
					return err
				}
			}
			return nil
		})
	}
	// The writer keeps a steady pace (a load shape, not synchronisation)
	// so that events flow before, during and after the kill.
	writeErr := make(chan error, 1)
	go func() {
		tick := time.NewTicker(15 * time.Millisecond)
		defer tick.Stop()
		for i := range txs {
			<-tick.C
			n := perTx
			if i == bigTx {
				n = bigN
			}
			if err := writeTx(i, n); err != nil {
				writeErr <- fmt.Errorf("transaction %d: %w", i, err)
				return
			}
			written.Add(int64(n))
		}
		writeErr <- nil
	}()
	// Kill the relay once part of the big transaction is in Kafka.
	before := int64(bigTx * perTx)
	waitFor(t, 60*time.Second, "the big transaction under way in Kafka", func() bool { return endOffsets(t, topic, 3) >= before+bigN/10 })
	relay.Kill()
	inKafka := endOffsets(t, topic, 3)
	atKill := written.Load()
	t.Logf("relay killed with %d records in Kafka, %d events written", inKafka, atKill)
	if inKafka >= before+bigN {
		t.Errorf("the big transaction was complete in Kafka at the kill (%d records); the kill was not mid-transaction", inKafka)
	}
	startRelay(t, url, s, relayArgv)
	if err := <-writeErr; err != nil {
		t.Fatal(err)
	}
	if atKill >= total {
		t.Fatalf("the writer had finished when the relay was killed; the kill was not mid-stream")
	}
	appliedN := func() int64 { n, _ := queryInt(url, "SELECT count(*) FROM applied"); return n }
	waitFor(t, 120*time.Second, "every event applied", func() bool { return appliedN() >= total })

	// Exactly once, under the id Write returned, with its trace context and
	// payload.
	if n := mustInt(t, url, "SELECT count(*) FROM written"); n != total {
		t.Fatalf("%d events written, want %d", n, total)
	}
	if n := mustInt(t, url, "SELECT count(*) FROM applied"); n != total {
		t.Errorf("%d effects applied, want %d (one per event)", n, total)
	}
	if n := mustInt(t, url, "SELECT count(*) FROM (SELECT id FROM applied GROUP BY id HAVING count(*) > 1) x"); n != 0 {
		t.Errorf("%d events applied more than once", n)
	}
	if n := mustInt(t, url, `SELECT count(*) FROM written w FULL JOIN applied a ON a.id = w.id::text
		WHERE a.id IS NULL OR w.id IS NULL OR a.aggregate_id <> w.aggregate_id OR a.order_id <> w.aggregate_id
		OR a.traceparent <> w.traceparent OR a.amount <> w.amount`); n != 0 {
		t.Errorf("%d events whose id, key, traceparent or payload differ between what was written and what was applied", n)
	}
	if n := mustInt(t, url, "SELECT count(*) FROM written WHERE substr(id::text, 15, 1) <> '7'"); n != 0 {
		t.Errorf("%d event ids are not UUIDv7", n)
	}
	// Order per aggregate: the n-th event written for an aggregate is the
	// n-th applied for it, across rows and messages.
	if n := mustInt(t, url, `SELECT count(*) FROM
		(SELECT id::text AS id, row_number() OVER (PARTITION BY aggregate_id ORDER BY seq) AS n FROM written) w
		JOIN (SELECT id, row_number() OVER (PARTITION BY aggregate_id ORDER BY seq) AS n FROM applied) a USING (id)
		WHERE a.n <> w.n`); n != 0 {
		t.Errorf("%d events applied out of their aggregate's order", n)
	}
	// Table-less: the messages left no row; the rows are the row-mode events.
	if n := mustInt(t, url, "SELECT count(*) FROM written WHERE mode = 'message'"); n < total/2 {
		t.Errorf("only %d events were written as messages", n)
	}
	if n := mustInt(t, url, `SELECT count(*) FROM written w FULL JOIN outbox o ON o.id = w.id
		WHERE (w.mode = 'row') <> (o.id IS NOT NULL)`); n != 0 {
		t.Errorf("the outbox table differs from the row-mode events in %d rows", n)
	}
	// What reached Kafka, read independently: the id and traceparent headers.
	want := map[string]string{}
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(context.Background(), "SELECT id::text, traceparent FROM written")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, tp string
		if err := rows.Scan(&id, &tp); err != nil {
			t.Fatal(err)
		}
		want[id] = tp
	}
	conn.Close(context.Background())
	recs := readAll(t, topic, total, 60*time.Second)
	for _, r := range recs {
		id := header(r, "id")
		if tp, ok := want[id]; !ok || header(r, "traceparent") != tp || header(r, "event_type") != "OrderCreated" {
			t.Errorf("record at %d/%d: id %q, headers %v: not an event written, or not its traceparent", r.Partition, r.Offset, id, r.Headers)
			break
		}
	}
	st := consumer.c.Stats()
	inKafka = endOffsets(t, topic, 3)
	t.Logf("%d events (%d as messages), %d records in Kafka (%d redelivered by the relay), %d duplicates skipped by the consumer, %d dead-lettered",
		total, mustInt(t, url, "SELECT count(*) FROM written WHERE mode = 'message'"), inKafka, inKafka-total, st.Duplicates, st.DeadLettered)
	if inKafka == total {
		t.Error("the relay redelivered nothing after the kill; the dedupe path was not exercised")
	}
	waitFor(t, 60*time.Second, "every redelivered record skipped as a duplicate", func() bool {
		return consumer.c.Stats().Duplicates == inKafka-total
	})
	if st.DeadLettered != 0 {
		t.Errorf("%d events dead-lettered: none should have failed", st.DeadLettered)
	}
}
