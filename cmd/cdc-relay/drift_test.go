package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Publication drift: the publication and the configured tables disagree.
// Each test first sets up a case in which a row used to be lost without a
// word: skipped and confirmed, or never decoded.

// secondTable creates another outbox table of the fixture, public.<prefix>_<name>,
// whose ids start at 1000000 so that they cannot be taken for the
// fixture's own.
func secondTable(t *testing.T, f *fixture, prefix string) string {
	t.Helper()
	name := "public." + prefix + "_" + f.name
	f.exec(fmt.Sprintf(outboxDDL, name))
	f.exec(fmt.Sprintf("ALTER SEQUENCE %s_id_seq RESTART WITH 1000000", name))
	t.Cleanup(func() { f.exec("DROP TABLE IF EXISTS " + name + " CASCADE") })
	return name
}

// insertInto inserts one OrderCreated event into table and returns its id.
func insertInto(t *testing.T, conn *pgx.Conn, table string, n int) int64 {
	t.Helper()
	agg := uuidFor(n)
	var id int64
	if err := conn.QueryRow(context.Background(), "INSERT INTO "+table+" (aggregate_type, aggregate_id, event_type, payload) VALUES ('Order', $1, 'OrderCreated', $2) RETURNING id",
		agg, orderCreated(agg, n)).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// waitCounted waits until pg_stat_user_tables counts an insert into table.
func waitCounted(t *testing.T, conn *pgx.Conn, table string) {
	t.Helper()
	waitFor(t, 30*time.Second, "the insert into "+table+" in pg_stat_user_tables", func() bool {
		var n int64
		conn.QueryRow(context.Background(), "SELECT coalesce((SELECT n_tup_ins FROM pg_stat_user_tables WHERE relid = to_regclass($1)), 0)", table).Scan(&n)
		return n > 0
	})
}

// exitsConfig runs the relay with args and wants exit 2 with every one of
// wants in its output; it returns the output.
func exitsConfig(t *testing.T, args []string, wants ...string) string {
	t.Helper()
	r := startRelay(t, args)
	code := r.wait(120 * time.Second)
	out := r.Output()
	if code != exitConfig {
		t.Fatalf("exit %d, want %d:\n%s", code, exitConfig, tailString(out, 4000))
	}
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, tailString(out, 4000))
		}
	}
	return out
}

