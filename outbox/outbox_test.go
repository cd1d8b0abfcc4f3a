package outbox_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/cdc-relay/cdc-relay/internal/pgtest"
	"github.com/cdc-relay/cdc-relay/internal/relaytest"
	"github.com/cdc-relay/cdc-relay/outbox"
	"github.com/cdc-relay/cdc-relay/schemaregistry"
)

// The package's PostgreSQL, started by the first test that connects;
// dbURL is set once it started (read it after connect).
var (
	services = relaytest.NewLazy(relaytest.LazyOptions{PGReady: func(c *pgtest.Cluster) (err error) {
		if dbURL, err = c.CreateDatabase(context.Background(), "outbox_test"); err != nil {
			return err
		}
		// pgtest runs the server with synchronous_commit=off; transactions
		// whose only change is a logical message then do not show in
		// pg_logical_slot_get_binary_changes (seen on 15): commit them
		// synchronously.
		return c.Exec(context.Background(), "", "ALTER DATABASE outbox_test SET synchronous_commit = on")
	}})
	dbURL string
)

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

// testMain runs the tests and then stops PostgreSQL if a test started it.
func testMain(m *testing.M) int {
	defer func() {
		if err := services.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "outbox tests:", err)
		}
	}()
	return m.Run()
}

func suffix() string {
	b := make([]byte, 4)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func connect(t *testing.T) *pgx.Conn {
	t.Helper()
	relaytest.Need(t, services.PG)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// newTable creates an outbox table from docs/outbox.sql (its table only,
// not the functions) under a new name.
func newTable(t *testing.T, conn *pgx.Conn) string {
	t.Helper()
	ddl, err := os.ReadFile("../docs/outbox.sql")
	if err != nil {
		t.Fatal(err)
	}
	create := string(ddl)
	start := strings.Index(create, "CREATE TABLE IF NOT EXISTS public.outbox (")
	end := strings.Index(create[start:], ");")
	if start < 0 || end < 0 {
		t.Fatal("docs/outbox.sql has no CREATE TABLE public.outbox")
	}
	create = create[start : start+end+2]
	name := "outbox_" + suffix()
	if _, err := conn.Exec(context.Background(), strings.ReplaceAll(create, "public.outbox", "public."+name)); err != nil {
		t.Fatal(err)
	}
	return name
}

type stored struct {
	ID, AggregateType, AggregateID, EventType string
	Payload, Headers                          map[string]any
}

func readTable(t *testing.T, conn *pgx.Conn, table string) []stored {
	t.Helper()
	rows, err := conn.Query(context.Background(), fmt.Sprintf(`SELECT id::text, aggregate_type, aggregate_id, event_type, payload, headers FROM %s ORDER BY id`, table))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []stored
	for rows.Next() {
		var s stored
		if err := rows.Scan(&s.ID, &s.AggregateType, &s.AggregateID, &s.EventType, &s.Payload, &s.Headers); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func order(id string, cents int) outbox.Event {
	return outbox.Event{AggregateType: "Order", AggregateID: id, EventType: "OrderCreated",
		Payload: map[string]any{"order_id": id, "amount_cents": cents}}
}

func TestWritePgxCommitAndRollback(t *testing.T) {
	ctx := context.Background()
	conn := connect(t)
	table := newTable(t, conn)
	w, err := outbox.New(outbox.Config{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ev := order("o-1", 1999)
	ev.Headers = map[string]string{"correlation_id": "req-7"}
	id, err := w.Write(ctx, tx, ev)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// A rolled-back transaction leaves no event.
	tx, _ = conn.Begin(ctx)
	if _, err := w.Write(ctx, tx, order("o-2", 5)); err != nil {
		t.Fatal(err)
	}
	tx.Rollback(ctx)

	got := readTable(t, conn, table)
	want := []stored{{ID: id, AggregateType: "Order", AggregateID: "o-1", EventType: "OrderCreated",
		Payload: map[string]any{"order_id": "o-1", "amount_cents": float64(1999)}, Headers: map[string]any{"correlation_id": "req-7"}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("table holds %+v, want %+v", got, want)
	}
}

func TestWriteDatabaseSQL(t *testing.T) {
	ctx := context.Background()
	conn := connect(t)
	table := newTable(t, conn)
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w, err := outbox.New(outbox.Config{Table: "public." + table})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteSQL(ctx, nil, order("o-1", 1)); !errors.Is(err, outbox.ErrNotTx) {
		t.Fatalf("WriteSQL with a nil *sql.Tx: err = %v, want ErrNotTx", err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	given := "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
	ev := order("o-1", 1)
	ev.ID = given
	ev.Payload = json.RawMessage(`{"order_id": "o-1", "nested": {"a": [1, 2]}}`)
	id, err := w.WriteSQL(ctx, tx, ev)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := w.WriteBatchSQL(ctx, tx, []outbox.Event{order("o-2", 2), order("o-3", 3)})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if id != given {
		t.Errorf("Write returned id %s, want the given %s", id, given)
	}
	got := readTable(t, conn, table)
	if len(got) != 3 {
		t.Fatalf("table holds %d rows, want 3: %+v", len(got), got)
	}
	byID := map[string]stored{}
	for _, s := range got {
		byID[s.ID] = s
	}
	if s := byID[given]; !reflect.DeepEqual(s.Payload, map[string]any{"order_id": "o-1", "nested": map[string]any{"a": []any{float64(1), float64(2)}}}) || len(s.Headers) != 0 {
		t.Errorf("row %s = %+v", given, s)
	}
	for i, id := range ids {
		if s := byID[id]; s.AggregateID != fmt.Sprintf("o-%d", i+2) {
			t.Errorf("batch id %d (%s) holds %+v", i, id, s)
		}
	}
}

// TestWriteBatchOneStatement checks that a batch is one INSERT: a statement
// trigger counts statements.
func TestWriteBatchOneStatement(t *testing.T) {
	ctx := context.Background()
	conn := connect(t)
	table := newTable(t, conn)
	counter := table + "_stmts"
	for _, q := range []string{
		fmt.Sprintf(`CREATE TABLE %s (n int)`, counter),
		fmt.Sprintf(`CREATE FUNCTION %[1]s_f() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN INSERT INTO %[1]s VALUES (1); RETURN NULL; END$$`, counter),
		fmt.Sprintf(`CREATE TRIGGER t AFTER INSERT ON %s FOR EACH STATEMENT EXECUTE FUNCTION %s_f()`, table, counter),
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	w, _ := outbox.New(outbox.Config{Table: table})
	evs := make([]outbox.Event, 500)
	for i := range evs {
		evs[i] = order(fmt.Sprintf("o-%03d", i), i)
	}
	tx, _ := conn.Begin(ctx)
	ids, err := w.WriteBatch(ctx, tx, evs)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var stmts int
	conn.QueryRow(ctx, "SELECT count(*) FROM "+counter).Scan(&stmts)
	if stmts != 1 {
		t.Errorf("WriteBatch of 500 events ran %d INSERT statements, want 1", stmts)
	}
	got := readTable(t, conn, table) // ordered by id: UUIDv7 ids sort in write order
	if len(got) != len(evs) {
		t.Fatalf("%d rows, want %d", len(got), len(evs))
	}
	for i, s := range got {
		if s.ID != ids[i] || s.AggregateID != evs[i].AggregateID {
			t.Fatalf("row %d = %s %s, want %s %s", i, s.ID, s.AggregateID, ids[i], evs[i].AggregateID)
		}
	}
}

// TestWriteBatchLarge: past PostgreSQL's 65535 parameters a batch takes a
// second statement, in the same transaction, in order.
func TestWriteBatchLarge(t *testing.T) {
	ctx := context.Background()
	conn := connect(t)
	table := newTable(t, conn)
	w, _ := outbox.New(outbox.Config{Table: table})
	evs := make([]outbox.Event, 11000)
	for i := range evs {
		evs[i] = outbox.Event{AggregateType: "Order", AggregateID: fmt.Sprint(i), EventType: "OrderCreated", Payload: []byte(`{}`)}
	}
	tx, _ := conn.Begin(ctx)
	ids, err := w.WriteBatch(ctx, tx, evs)
	if err != nil {
		t.Fatal(err)
	}
	tx.Commit(ctx)
	var n int
	var ordered bool
	conn.QueryRow(ctx, fmt.Sprintf(`SELECT count(*), bool_and(prev IS NULL OR prev < aggregate_id::int)
		FROM (SELECT aggregate_id, lag(aggregate_id::int) OVER (ORDER BY id) prev FROM %s) x`, table)).Scan(&n, &ordered)
	if n != len(evs) || len(ids) != len(evs) || !ordered {
		t.Fatalf("%d rows, %d ids, in write order: %v; want %d", n, len(ids), ordered, len(evs))
	}
}

func TestWriteColumnsMapping(t *testing.T) {
	ctx := context.Background()
	conn := connect(t)
	table := "events_" + suffix()
	if _, err := conn.Exec(ctx, fmt.Sprintf(`CREATE TABLE %s (event_id text PRIMARY KEY, aggregatetype text, aggregateid text, type text, body jsonb, created_at timestamptz DEFAULT now())`, table)); err != nil {
		t.Fatal(err)
	}
	w, err := outbox.New(outbox.Config{Table: table, Columns: outbox.Columns{ID: "event_id", AggregateType: "aggregatetype",
		AggregateID: "aggregateid", EventType: "type", Payload: "body", Headers: "-"}})
	if err != nil {
		t.Fatal(err)
	}
	tx, _ := conn.Begin(ctx)
	defer tx.Rollback(ctx)
	id, err := w.Write(ctx, tx, order("o-1", 1))
	if err != nil {
		t.Fatal(err)
	}
	withHeaders := order("o-2", 2)
	withHeaders.Headers = map[string]string{"x": "y"}
	if _, err := w.Write(ctx, tx, withHeaders); !errors.Is(err, outbox.ErrInvalidEvent) {
		t.Errorf("headers without a headers column: err = %v, want ErrInvalidEvent", err)
	}
	var gotType, gotBody string
	if err := tx.QueryRow(ctx, fmt.Sprintf(`SELECT type, body::text FROM %s WHERE event_id = $1`, table), id).Scan(&gotType, &gotBody); err != nil {
		t.Fatal(err)
	}
	if gotType != "OrderCreated" || gotBody != `{"order_id": "o-1", "amount_cents": 1}` {
		t.Errorf("row = %s %s", gotType, gotBody)
	}
}

func TestWriteInvalid(t *testing.T) {
	ctx := context.Background()
	conn := connect(t)
	table := newTable(t, conn)
	schemas, err := schemaregistry.LoadDir(filepath.Join("..", "testdata", "schemas"))
	if err != nil {
		t.Fatal(err)
	}
	w, _ := outbox.New(outbox.Config{Table: table, Schemas: schemas})
	valid := outbox.Event{AggregateType: "Order", AggregateID: "5d9e1d7a-6b1f-4c4e-9a57-1f0e0a3c2b11", EventType: "OrderCreated",
		Payload: json.RawMessage(`{"order_id": "5d9e1d7a-6b1f-4c4e-9a57-1f0e0a3c2b11", "customer_id": "c-1", "status": "PENDING", "amount_cents": 1999, "created_at": 1700000000000}`)}
	mod := func(f func(*outbox.Event)) outbox.Event { e := valid; f(&e); return e }
	cases := []struct {
		name string
		ev   outbox.Event
		want string
	}{
		{"no aggregate type", mod(func(e *outbox.Event) { e.AggregateType = "" }), "AggregateType is empty"},
		{"no aggregate id", mod(func(e *outbox.Event) { e.AggregateID = "" }), "AggregateID is empty"},
		{"no event type", mod(func(e *outbox.Event) { e.EventType = "" }), "EventType is empty"},
		{"array payload", mod(func(e *outbox.Event) { e.Payload = []int{1} }), "not a JSON object"},
		{"broken JSON", mod(func(e *outbox.Event) { e.Payload = []byte(`{"a":`) }), "not valid JSON"},
		{"reserved header", mod(func(e *outbox.Event) { e.Headers = map[string]string{"event_type": "x"} }), `header "event_type"`},
		{"no schema", mod(func(e *outbox.Event) { e.EventType = "OrderShipped" }), `no schema for event type "OrderShipped"`},
		{"schema mismatch", mod(func(e *outbox.Event) {
			e.Payload = json.RawMessage(`{"order_id": "5d9e1d7a-6b1f-4c4e-9a57-1f0e0a3c2b11", "customer_id": "c-1", "status": "LOST", "amount_cents": 1999, "created_at": 1700000000000}`)
		}), `field "status"`},
	}
	tx, _ := conn.Begin(ctx)
	defer tx.Rollback(ctx)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := w.WriteBatch(ctx, tx, []outbox.Event{valid, c.ev})
			if !errors.Is(err, outbox.ErrInvalidEvent) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "event 1") {
				t.Fatalf("err = %v, want ErrInvalidEvent for event 1 mentioning %q", err, c.want)
			}
		})
	}
	// Nothing of the failed batches was written; the valid event alone is.
	if _, err := w.Write(ctx, tx, valid); err != nil {
		t.Fatalf("valid event: %v", err)
	}
	var n int
	tx.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n)
	if n != 1 {
		t.Errorf("table holds %d rows, want 1 (invalid batches write nothing)", n)
	}
}

func TestWritePropagator(t *testing.T) {
	ctx := context.Background()
	conn := connect(t)
	table := newTable(t, conn)
	type traceKey struct{}
	w, _ := outbox.New(outbox.Config{Table: table, Propagator: func(ctx context.Context, carrier map[string]string) {
		if tp, ok := ctx.Value(traceKey{}).(string); ok {
			carrier["traceparent"] = tp
			carrier["tracestate"] = "vendor=1"
		}
	}})
	tp := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tx, _ := conn.Begin(ctx)
	ev := order("o-1", 1)
	ev.Headers = map[string]string{"tracestate": "mine"}
	if _, err := w.Write(context.WithValue(ctx, traceKey{}, tp), tx, ev); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(ctx, tx, order("o-2", 2)); err != nil { // no trace in ctx
		t.Fatal(err)
	}
	tx.Commit(ctx)
	got := readTable(t, conn, table)
	if len(got) != 2 {
		t.Fatalf("%d rows", len(got))
	}
	if want := map[string]any{"traceparent": tp, "tracestate": "mine"}; !reflect.DeepEqual(got[0].Headers, want) {
		t.Errorf("headers = %v, want %v (the event's own header wins)", got[0].Headers, want)
	}
	if len(got[1].Headers) != 0 {
		t.Errorf("headers without a trace = %v, want {}", got[1].Headers)
	}
}

// TestWriteMessage reads the table-less form back from a pgoutput slot with
// messages 'true', as the relay does: only committed transactions' messages
// arrive, transactional, with the prefix and the exact JSON content.
// inbox's TestEndToEndTableless sends them through the relay itself.
func TestWriteMessage(t *testing.T) {
	ctx := context.Background()
	conn := connect(t)
	s := suffix()
	slot, pub := "slot_"+s, "pub_"+s
	if _, err := conn.Exec(ctx, "CREATE PUBLICATION "+pub); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", slot); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Exec(context.Background(), "SELECT pg_drop_replication_slot($1)", slot) })

	w, err := outbox.New(outbox.Config{Mode: outbox.ModeMessage})
	if err != nil {
		t.Fatal(err)
	}
	tx, _ := conn.Begin(ctx)
	ev := order("o-1", 1999)
	ev.Payload = json.RawMessage("{\"order_id\": \"o-1\",\n \"note\": \"<a&b>\"}")
	ev.Headers = map[string]string{"traceparent": "00-ab-cd-01"}
	id1, err := w.Write(ctx, tx, ev)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := w.WriteBatch(ctx, tx, []outbox.Event{order("o-2", 2), order("o-3", 3)})
	if err != nil {
		t.Fatal(err)
	}
	tx.Commit(ctx)
	tx, _ = conn.Begin(ctx)
	if _, err := w.Write(ctx, tx, order("o-rolled-back", 4)); err != nil {
		t.Fatal(err)
	}
	tx.Rollback(ctx)
	// database/sql writes the same.
	db, _ := sql.Open("pgx", dbURL)
	defer db.Close()
	stx, _ := db.BeginTx(ctx, nil)
	id4, err := w.WriteSQL(ctx, stx, order("o-4", 4))
	if err != nil {
		t.Fatal(err)
	}
	stx.Commit()

	rows, err := conn.Query(ctx, "SELECT data FROM pg_logical_slot_get_binary_changes($1, NULL, NULL, 'proto_version', '1', 'publication_names', $2, 'messages', 'true')", slot, pub)
	if err != nil {
		t.Fatal(err)
	}
	type msg struct {
		transactional bool
		prefix        string
		content       string
	}
	var got []msg
	for rows.Next() {
		var data []byte
		if err := rows.Scan(&data); err != nil {
			t.Fatal(err)
		}
		if len(data) == 0 || data[0] != 'M' {
			continue
		}
		// 'M', flags (1 = transactional), LSN (8), prefix\0, length (4), content.
		rest := data[10:]
		nul := strings.IndexByte(string(rest), 0)
		prefix := string(rest[:nul])
		rest = rest[nul+1:]
		n := binary.BigEndian.Uint32(rest[:4])
		got = append(got, msg{data[1] == 1, prefix, string(rest[4 : 4+n])})
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := []msg{
		{true, "outbox", `{"id":"` + id1 + `","aggregate_type":"Order","aggregate_id":"o-1","event_type":"OrderCreated","payload":{"order_id":"o-1","note":"<a&b>"},"headers":{"traceparent":"00-ab-cd-01"}}`},
		{true, "outbox", `{"id":"` + ids[0] + `","aggregate_type":"Order","aggregate_id":"o-2","event_type":"OrderCreated","payload":{"amount_cents":2,"order_id":"o-2"}}`},
		{true, "outbox", `{"id":"` + ids[1] + `","aggregate_type":"Order","aggregate_id":"o-3","event_type":"OrderCreated","payload":{"amount_cents":3,"order_id":"o-3"}}`},
		{true, "outbox", `{"id":"` + id4 + `","aggregate_type":"Order","aggregate_id":"o-4","event_type":"OrderCreated","payload":{"amount_cents":4,"order_id":"o-4"}}`},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("messages from the slot:\n%+v\nwant\n%+v", got, want)
	}
}

func TestNewRejects(t *testing.T) {
	for _, c := range []struct {
		cfg  outbox.Config
		want string
	}{
		{outbox.Config{Table: "a.b.c"}, "Config.Table"},
		{outbox.Config{Table: ".x"}, "Config.Table"},
		{outbox.Config{Mode: 7}, "Config.Mode"},
	} {
		if _, err := outbox.New(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v) = %v, want an error naming %s", c.cfg, err, c.want)
		}
	}
}
