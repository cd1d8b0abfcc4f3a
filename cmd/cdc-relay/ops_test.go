package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/internal/pgtest"
	"github.com/cdc-relay/cdc-relay/internal/relaytest"
	"github.com/cdc-relay/cdc-relay/internal/testtier"
	slotpkg "github.com/cdc-relay/cdc-relay/slot"
)

// commandArgs turns a fixture's run flags into another subcommand's.
func commandArgs(cmd string, args []string) []string {
	out := append([]string{cmd}, args[1:]...)
	return append(out, "--metrics-addr", "127.0.0.1:0")
}

func runCommand(args []string) (int, string) {
	var out bytes.Buffer
	code := run(args, env(nil), &out, &out)
	return code, out.String()
}

func TestCheckPasses(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	code, out := runCommand(commandArgs("check", f.args()))
	if code != 0 || !strings.Contains(out, "all checks passed") {
		t.Fatalf("check = %d:\n%s", code, out)
	}
	for _, want := range []string{"ok    wal_level = logical", "REPLICATION attribute", "has the required columns", "broker(s) reachable", "schema registry", "compile"} {
		if !strings.Contains(out, want) {
			t.Errorf("check output lacks %q:\n%s", want, out)
		}
	}
}

// TestCheckWarnsAllTables: Debezium's default publication is FOR ALL TABLES;
// check fails with it unless --allow-extra-tables is set, then passes but
// warns, and the relay streams through it.
func TestCheckWarnsAllTables(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	f.exec("CREATE PUBLICATION " + f.publication + " FOR ALL TABLES")
	t.Cleanup(func() { f.exec("DROP PUBLICATION IF EXISTS " + f.publication) })
	code, out := runCommand(commandArgs("check", f.args()))
	if code == 0 || !strings.Contains(out, "FOR ALL TABLES") || !strings.Contains(out, "--allow-extra-tables") {
		t.Fatalf("check = %d, want a failure naming --allow-extra-tables:\n%s", code, out)
	}
	code, out = runCommand(commandArgs("check", f.args("--allow-extra-tables")))
	if code != 0 || !strings.Contains(out, "WARN  publication "+f.publication+" is FOR ALL TABLES") {
		t.Fatalf("check = %d, want 0 and a FOR ALL TABLES warning:\n%s", code, out)
	}
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	r := startRelay(t, f.args("--allow-extra-tables"))
	r.waitStreaming(60 * time.Second)
	conn := connect(t)
	f.exec("CREATE TABLE IF NOT EXISTS other_" + f.name + " (x int)")
	f.exec("INSERT INTO other_" + f.name + " VALUES (1)")
	agg := uuidFor(920)
	ids, err := f.insertTx(context.Background(), conn, []event{{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	if recs := c.waitIDs(60*time.Second, ids); len(recs) != 1 || recs[0].Topic != f.topic("Order") {
		t.Fatalf("records %+v", recs)
	}
}

func TestCheckFailures(t *testing.T) {
	t.Parallel()
	testtier.Need(t)
	replica, err := pgtest.Start(pgtest.Options{Settings: map[string]string{"wal_level": "replica"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { replica.Close() })

	tests := []struct {
		name  string
		setup func(f *fixture) []string // returns the check args
		want  string
	}{
		{"wal_level replica", func(f *fixture) []string {
			args := f.args()
			setFlag(args, "--pg-url", replica.URL(""))
			return args
		}, "wal_level is \"replica\""},
		{"no REPLICATION attribute", func(f *fixture) []string {
			role := "norepl_" + f.name
			f.exec(fmt.Sprintf("CREATE ROLE %s LOGIN", role))
			args := f.args()
			setFlag(args, "--pg-url", strings.Replace(dbURL, "postgres://postgres@", "postgres://"+role+"@", 1))
			return args
		}, "lacks the REPLICATION attribute"},
		{"slot with another plugin", func(f *fixture) []string {
			f.exec("SELECT pg_create_logical_replication_slot($1, 'test_decoding')", f.slot)
			return f.args()
		}, "uses plugin \"test_decoding\": it can't be reused"},
		{"missing column", func(f *fixture) []string {
			f.exec(fmt.Sprintf("ALTER TABLE %s DROP COLUMN event_type", f.table))
			return f.args()
		}, "lacks column(s) event_type"},
		{"unreachable broker", func(f *fixture) []string {
			args := f.args()
			setFlag(args, "--kafka-brokers", "127.0.0.1:1")
			return args
		}, "unreachable"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, "")
			code, out := runCommand(commandArgs("check", tc.setup(f)))
			if code != exitFailed {
				t.Fatalf("check = %d, want %d:\n%s", code, exitFailed, out)
			}
			found := false
			for _, line := range strings.Split(out, "\n") {
				if strings.HasPrefix(line, "FAIL") && strings.Contains(line, tc.want) {
					found = true
				}
			}
			if !found {
				t.Fatalf("no FAIL line with %q:\n%s", tc.want, out)
			}
		})
	}
}

func setFlag(args []string, name, value string) {
	for i := range args {
		if args[i] == name {
			args[i+1] = value
			return
		}
	}
	panic("no flag " + name)
}

func TestStatus(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	r := startRelay(t, f.args())
	r.waitStreaming(60 * time.Second)
	code, out := runCommand([]string{"status", "--pg-url", dbURL, "--slot", f.slot, "--json"})
	if code != 0 {
		t.Fatalf("status = %d:\n%s", code, out)
	}
	var st slotpkg.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status --json is not JSON: %v\n%s", err, out)
	}
	if st.Slot != f.slot || st.Plugin != "pgoutput" || !st.Active || st.ActivePID == nil || st.ConfirmedFlushLSN == "" || st.WALStatus == "" {
		t.Fatalf("status = %+v", st)
	}
	code, out = runCommand([]string{"status", "--pg-url", dbURL, "--slot", f.slot})
	if code != 0 || !strings.Contains(out, "confirmed_flush_lsn") || !strings.Contains(out, "lag ") {
		t.Fatalf("status text = %d:\n%s", code, out)
	}
	if code, out := runCommand([]string{"status", "--pg-url", dbURL, "--slot", "no_such_slot"}); code != exitFailed || !strings.Contains(out, "no_such_slot") {
		t.Fatalf("status of a missing slot = %d:\n%s", code, out)
	}
}

// TestLeastPrivilegeRole: a role with only LOGIN and REPLICATION, no
// privilege on the outbox table, streams once an admin made the publication.
func TestLeastPrivilegeRole(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	role := "relay_" + f.name
	f.exec(fmt.Sprintf("CREATE ROLE %s LOGIN REPLICATION", role))
	f.exec(fmt.Sprintf("REVOKE ALL ON public.%s FROM PUBLIC", f.table))
	f.exec(fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE public.%s WITH (publish = 'insert', publish_via_partition_root = true)", f.publication, f.table))
	args := f.args()
	setFlag(args, "--pg-url", strings.Replace(dbURL, "postgres://postgres@", "postgres://"+role+"@", 1))
	// The role really cannot read the table.
	conn := connectAs(t, strings.Replace(dbURL, "postgres://postgres@", "postgres://"+role+"@", 1))
	if _, err := conn.Exec(context.Background(), fmt.Sprintf("SELECT 1 FROM public.%s LIMIT 1", f.table)); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("the test role can read the outbox table: %v", err)
	}
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	r := startRelay(t, args)
	r.waitStreaming(60 * time.Second)
	agg := uuidFor(4)
	ids, err := f.insertTx(context.Background(), connect(t), []event{{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	c.waitIDs(60*time.Second, ids)
	if code, out := runCommand(commandArgs("check", args)); code != 0 {
		t.Fatalf("check as the least-privilege role = %d:\n%s", code, out)
	}
}

func connectAs(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// TestSchemasCheck: the CI gate passes compatible schemas, fails an
// incompatible one with the subject and the reason, and registers nothing.
// Against each registry.
func TestSchemasCheck(t *testing.T) { t.Parallel(); eachRegistry(t, testSchemasCheck) }

func testSchemasCheck(t *testing.T, reg relaytest.SchemaRegistry) {
	f := newFixtureFor(t, reg, "")
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	r := startRelay(t, f.args())
	r.waitStreaming(60 * time.Second)
	agg := uuidFor(8)
	ids, err := f.insertTx(context.Background(), connect(t), []event{{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	c.waitIDs(60*time.Second, ids)
	r.terminate()
	subject := f.topic("Order") + "-com.example.orders.OrderCreated"
	defaultBackward(t, reg, subject)
	base := []string{"schemas", "check", "--schema-registry-url", reg.URL(), "--topic-template", f.topicPrefix + ".{aggregate_type}"}

	code, out := runCommand(append(base, "--schemas-dir", schemaDir, "--aggregate-types", "Invoice"))
	if code != 0 || !strings.Contains(out, "ok    "+subject+": OrderCreated is compatible under BACKWARD") || !strings.Contains(out, f.topic("Invoice")+"-com.example.orders.OrderCreated: OrderCreated is a new subject") {
		t.Fatalf("schemas check = %d:\n%s", code, out)
	}
	dir := incompatibleSchemaDir(t)
	code, out = runCommand(append(base, "--schemas-dir", dir))
	if code != exitFailed || !strings.Contains(out, "FAIL  "+subject) || !strings.Contains(out, "BACKWARD") {
		t.Fatalf("schemas check of an incompatible schema = %d:\n%s", code, out)
	}
	if n := len(reg.Versions(t, subject)); n != 1 {
		t.Fatalf("schemas check registered something: %s has %d versions", subject, n)
	}
	// `check` reports it too.
	args := f.args()
	setFlag(args, "--schemas-dir", dir)
	if code, out := runCommand(commandArgs("check", args)); code != exitFailed || !strings.Contains(out, "incompatible with subject "+subject) {
		t.Fatalf("check with an incompatible schema = %d:\n%s", code, out)
	}
}

// incompatibleSchemaDir copies the test schemas with a required field added
// to OrderCreated, which BACKWARD rejects.
func incompatibleSchemaDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"OrderCreated.avsc", "OrderCancelled.avsc"} {
		b, err := os.ReadFile(filepath.Join(schemaDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if name == "OrderCreated.avsc" {
			b = bytes.Replace(b, []byte(`"fields": [`), []byte(`"fields": [{"name": "warehouse", "type": "string"},`), 1)
		}
		os.WriteFile(filepath.Join(dir, name), b, 0o644)
	}
	return dir
}
