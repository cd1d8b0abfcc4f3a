package main

// Outbox shapes besides one plain table: a partitioned outbox whose
// partitions come and go while the relay streams, several outbox tables
// with their own column names, and the delete-in-the-same-transaction
// cleanup.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// partitionedParentDDL is docs/outbox.sql's daily-partitioned variant.
const partitionedParentDDL = `CREATE TABLE %[1]s (
	id bigserial,
	aggregate_type text NOT NULL,
	aggregate_id text NOT NULL,
	event_type text NOT NULL,
	payload jsonb NOT NULL,
	headers jsonb NOT NULL DEFAULT '{}',
	created_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (id, created_at)
) PARTITION BY RANGE (created_at);
`

// partitionedDDL adds explicit partitions for two days around a midnight.
const partitionedDDL = partitionedParentDDL + `CREATE TABLE %[1]s_d1 PARTITION OF %[1]s FOR VALUES FROM ('2026-11-30 00:00+00') TO ('2026-12-01 00:00+00');
CREATE TABLE %[1]s_d2 PARTITION OF %[1]s FOR VALUES FROM ('2026-12-01 00:00+00') TO ('2026-12-02 00:00+00')`

// TestPartitionedOutbox: events written across a midnight partition
// boundary, then a partition detached and dropped and new ones created and
// attached while the relay streams: every event arrives exactly once and
// the relay never reconnects.
func TestPartitionedOutbox(t *testing.T) {
	t.Parallel()
	f := newFixture(t, partitionedDDL)
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	r := startRelay(t, f.args())
	r.waitStreaming(60 * time.Second)
	ctx := context.Background()
	conn := connect(t)

	insert := fmt.Sprintf(`INSERT INTO %s (aggregate_type, aggregate_id, event_type, payload, created_at) VALUES ('Order', $1, 'OrderCreated', $2::jsonb, $3) RETURNING id`, f.table)
	var ids []int64
	write := func(at string, n int) {
		t.Helper()
		agg := uuidFor(600 + n%3)
		var id int64
		if err := conn.QueryRow(ctx, insert, agg, orderCreated(agg, n), at).Scan(&id); err != nil {
			t.Fatalf("insert at %s: %v", at, err)
		}
		ids = append(ids, id)
	}
	// Across midnight, in one transaction and in separate ones.
	if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	write("2026-11-30 23:59:59.999+00", 1)
	write("2026-12-01 00:00:00+00", 2)
	if _, err := conn.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	write("2026-11-30 23:59:59.999999+00", 3)
	write("2026-12-01 00:00:00.000001+00", 4)
	c.waitIDs(60*time.Second, ids)

	// Tomorrow's partition is created, yesterday's detached and dropped, and
	// a table made elsewhere is attached as the day after.
	f.exec(fmt.Sprintf("CREATE TABLE %[1]s_d3 PARTITION OF %[1]s FOR VALUES FROM ('2026-12-02 00:00+00') TO ('2026-12-03 00:00+00')", f.table))
	write("2026-12-02 08:00:00+00", 5)
	f.exec(fmt.Sprintf("ALTER TABLE %[1]s DETACH PARTITION %[1]s_d1", f.table))
	f.exec(fmt.Sprintf("DROP TABLE %s_d1", f.table))
	write("2026-12-01 09:00:00+00", 6)
	f.exec(fmt.Sprintf("CREATE TABLE %[1]s_d4 (LIKE %[1]s INCLUDING DEFAULTS INCLUDING CONSTRAINTS)", f.table))
	f.exec(fmt.Sprintf("ALTER TABLE %[1]s ATTACH PARTITION %[1]s_d4 FOR VALUES FROM ('2026-12-03 00:00+00') TO ('2026-12-04 00:00+00')", f.table))
	write("2026-12-03 10:00:00+00", 7)
	write("2026-12-02 23:59:59.999999+00", 8)

	recs := c.waitIDs(60*time.Second, ids)
	for id, n := range distinctIDs(recs) {
		if n != 1 {
			t.Errorf("event %s arrived %d times, want once (the relay never restarted)", id, n)
		}
	}
	for _, rec := range recs {
		if rec.Topic != f.topic("Order") {
			t.Errorf("event %s on topic %s", rec.Headers["id"], rec.Topic)
		}
	}
	if n, err := r.metric("cdc_relay_reconnects_total"); err == nil && n != 0 {
		t.Errorf("%v reconnects while partitions changed", n)
	}
	if strings.Count(r.Output(), `msg=streaming`) != 1 {
		t.Errorf("the relay started streaming more than once:\n%s", tailString(r.Output(), 3000))
	}
	if code := r.terminate(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// TestPartitionedWithoutRoot: an existing publication of a partitioned
// outbox without publish_via_partition_root would deliver rows under each
// partition's name; check and the relay's halt say so and give the ALTER
// PUBLICATION that fixes it, after which the relay streams.
func TestPartitionedWithoutRoot(t *testing.T) {
	t.Parallel()
	// A default partition takes the row this test writes at now(), whatever
	// the date.
	f := newFixture(t, partitionedParentDDL+`CREATE TABLE %[1]s_default PARTITION OF %[1]s DEFAULT`)
	f.exec(fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE public.%s WITH (publish = 'insert')", f.publication, f.table))
	t.Cleanup(func() { f.exec("DROP PUBLICATION IF EXISTS " + f.publication) })
	fix := fmt.Sprintf(`ALTER PUBLICATION "%s" SET (publish_via_partition_root = true)`, f.publication)

	code, out := runCommand(commandArgs("check", f.args()))
	if code != exitFailed || !strings.Contains(out, "is partitioned") || !strings.Contains(out, fix) {
		t.Fatalf("check = %d, want a FAIL line with %q:\n%s", code, fix, out)
	}
	r := startRelay(t, f.args("--halt-linger", "0s"))
	if code := r.wait(60 * time.Second); code != exitFailed {
		t.Fatalf("exit code %d, want %d", code, exitFailed)
	}
	if !strings.Contains(r.Output(), fix) {
		t.Fatalf("halt does not give %q:\n%s", fix, tailString(r.Output(), 3000))
	}

	f.exec(fix)
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	r = startRelay(t, f.args())
	r.waitStreaming(60 * time.Second)
	agg := uuidFor(610)
	ids, err := f.insertTx(context.Background(), connect(t), []event{{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	c.waitIDs(60*time.Second, ids)
}

// TestSeveralOutboxTables: two outbox tables with different column names
// (the second mapped in YAML), written in the same transactions: every
// event arrives, in its transaction's order per aggregate, with the same
// topics, keys and headers rules. It runs at-least-once and exactly-once
// (delivery_test.go), where a read_committed consumer reads every event of
// both tables exactly once.
func TestSeveralOutboxTables(t *testing.T) {
	t.Parallel()
	eachDelivery(t, true, testSeveralOutboxTables)
}

func testSeveralOutboxTables(t *testing.T, d delivery) {
	f := newFixture(t, "")
	second := "billing_" + f.name
	f.exec(fmt.Sprintf(`CREATE TABLE %s (
		event_id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
		aggregatetype text NOT NULL,
		aggregateid text NOT NULL,
		type text NOT NULL,
		body jsonb NOT NULL
	)`, second))
	cfgPath := filepath.Join(t.TempDir(), "relay.yaml")
	yaml := fmt.Sprintf("table:\n  - public.%s\n  - name: public.%s\n    columns:\n      id: event_id\n      aggregate_type: aggregatetype\n      aggregate_id: aggregateid\n      event_type: type\n      payload: body\n", f.table, second)
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	args := f.args("--config", cfgPath)
	// The YAML names the tables; drop the fixture's --table flag.
	for i := range args {
		if args[i] == "--table" {
			args = append(args[:i], args[i+2:]...)
			break
		}
	}
	c := d.consume(t, "^"+f.topicPrefix+`\..*`)
	r := startRelay(t, d.with(args))
	r.waitStreaming(60 * time.Second)
	ctx := context.Background()
	conn := connect(t)

	insertA := fmt.Sprintf(`INSERT INTO %s (aggregate_type, aggregate_id, event_type, payload) VALUES ('Order', $1, 'OrderCreated', $2::jsonb) RETURNING id::text`, f.table)
	insertB := fmt.Sprintf(`INSERT INTO %s (aggregatetype, aggregateid, type, body) VALUES ('Order', $1, 'OrderCancelled', $2::jsonb) RETURNING event_id::text`, second)
	want := map[string][]string{} // aggregate → ids in commit order
	var all []string
	for i := 0; i < 20; i++ {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for j := 0; j < 4; j++ {
			agg := uuidFor(620 + (i+j)%3)
			q, payload := insertA, orderCreated(agg, i*10+j)
			if j%2 == 1 {
				q, payload = insertB, orderCancelled(agg, i*10+j)
			}
			var id string
			if err := tx.QueryRow(ctx, q, agg, payload).Scan(&id); err != nil {
				t.Fatal(err)
			}
			want[agg] = append(want[agg], id)
			all = append(all, id)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var recs []record
	waitFor(t, 90*time.Second, "both tables' events", func() bool {
		recs = c.records()
		seen := distinctIDs(recs)
		for _, id := range all {
			if seen[id] == 0 {
				return false
			}
		}
		return true
	})
	got := map[string][]string{}
	for _, rec := range recs {
		if rec.Topic != f.topic("Order") {
			t.Fatalf("event %s on %s", rec.Headers["id"], rec.Topic)
		}
		got[rec.Key] = append(got[rec.Key], rec.Headers["id"])
	}
	for agg, ids := range want {
		if strings.Join(got[agg], ",") != strings.Join(ids, ",") {
			t.Errorf("aggregate %s: order in Kafka %v, want %v", agg, got[agg], ids)
		}
	}
	if d.once() {
		end := currentLSN(t, conn)
		waitFor(t, 30*time.Second, "the slot to confirm past the events", func() bool { return f.confirmedFlush() >= end })
		checkOnce(t, c.records(), all)
	}
	if code := r.terminate(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// TestTablesConfigErrors: a --table that does not exist, and two --table
// values naming one table, exit 2 naming --table.
func TestTablesConfigErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	for name, args := range map[string][]string{
		"missing table": f.args("--table", "public.nope_"+f.name),
		"same table":    f.args("--table", f.table),
	} {
		t.Run(name, func(t *testing.T) {
			r := startRelay(t, args)
			if code := r.wait(60 * time.Second); code != exitConfig {
				t.Fatalf("exit code %d, want %d:\n%s", code, exitConfig, tailString(r.Output(), 2000))
			}
			if !strings.Contains(r.Output(), "--table") {
				t.Fatalf("output does not name --table:\n%s", tailString(r.Output(), 2000))
			}
		})
	}
}

// TestDeleteInSameTransaction: the cleanup that keeps the outbox empty,
// deleting the row in the transaction that inserted it, delivers every
// event (the publication publishes inserts only) and leaves no row.
func TestDeleteInSameTransaction(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	r := startRelay(t, f.args())
	r.waitStreaming(60 * time.Second)
	ctx := context.Background()
	conn := connect(t)
	var ids []int64
	for i := 0; i < 50; i++ {
		agg := uuidFor(630 + i%5)
		var id int64
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.QueryRow(ctx, fmt.Sprintf(`INSERT INTO %s (aggregate_type, aggregate_id, event_type, payload) VALUES ('Order', $1, 'OrderCreated', $2::jsonb) RETURNING id`, f.table),
			agg, orderCreated(agg, i)).Scan(&id); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, fmt.Sprintf(`DELETE FROM %s WHERE id = $1`, f.table), id); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	recs := c.waitIDs(60*time.Second, ids)
	if len(distinctIDs(recs)) != len(ids) {
		t.Fatalf("%d distinct events, want %d", len(distinctIDs(recs)), len(ids))
	}
	var left int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+f.table).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("%d rows left in the outbox", left)
	}
}

// TestPartitionRetention: docs/outbox.sql's outbox_partitions_maintain
// creates today's and tomorrow's partitions and detaches and drops the old
// ones while the relay streams; rows written into the new partitions
// arrive.
func TestPartitionRetention(t *testing.T) {
	t.Parallel()
	applyOutboxSQL(t)
	f := newFixture(t, partitionedParentDDL+`CREATE TABLE %[1]s_20200101 PARTITION OF %[1]s FOR VALUES FROM ('2020-01-01 00:00+00') TO ('2020-01-02 00:00+00')`)
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	r := startRelay(t, f.args())
	r.waitStreaming(60 * time.Second)
	ctx := context.Background()
	conn := connect(t)
	var old int64
	if err := conn.QueryRow(ctx, fmt.Sprintf(`INSERT INTO %s (aggregate_type, aggregate_id, event_type, payload, created_at)
		VALUES ('Order', $1, 'OrderCreated', $2::jsonb, '2020-01-01 12:00+00') RETURNING id`, f.table), uuidFor(640), orderCreated(uuidFor(640), 1)).Scan(&old); err != nil {
		t.Fatal(err)
	}
	f.exec(fmt.Sprintf("SELECT outbox_partitions_maintain('public.%s', 7)", f.table))
	var parts []string
	rows, err := conn.Query(ctx, `SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = $1::regclass ORDER BY 1`, "public."+f.table)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var p string
		rows.Scan(&p)
		parts = append(parts, p)
	}
	today := time.Now().UTC()
	want := []string{f.table + "_" + today.Format("20060102"), f.table + "_" + today.AddDate(0, 0, 1).Format("20060102")}
	if strings.Join(parts, ",") != strings.Join(want, ",") {
		t.Fatalf("partitions %v, want %v (the 2020 one dropped)", parts, want)
	}
	ids := []int64{old}
	for i := 0; i < 5; i++ {
		got, err := f.insertTx(ctx, conn, []event{{AggregateType: "Order", AggregateID: uuidFor(641), EventType: "OrderCreated", Payload: orderCreated(uuidFor(641), i)}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, got...)
	}
	c.waitIDs(60*time.Second, ids)
	if code := r.terminate(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}
