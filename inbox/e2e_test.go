package inbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestEndToEnd runs the example writer (orders), the real relay and two
// instances of the example consumer (loyalty) as processes, kills the
// relay with -9 three times and a consumer with -9 three times while
// events flow, and stops Kafka for a while. Afterwards every order has
// exactly one bonus accrual, every cancellation exactly one reversal, in
// order, and the duplicates that reached the consumers were counted and
// skipped.
func TestEndToEnd(t *testing.T) {
	url := newDB(t)
	s := suffix()
	prefix := "e" + s
	topic, relayDLQ, consumer := prefix+".Order", prefix+".relay-dlq", "loyalty_"+s
	consumerDLQ := prefix + ".loyalty-dlq"
	createTopic(t, topic, 3)
	createTopic(t, consumerDLQ, 1)
	ddl, err := os.ReadFile(filepath.Join(root, "docs", "outbox_uuid.sql"))
	if err != nil {
		t.Fatal(err)
	}
	execSQL(t, url, string(ddl))

	relayArgv := relayArgs(url, s, prefix, relayDLQ)
	relays := []*proc{start(t, "relay", relayBin, relayArgv...)}
	waitFor(t, 60*time.Second, "the relay's slot", func() bool {
		n, _ := queryInt(url, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1 AND active", "slot_"+s)
		return n == 1
	})
	loyaltyArgs := []string{"--pg-url", url, "--kafka-brokers", broker.Addr(), "--schema-registry-url", registry.URL(),
		"--topics", topic, "--consumer", consumer, "--dlq-topic", consumerDLQ, "--session-timeout", "6s", "--workers", "4"}
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
		relays[len(relays)-1].kill()
		t.Logf("relay killed at %d orders", placed())
		relays = append(relays, start(t, "relay", relayBin, relayArgv...))
	}
	killConsumer := func(i int, at int64) {
		// Mid-batch: while the consumers are applying events.
		waitFor(t, 120*time.Second, fmt.Sprintf("%d accruals", at), func() bool { return accrued() >= at })
		name := []string{"loyalty-a", "loyalty-b"}[i]
		consumers[i].kill()
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
	writer.cmd.Process.Signal(syscall.SIGTERM)
	if code := writer.wait(60 * time.Second); code != 0 {
		t.Fatalf("orders exited %d", code)
	}
	orders := mustInt(t, url, "SELECT count(*) FROM orders")
	cancelled := mustInt(t, url, "SELECT count(*) FROM orders WHERE status = 'CANCELLED'")
	waitFor(t, 180*time.Second, "every order accrued and every cancellation reversed", func() bool {
		n, err := queryInt(url, "SELECT count(DISTINCT order_id) FROM bonus_accruals")
		r, err2 := queryInt(url, "SELECT count(*) FROM bonus_accruals WHERE reversed")
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
		dups += len(p.lines("duplicate "))
		dlq += strings.Count(p.output(), "dead-letter topic")
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
