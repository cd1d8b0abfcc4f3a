package main

// The table-less outbox: transactional logical decoding messages
// (pg_logical_emit_message, through docs/outbox.sql's outbox_emit) are
// published like rows.

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/internal/testtier"
)

var outboxSQLOnce sync.Once

// applyOutboxSQL applies docs/outbox.sql (its table and outbox_emit) to the
// test database once.
func applyOutboxSQL(t *testing.T) {
	t.Helper()
	testtier.Need(t)
	var err error
	outboxSQLOnce.Do(func() {
		var b []byte
		if b, err = os.ReadFile("../../docs/outbox.sql"); err == nil {
			err = pg.Exec(context.Background(), testDB, string(b))
		}
	})
	if err != nil {
		t.Fatalf("apply docs/outbox.sql: %v", err)
	}
}

// emit calls outbox_emit in tx and returns the message's LSN text.
func emit(t *testing.T, ctx context.Context, tx pgx.Tx, prefix, aggType, aggID, eventType, payload string, id *string) string {
	t.Helper()
	var lsn string
	if err := tx.QueryRow(ctx, `SELECT outbox_emit($1, $2, $3, $4::jsonb, '{"traceparent": "00-msg"}', $5, $6)::text`,
		aggType, aggID, eventType, payload, id, prefix).Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	return lsn
}

// TestLogicalMessages: rows and messages mixed in one transaction keep
// their order per aggregate; a message's id is its LSN unless it carries
// one; an aborted transaction's message never appears; a non-transactional
// or malformed message goes to the DLQ with its reason; other prefixes are
// ignored. It runs at-least-once and exactly-once (delivery_test.go): a
// read_committed consumer then reads every row, message and dead letter
// exactly once, and each dead letter is counted once.
func TestLogicalMessages(t *testing.T) {
	t.Parallel()
	applyOutboxSQL(t)
	eachDelivery(t, true, testLogicalMessages)
}