// TestDriftEmptyTableListedPublication: an empty --table with a publication that
// still lists the outbox. The relay used to skip the outbox's rows and
// confirm them, and check passed. Now run exits 2 before it creates the
// slot, and check fails, both naming the table and the DROP TABLE
// statement or the --table that fixes it.
func TestDriftEmptyTableListedPublication(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	f.exec(fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE public.%s WITH (publish = 'insert')", f.publication, f.table))
	t.Cleanup(func() { f.exec("DROP PUBLICATION IF EXISTS " + f.publication) })
	insertInto(t, connect(t), "public."+f.table, 1)
	args := f.args()
	setFlag(args, "--table", "")
	drop := fmt.Sprintf(`ALTER PUBLICATION "%s" DROP TABLE "public"."%s"`, f.publication, f.table)
	exitsConfig(t, args, "public."+f.table, drop, "--table public."+f.table, "--allow-extra-tables")
	if slotExists(t, connect(t), f.slot) {
		t.Errorf("slot %s was created: nothing may be confirmed past the row", f.slot)
	}
	code, out := runCommand(commandArgs("check", args))
	if code == 0 || !strings.Contains(out, drop) || strings.Contains(out, "all checks passed") {
		t.Fatalf("check = %d, want a failure naming %q:\n%s", code, drop, out)
	}
}

// TestDriftTableAlteredIn: a table ALTERed into the relay's FOR TABLE
// publication while it streams. Its row used to be skipped and confirmed;
// now it lands in the dead-letter topic (reason unconfigured_table, the
// table in a header, the columns as text in the value), even under
// --on-invalid halt, and the stream goes on. It runs at-least-once and
// exactly-once (delivery_test.go), where a read_committed consumer reads the
// dead letter and the later row once each.
func TestDriftTableAlteredIn(t *testing.T) {
	t.Parallel()
	eachDelivery(t, true, testDriftTableAlteredIn)
}

func testDriftTableAlteredIn(t *testing.T, d delivery) {
	f := newFixture(t, "")
	t.Cleanup(func() { f.exec("DROP PUBLICATION IF EXISTS " + f.publication) })
	other := "public.other_" + f.name
	f.exec("CREATE TABLE " + other + ` (id bigint, note text, "Body" jsonb, gone text)`)
	t.Cleanup(func() { f.exec("DROP TABLE IF EXISTS " + other) })
	c := d.consume(t, "^"+f.topicPrefix+`\..*`)
	r := startRelay(t, d.with(f.args("--on-invalid", "halt")))
	r.waitStreaming(60 * time.Second)

	f.exec(fmt.Sprintf("ALTER PUBLICATION %s ADD TABLE %s", f.publication, other))
	note := `it's "quoted" <ü>`
	f.exec("INSERT INTO "+other+` (id, note, "Body", gone) VALUES (7, $1, '{"a": [1, 2]}', NULL)`, note)
	conn := connect(t)
	later := insertInto(t, conn, "public."+f.table, 2)
	after := currentLSN(t, conn)

	recs := c.waitIDs(90*time.Second, []int64{later})
	var dl *record
	waitFor(t, 60*time.Second, "the dead letter", func() bool {
		for _, rec := range c.records() {
			if rec.Topic == f.dlq {
				dl = &rec
				return true
			}
		}
		return false
	})
	if got := dl.Headers["table"]; got != other {
		t.Errorf("table header = %q, want %q", got, other)
	}
	if e := dl.Headers["error"]; !strings.Contains(e, other+" is not a configured outbox table") || !strings.Contains(e, "DROP TABLE") || dl.Headers["error_kind"] != "unconfigured_table" {
		t.Errorf("error header = %q, error_kind %q", e, dl.Headers["error_kind"])
	}
	var value map[string]*string
	if err := json.Unmarshal(dl.Value, &value); err != nil {
		t.Fatalf("dead-letter value %q: %v", dl.Value, err)
	}
	want := map[string]*string{"id": ptr("7"), "note": ptr(note), "Body": ptr(`{"a": [1, 2]}`), "gone": nil}
	for col, w := range want {
		g, ok := value[col]
		if !ok || (g == nil) != (w == nil) || (g != nil && *g != *w) {
			t.Errorf("column %s = %v, want %v (value %s)", col, orNull(g), orNull(w), dl.Value)
		}
	}
	for _, rec := range recs {
		if rec.Headers["id"] == fmt.Sprint(later) && rec.Topic != f.topic("Order") {
			t.Errorf("the later outbox row went to %s", rec.Topic)
		}
	}
	r.waitMetric(`cdc_relay_dlq_events_total{reason="unconfigured_table"}`, 30*time.Second, func(v float64) bool { return v == 1 })
	r.waitMetric(`cdc_relay_unconfigured_rows_total{table="`+other+`"}`, 30*time.Second, func(v float64) bool { return v == 1 })
	waitFor(t, 60*time.Second, "the LSN past both rows confirmed", func() bool { return f.confirmedFlush() >= after })
	select {
	case <-r.done:
		t.Fatalf("the relay exited (%d) under --on-invalid halt:\n%s", r.exitCode, tailString(r.Output(), 3000))
	default:
	}
	if out := r.Output(); !strings.Contains(out, "a row of a table that is not a configured outbox table arrived") || !strings.Contains(out, "cdc-relay dlq redrive") || !strings.Contains(out, "--table "+other) {
		t.Errorf("no WARN for the row:\n%s", tailString(r.Output(), 3000))
	}
	if d.once() {
		var dls, rows int
		for _, rec := range c.records() {
			switch {
			case rec.Topic == f.dlq:
				dls++
			case rec.Headers["id"] == fmt.Sprint(later):
				rows++
			default:
				t.Errorf("unexpected record on %s: id %q", rec.Topic, rec.Headers["id"])
			}
		}
		if dls != 1 || rows != 1 {
			t.Errorf("read_committed: %d dead letters and %d records of the later row, want 1 and 1", dls, rows)
		}
	}
}

func ptr(s string) *string { return &s }

func orNull(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}

// TestDriftSecondTable: a second outbox table, in both orders.
func TestDriftSecondTable(t *testing.T) {
	t.Parallel()
	// Config first: the table is configured before it joins the
	// publication. The relay used to halt asking for ADD TABLE and say
	// nothing of the rows written before; as the owner it now adds the
	// table itself, and says those rows are never decoded.
	t.Run("config first, owner", func(t *testing.T) {
		f := newFixture(t, "")
		t.Cleanup(func() { f.exec("DROP PUBLICATION IF EXISTS " + f.publication) })
		second := secondTable(t, f, "second")
		conn := connect(t)
		c := consume(t, "^"+f.topicPrefix+`\..*`)
		r := startRelay(t, f.args())
		r.waitStreaming(60 * time.Second)
		first := insertInto(t, conn, "public."+f.table, 1)
		c.waitIDs(90*time.Second, []int64{first})
		if code := r.terminate(); code != 0 {
			t.Fatalf("exit %d", code)
		}
		insertInto(t, conn, second, 2) // before the table joins: never decoded
		waitCounted(t, conn, second)

		r = startRelay(t, f.args("--table", second))
		r.waitStreaming(60 * time.Second)
		stmt := fmt.Sprintf(`ALTER PUBLICATION "%s" ADD TABLE "public"."%s"`, f.publication, strings.TrimPrefix(second, "public."))
		for _, want := range []string{"level=WARN", "the relay added it", "statement=" + strconv.Quote(stmt), "never decoded", "cdc-relay replay --table " + second + " --since 1970-01-01T00:00:00Z --until ",
			second + " (n_live_tup 1, n_tup_ins 1) seems to hold rows", "pg_stat_user_tables"} {
			if !strings.Contains(r.Output(), want) {
				t.Errorf("output lacks %q:\n%s", want, tailString(r.Output(), 4000))
			}
		}
		var n int
		if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_publication_tables WHERE pubname = $1", f.publication).Scan(&n); err != nil || n != 2 {
			t.Fatalf("publication has %d tables (%v), want 2", n, err)
		}
		if strings.Contains(r.Output(), "the last checkpoint did not list joined since") {
			t.Errorf("a second WARN for the table the relay added:\n%s", tailString(r.Output(), 3000))
		}
		next := insertInto(t, conn, second, 3)
		c.waitIDs(90*time.Second, []int64{next})
	})

	// Config first, and the relay's role owns neither: exit 2 with the
	// exact statement and the same word about earlier rows.
	t.Run("config first, not the owner", func(t *testing.T) {
		f := newFixture(t, "")
		t.Cleanup(func() { f.exec("DROP PUBLICATION IF EXISTS " + f.publication) })
		second := secondTable(t, f, "second")
		role := "relay_" + f.name
		f.exec(fmt.Sprintf("CREATE ROLE %s LOGIN REPLICATION", role))
		f.exec(fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE public.%s WITH (publish = 'insert', publish_via_partition_root = true)", f.publication, f.table))
		args := f.args("--table", second)
		setFlag(args, "--pg-url", strings.Replace(dbURL, "postgres://postgres@", "postgres://"+role+"@", 1))
		stmt := fmt.Sprintf(`ALTER PUBLICATION "%s" ADD TABLE "public"."%s"`, f.publication, strings.TrimPrefix(second, "public."))
		exitsConfig(t, args, stmt, "does not own", role, "never decoded", "cdc-relay replay --table "+second)
		if slotExists(t, connect(t), f.slot) {
			t.Errorf("slot %s was created", f.slot)
		}
	})

	// ALTER first: someone adds the table to the publication, then to the
	// configuration. Its rows in between reach the dead-letter topic; once
	// configured, its rows are events.
	t.Run("alter first", func(t *testing.T) { testDriftAlterFirst(t, kafkaSink) })
}

// testDriftAlterFirst: a table added to the publication before it is
// configured. Its rows in between are dead letters; the configuration
// without it is exit 2 naming the statement that drops it; once it is
// configured its rows are events, and the relay says that its rows from
// before it joined were never decoded.
func testDriftAlterFirst(t *testing.T, newSink func(*testing.T, *fixture) sinkUnderTest) {
	f := newFixture(t, "")
	t.Cleanup(func() { f.exec("DROP PUBLICATION IF EXISTS " + f.publication) })
	second := secondTable(t, f, "second")
	conn := connect(t)
	s := newSink(t, f)
	r := startRelay(t, s.args())
	r.waitStreaming(60 * time.Second)
	f.exec(fmt.Sprintf("ALTER PUBLICATION %s ADD TABLE %s", f.publication, second))
	early := insertInto(t, conn, second, 1)
	first := insertInto(t, conn, "public."+f.table, 2)
	s.waitIDs(90*time.Second, []int64{first})
	waitFor(t, 60*time.Second, "the early row in the dead-letter destination", func() bool { return s.deadLettered(second, early) })
	if code := r.terminate(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	// The old configuration no longer matches the publication.
	exitsConfig(t, s.args(), fmt.Sprintf(`ALTER PUBLICATION "%s" DROP TABLE "public"."%s"`, f.publication, strings.TrimPrefix(second, "public.")))

	waitCounted(t, conn, second)
	r = startRelay(t, s.args("--table", second))
	r.waitStreaming(60 * time.Second)
	if strings.Contains(r.Output(), "the relay added it") {
		t.Errorf("the relay altered a publication that already published the table:\n%s", tailString(r.Output(), 3000))
	}
	// It joined since the last checkpoint: its rows from before it
	// joined the publication were never decoded.
	for _, want := range []string{"the last checkpoint did not list joined since", second + " (n_live_tup 1, n_tup_ins 1) seems to hold rows",
		"cdc-relay replay --table " + second + " --since 1970-01-01T00:00:00Z --until "} {
		if !strings.Contains(r.Output(), want) {
			t.Errorf("output lacks %q:\n%s", want, tailString(r.Output(), 3000))
		}
	}
	next := insertInto(t, conn, second, 3)
	s.waitIDs(90*time.Second, []int64{next})
	if where := s.misrouted(next); where != "" {
		t.Errorf("row %d of the configured second table went to %s", next, where)
	}
}

// TestDriftAllTables: a FOR ALL TABLES publication (Debezium's default)
// publishes business tables too. Without --allow-extra-tables the relay
// exits 2 naming the flag; with it, their rows are skipped and counted by
// table, and the outbox rows are published. FOR TABLES IN SCHEMA is the
// same.
func TestDriftAllTables(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	other := "public.other_" + f.name
	f.exec("CREATE TABLE " + other + " (x int)")
	t.Cleanup(func() { f.exec("DROP TABLE IF EXISTS " + other) })
	f.exec("CREATE PUBLICATION " + f.publication + " FOR ALL TABLES")
	t.Cleanup(func() { f.exec("DROP PUBLICATION IF EXISTS " + f.publication) })
	exitsConfig(t, f.args(), "FOR ALL TABLES", "--allow-extra-tables")
	if slotExists(t, connect(t), f.slot) {
		t.Errorf("slot %s was created", f.slot)
	}

	c := consume(t, "^"+f.topicPrefix+`\..*`)
	r := startRelay(t, f.args("--allow-extra-tables"))
	r.waitStreaming(60 * time.Second)
	f.exec("INSERT INTO " + other + " VALUES (1), (2)")
	f.exec("INSERT INTO " + other + " VALUES (3)")
	conn := connect(t)
	id := insertInto(t, conn, "public."+f.table, 1)
	after := currentLSN(t, conn)
	c.waitIDs(90*time.Second, []int64{id})
	r.waitMetric(fmt.Sprintf(`cdc_relay_skipped_rows_total{table=%q}`, other), 30*time.Second, func(v float64) bool { return v == 3 })
	waitFor(t, 60*time.Second, "the LSN confirmed", func() bool { return f.confirmedFlush() >= after })
	for _, rec := range c.records() {
		if rec.Topic == f.dlq {
			t.Errorf("a dead letter for a skipped row: %+v", rec)
		}
	}
	n := 0
	for _, line := range strings.Split(r.Output(), "\n") {
		if strings.Contains(line, "skipping the rows of a table that is not an outbox table") && strings.Contains(line, "table="+other) {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d INFO lines for the skipped table, want 1:\n%s", n, tailString(r.Output(), 3000))
	}
	if code := r.terminate(); code != 0 {
		t.Fatalf("exit %d", code)
	}

	t.Run("tables in schema", func(t *testing.T) {
		g := newFixture(t, "")
		schema := "s_" + g.name
		g.exec("CREATE SCHEMA " + schema)
		t.Cleanup(func() { g.exec("DROP SCHEMA IF EXISTS " + schema + " CASCADE") })
		g.exec(fmt.Sprintf("CREATE PUBLICATION %s FOR TABLES IN SCHEMA %s, TABLE public.%s", g.publication, schema, g.table))
		t.Cleanup(func() { g.exec("DROP PUBLICATION IF EXISTS " + g.publication) })
		exitsConfig(t, g.args(), "FOR TABLES IN SCHEMA "+schema, "--allow-extra-tables")
	})
}

// TestCheckUnpublishedInserts: a configured table that the publication
// does not publish and that has received inserts: check warns that those
// rows were never decoded, from pg_stat_user_tables, without reading the
// table.
func TestCheckUnpublishedInserts(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	second := secondTable(t, f, "second")
	f.exec(fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE public.%s WITH (publish = 'insert', publish_via_partition_root = true)", f.publication, f.table))
	t.Cleanup(func() { f.exec("DROP PUBLICATION IF EXISTS " + f.publication) })
	conn := connect(t)
	insertInto(t, conn, second, 1)
	insertInto(t, conn, second, 2)
	scans := func() int64 {
		var n int64
		if err := conn.QueryRow(context.Background(), "SELECT seq_scan + coalesce(idx_scan, 0) FROM pg_stat_user_tables WHERE relid = to_regclass($1)", second).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := scans()
	want := fmt.Sprintf("table %s has received 2 inserts (pg_stat_user_tables.n_tup_ins) but publication %s does not publish it", second, f.publication)
	var out string
	waitFor(t, 60*time.Second, "check's warning (statistics are flushed within a second or so)", func() bool {
		_, out = runCommand(commandArgs("check", f.args("--table", second)))
		return strings.Contains(out, want)
	})
	for _, w := range []string{"never decoded", "cdc-relay replay --table " + second + " --since 1970-01-01T00:00:00Z --until <", "the relay adds it at start", "heuristic"} {
		if !strings.Contains(out, w) {
			t.Errorf("check output lacks %q:\n%s", w, out)
		}
	}
	if after := scans(); after != before {
		t.Errorf("check scanned %s: seq_scan + idx_scan %d → %d", second, before, after)
	}
}

// TestDriftRowFilter: a row filter on the outbox table (PostgreSQL 15+)
// keeps the rows that do not match out of the stream for good. The relay
// refuses it (exit 2) with the statements that publish every row, and so
// does check.
func TestDriftRowFilter(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	f.exec(fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE public.%s WHERE (aggregate_type <> 'Audit') WITH (publish = 'insert')", f.publication, f.table))
	t.Cleanup(func() { f.exec("DROP PUBLICATION IF EXISTS " + f.publication) })
	fix := fmt.Sprintf(`BEGIN; ALTER PUBLICATION "%s" DROP TABLE "public"."%s"; ALTER PUBLICATION "%s" ADD TABLE "public"."%s"; COMMIT;`, f.publication, f.table, f.publication, f.table)
	exitsConfig(t, f.args(), "WHERE (aggregate_type <> 'Audit'::text)", fix)
	if code, out := runCommand(commandArgs("check", f.args("--allow-extra-tables"))); code == 0 || !strings.Contains(out, fix) {
		t.Fatalf("check = %d, want a failure giving %q:\n%s", code, fix, out)
	}
}