func testLogicalMessages(t *testing.T, d delivery) {
	f := newFixture(t, "")
	prefix := "outbox_" + f.name
	c := d.consume(t, "^"+f.topicPrefix+`\..*`)
	r := startRelay(t, d.with(f.args("--message-prefix", prefix)))
	r.waitStreaming(60 * time.Second)
	ctx := context.Background()
	conn := connect(t)

	agg := uuidFor(500)
	insert := fmt.Sprintf(`INSERT INTO %s (aggregate_type, aggregate_id, event_type, payload) VALUES ('Order', $1, 'OrderCreated', $2::jsonb) RETURNING id`, f.table)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var row1, row3 int64
	if err := tx.QueryRow(ctx, insert, agg, orderCreated(agg, 1)).Scan(&row1); err != nil {
		t.Fatal(err)
	}
	lsn2 := emit(t, ctx, tx, prefix, "Order", agg, "OrderCreated", orderCreated(agg, 2), nil)
	if err := tx.QueryRow(ctx, insert, agg, orderCreated(agg, 3)).Scan(&row3); err != nil {
		t.Fatal(err)
	}
	id4 := "msg-4"
	emit(t, ctx, tx, prefix, "Order", agg, "OrderCancelled", orderCancelled(agg, 4), &id4)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	aborted, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	emit(t, ctx, aborted, prefix, "Order", agg, "OrderCreated", orderCreated(agg, 99), nil)
	aborted.Rollback(ctx)

	var nonTx, malformed, other string
	content := fmt.Sprintf(`{"aggregate_type": "Order", "aggregate_id": %q, "event_type": "OrderCreated", "payload": %s}`, agg, orderCreated(agg, 98))
	for _, q := range []struct {
		dst             *string
		transactional   bool
		prefix, content string
	}{
		{&nonTx, false, prefix, content},
		{&malformed, true, prefix, "not json"},
		{&other, true, "other_" + f.name, content},
	} {
		if err := conn.QueryRow(ctx, `SELECT pg_logical_emit_message($1, $2, $3)::text`, q.transactional, q.prefix, q.content).Scan(q.dst); err != nil {
			t.Fatal(err)
		}
	}
	last, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lsn5 := emit(t, ctx, last, prefix, "Order", uuidFor(501), "OrderCreated", orderCreated(uuidFor(501), 5), nil)
	if err := last.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	want := []string{strconv.FormatInt(row1, 10), lsn2, strconv.FormatInt(row3, 10), id4, nonTx, malformed, lsn5}
	var recs []record
	waitFor(t, 90*time.Second, "rows and messages in Kafka", func() bool {
		recs = c.records()
		seen := distinctIDs(recs)
		for _, id := range want {
			if seen[id] == 0 {
				return false
			}
		}
		return true
	})
	// Everything after the aborted transaction and the other prefix has
	// arrived; neither ever may.
	dec := newAvroDecoder()
	var order []string
	for _, rec := range recs {
		if rec.Headers["id"] == other {
			t.Errorf("a message with another prefix was published: %+v", rec)
		}
		if rec.Topic == f.dlq {
			continue
		}
		v, _, err := dec.decode(rec.Value)
		if err != nil {
			t.Fatalf("record %s: %v", rec.Headers["id"], err)
		}
		if v["customer_id"] == "c-99" {
			t.Errorf("the aborted transaction's message was published: %v", v)
		}
		if rec.Key == agg {
			order = append(order, rec.Headers["id"])
			if rec.Headers["id"] == lsn2 && (v["customer_id"] != "c-2" || rec.Headers["traceparent"] != "00-msg" || rec.Headers["event_type"] != "OrderCreated") {
				t.Errorf("message 2: value %v headers %v", v, rec.Headers)
			}
		}
	}
	if got, wantOrder := strings.Join(order, " "), strings.Join(want[:4], " "); got != wantOrder {
		t.Errorf("aggregate's order in Kafka %q, want the transaction's %q", got, wantOrder)
	}
	for id, want := range map[string][2]string{nonTx: {"non-transactional", "non_transactional"}, malformed: {"message content is not valid JSON", "invalid_message"}} {
		rec := byID(recs)[id]
		if rec.Topic != f.dlq || !strings.Contains(rec.Headers["error"], want[0]) || rec.Headers["error_kind"] != want[1] {
			t.Errorf("message %s: topic %q error %q error_kind %q, want the DLQ with %q, %s", id, rec.Topic, rec.Headers["error"], rec.Headers["error_kind"], want[0], want[1])
		}
	}
	if string(byID(recs)[malformed].Value) != "not json" {
		t.Errorf("malformed message's dead letter value %q, want its content", byID(recs)[malformed].Value)
	}
	end := currentLSN(t, conn)
	waitFor(t, 30*time.Second, "the slot to confirm past the messages", func() bool { return f.confirmedFlush() >= end })
	if d.once() {
		checkOnce(t, c.records(), want)
		if n, err := r.metric("cdc_relay_dlq_events_total"); err != nil || n != 2 {
			t.Errorf("cdc_relay_dlq_events_total = %v (%v), want 2: each dead letter counted once", n, err)
		}
	}
	if code := r.terminate(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// TestLogicalMessagesRedelivery: a message id taken from the LSN is the
// same when the WAL is decoded again (a second slot created at the same
// point stands for a restart from an older confirmed position), and a
// message transaction interleaved with a kill -9 is delivered after the
// restart; with only other-prefix messages and another table's writes, the
// slot keeps up with the WAL. It runs at-least-once and exactly-once
// (delivery_test.go), in parallel (each stops a broker of its own):
// through the kill a read_committed consumer then reads each message once.
func TestLogicalMessagesRedelivery(t *testing.T) {
	t.Parallel()
	applyOutboxSQL(t)
	eachDelivery(t, true, testLogicalMessagesRedelivery)
}

func testLogicalMessagesRedelivery(t *testing.T, d delivery) {
	f := newFixture(t, "")
	f.ownBroker() // stopped below
	prefix := "outbox_" + f.name
	c := d.consumeFrom(f, "^"+f.topicPrefix+`\..*`)
	r := startRelay(t, d.with(f.args("--message-prefix", prefix)))
	r.waitStreaming(60 * time.Second)
	// The second slot starts after the relay created the publication:
	// pgoutput looks the publication up as of the first change it decodes,
	// and the other tests write to this database all the time.
	second := "slot2_" + f.name
	f.exec("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", second)
	t.Cleanup(func() { f.exec("SELECT pg_drop_replication_slot($1)", second) })
	ctx := context.Background()
	connA, connB := connect(t), connect(t)

	// B stays open with its message while A, with a large one, commits.
	txB, err := connB.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lsnB := emit(t, ctx, txB, prefix, "Order", uuidFor(520), "OrderCreated", orderCreated(uuidFor(520), 1), nil)
	txA, err := connA.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	aggA := uuidFor(521)
	big := fmt.Sprintf(`{"order_id": %q, "customer_id": %q, "status": "PENDING", "amount_cents": 1, "created_at": 1}`, aggA, strings.Repeat("y", 200000))
	lsnA1 := emit(t, ctx, txA, prefix, "Order", aggA, "OrderCreated", big, nil)
	lsnA2 := emit(t, ctx, txA, prefix, "Order", aggA, "OrderCancelled", orderCancelled(aggA, 2), nil)
	if err := txA.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	afterA := currentLSN(t, connA)
	waitFor(t, 60*time.Second, "A in Kafka and confirmed", func() bool {
		seen := distinctIDs(c.records())
		return seen[lsnA1] > 0 && seen[lsnA2] > 0 && f.confirmedFlush() >= afterA
	})

	restartBroker := f.stopBroker()
	if err := txB.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r.waitMetric("cdc_relay_events_read_total", 30*time.Second, func(v float64) bool { return v >= 3 })
	r.kill()
	restartBroker()
	r2 := startRelay(t, d.with(f.args("--message-prefix", prefix)))
	waitFor(t, 90*time.Second, "B after the restart", func() bool { return distinctIDs(c.records())[lsnB] > 0 })
	if d.once() {
		afterB := currentLSN(t, connA)
		waitFor(t, 60*time.Second, "the restarted relay to confirm past B", func() bool { return f.confirmedFlush() >= afterB })
		checkOnce(t, c.records(), []string{lsnA1, lsnA2, lsnB})
	}

	// The same WAL decoded again from the second slot: the same ids.
	if code := r2.terminate(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	args := d.with(f.args("--message-prefix", prefix))
	setFlag(args, "--slot", second)
	r3 := startRelay(t, args)
	waitFor(t, 90*time.Second, "the messages once more from the second slot", func() bool {
		seen := distinctIDs(c.records())
		return seen[lsnA1] >= 2 && seen[lsnA2] >= 2 && seen[lsnB] >= 2
	})
	for _, rec := range c.records() {
		if id := rec.Headers["id"]; id != lsnA1 && id != lsnA2 && id != lsnB {
			t.Errorf("unexpected record id %q", id)
		}
	}

	// Idle outbox: other-prefix messages and another table's writes move
	// the WAL; the slot follows.
	f.exec(fmt.Sprintf("CREATE TABLE busy_%s (id serial PRIMARY KEY, v text)", f.name))
	for i := 0; i < 10; i++ {
		if _, err := connA.Exec(ctx, fmt.Sprintf(`BEGIN; INSERT INTO busy_%s (v) SELECT repeat('z', 1000) FROM generate_series(1, 500);
			SELECT pg_logical_emit_message(true, 'other', repeat('m', 1000)) FROM generate_series(1, 100); COMMIT`, f.name)); err != nil {
			t.Fatal(err)
		}
	}
	end := currentLSN(t, connA)
	waitFor(t, 30*time.Second, "confirmed_flush_lsn of an idle outbox to follow the WAL", func() bool {
		var s *string
		if err := connA.QueryRow(ctx, "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1", second).Scan(&s); err != nil || s == nil {
			return false
		}
		return parseLSN(t, *s) >= end
	})
	if code := r3.terminate(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// TestMessagePrefixOnOldServer: PostgreSQL 13's pgoutput cannot send
// logical decoding messages. An explicit --message-prefix is then a
// configuration error: check fails saying why and run exits 2. Without
// the flag the relay streams rows as before.
func TestMessagePrefixOnOldServer(t *testing.T) {
	t.Parallel()
	target := startTarget(t, 13, nil)
	f := newFixtureOn(t, target, "")
	args := f.args("--message-prefix", "outbox")
	code, out := runCommand(commandArgs("check", args))
	if code != exitFailed || !strings.Contains(out, "FAIL  --message-prefix \"outbox\": PostgreSQL 13 cannot send logical decoding messages") {
		t.Fatalf("check = %d, want a FAIL line for --message-prefix:\n%s", code, out)
	}
	r := startRelay(t, args)
	if code := r.wait(60 * time.Second); code != exitConfig {
		t.Fatalf("exit code %d, want %d:\n%s", code, exitConfig, tailString(r.Output(), 2000))
	}
	if !strings.Contains(r.Output(), "--message-prefix: PostgreSQL 13 cannot send logical decoding messages") {
		t.Fatalf("run does not say why:\n%s", tailString(r.Output(), 2000))
	}
	if _, active := f.slotState(); active {
		t.Fatal("the relay holds the slot after a configuration error")
	}
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	r = startRelay(t, f.args())
	r.waitStreaming(60 * time.Second)
	agg := uuidFor(530)
	ids, err := f.insertTx(context.Background(), f.connect(), []event{{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	c.waitIDs(60*time.Second, ids)
}

// TestTablelessOnly: with an empty --table the relay needs no outbox table at
// all: it creates an empty publication and publishes the logical messages;
// without a message prefix either it has nothing to publish and exits 2.
func TestTablelessOnly(t *testing.T) {
	t.Parallel()
	applyOutboxSQL(t)
	f := newFixture(t, "")
	prefix := "outbox_" + f.name
	args := f.args("--message-prefix", prefix)
	setFlag(args, "--table", "")
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	r := startRelay(t, args)
	r.waitStreaming(60 * time.Second)
	var tables int
	conn := connect(t)
	ctx := context.Background()
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_publication_tables WHERE pubname = $1", f.publication).Scan(&tables); err != nil || tables != 0 {
		t.Fatalf("publication %s publishes %d tables (%v), want none", f.publication, tables, err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	agg := uuidFor(540)
	lsn := emit(t, ctx, tx, prefix, "Order", agg, "OrderCreated", orderCreated(agg, 1), nil)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the message in Kafka", func() bool { return distinctIDs(c.records())[lsn] == 1 })
	if code := r.terminate(); code != 0 {
		t.Fatalf("exit code %d", code)
	}

	none := f.args("--message-prefix", "")
	setFlag(none, "--table", "")
	var stderr strings.Builder
	if code := run(none, env(nil), &stderr, &stderr); code != exitConfig || !strings.Contains(stderr.String(), "--table: is empty and so is --message-prefix") {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
}

// TestInvalidJSONMessages: a logical message whose content is not valid
// JSON (RFC 8259) goes to the DLQ in both value formats, never to a topic:
// with --value-format json a leading zero was once published as it was
// and a hex float as 3.0. The dead letter carries the message's LSN as its
// id, the raw content as its value, no key and error_kind invalid_message,
// whatever id and aggregate_id the text seemed to give before the fault.
// Each format runs at-least-once and exactly-once (delivery_test.go), where
// a read_committed consumer reads each dead letter exactly once.
func TestInvalidJSONMessages(t *testing.T) {
	t.Parallel()
	applyOutboxSQL(t)
	for _, format := range []string{"avro", "json"} {
		t.Run(format, func(t *testing.T) {
			eachDelivery(t, true, func(t *testing.T, d delivery) {
				f := newFixture(t, "")
				prefix := "outbox_" + f.name
				c := d.consume(t, "^"+f.topicPrefix+`\..*`)
				r := startRelay(t, d.with(f.args("--message-prefix", prefix, "--value-format", format)))
				r.waitStreaming(60 * time.Second)
				ctx := context.Background()
				conn := connect(t)
				agg := uuidFor(560)
				head := fmt.Sprintf(`{"id": "spoofed", "aggregate_type": "Order", "aggregate_id": %q, "event_type": "OrderCreated", "headers": {"h": "v"}, "payload": `, agg)
				contents := []string{
					head + `{"order_id": "x", "n": 007}}`,
					head + `{"order_id": "x", "n": 0x1.8p1}}`,
					head + `{"order_id": "x", "n": NaN}}`,
					head + `{"order_id": "x", "items": [1,]}}`,
					head + `{'order_id': "x"}}`,
					head + `{"order_id": "x\q"}}`,
					head + `{"order_id": "\udc00"}}`,
					head + `{"order_id": "x"}} trailing`,
				}
				lsns := map[string]string{} // LSN → content
				var order []string          // the LSNs, then the valid message's
				tx, err := conn.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				for _, content := range contents {
					var lsn string
					if err := tx.QueryRow(ctx, `SELECT pg_logical_emit_message(true, $1, $2)::text`, prefix, content).Scan(&lsn); err != nil {
						t.Fatal(err)
					}
					lsns[lsn] = content
					order = append(order, lsn)
				}
				valid := emit(t, ctx, tx, prefix, "Order", agg, "OrderCreated", orderCreated(agg, 1), nil)
				order = append(order, valid)
				if err := tx.Commit(ctx); err != nil {
					t.Fatal(err)
				}
				var recs []record
				waitFor(t, 90*time.Second, "a record per message", func() bool {
					recs = c.records()
					return len(recs) >= len(contents)+1 && distinctIDs(recs)[valid] > 0
				})
				seen := distinctIDs(recs)
				for lsn, content := range lsns {
					if seen[lsn] != 1 {
						t.Errorf("%d records with id %s (content %q), want one dead letter", seen[lsn], lsn, content)
					}
				}
				for _, rec := range recs {
					id := rec.Headers["id"]
					if id == valid {
						if rec.Topic != f.topic("Order") || rec.Key != agg {
							t.Errorf("valid message: topic %q key %q", rec.Topic, rec.Key)
						}
						continue
					}
					content, ok := lsns[id]
					switch {
					case !ok:
						t.Errorf("unexpected record: topic %q id %q key %q value %q", rec.Topic, id, rec.Key, rec.Value)
					case rec.Topic != f.dlq:
						t.Errorf("invalid content %q went to %q", content, rec.Topic)
					case string(rec.Value) != content || rec.Key != "":
						t.Errorf("dead letter %s: key %q value %q, want no key and the raw content %q", id, rec.Key, rec.Value, content)
					case rec.Headers["error_kind"] != "invalid_message" || !strings.HasPrefix(rec.Headers["error"], "message content is not valid JSON: "):
						t.Errorf("dead letter %s: error_kind %q error %q, want invalid_message", id, rec.Headers["error_kind"], rec.Headers["error"])
					case rec.Headers["h"] != "" || rec.Headers["aggregate_type"] != "" || rec.Headers["event_type"] != "":
						t.Errorf("dead letter %s: headers %v taken from the invalid content", id, rec.Headers)
					}
				}
				r.waitMetric(`cdc_relay_dlq_events_total{reason="invalid_message"}`, 30*time.Second, func(v float64) bool { return v == float64(len(contents)) })
				end := currentLSN(t, conn)
				waitFor(t, 30*time.Second, "the slot to confirm past the messages", func() bool { return f.confirmedFlush() >= end })
				if d.once() {
					checkOnce(t, c.records(), order)
				}
				if code := r.terminate(); code != 0 {
					t.Fatalf("exit code %d", code)
				}
			})
		})
	}
}
