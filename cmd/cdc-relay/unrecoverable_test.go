package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cdc-relay/cdc-relay/internal/pgtest"
	"github.com/cdc-relay/cdc-relay/internal/testtier"
)

// unrecoverableExit is how long a relay may take to exit on an error no
// retry fixes: the schema preflight and one connection, on a loaded host.
// --halt-linger is set far longer, so a relay that lingered, or retried,
// fails the wait.
const unrecoverableExit = 90 * time.Second

// privateTarget starts a cluster of the test's own with opts, and creates
// the fixture's outbox table in a database of its own there.
func privateTarget(t *testing.T, opts pgtest.Options) (*pgtest.Cluster, string) {
	t.Helper()
	testtier.Need(t)
	c, err := pgtest.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.CreateDatabase(context.Background(), "app"); err != nil {
		t.Fatal(err)
	}
	return c, "app"
}

// urlFor is a URL for role (with password, "" for none) on database db of
// cluster c. It sets no sslmode: the default, prefer, tries TLS first, which
// the test servers refuse, as many servers do.
func urlFor(c *pgtest.Cluster, role, password, db string) string {
	userinfo := role
	if password != "" {
		userinfo += ":" + password
	}
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s", userinfo, c.Port(), db)
}

// errorLines are the relay's level=ERROR log lines.
func errorLines(out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "level=ERROR") {
			lines = append(lines, l)
		}
	}
	return lines
}

// exitsAtOnce runs the relay with args and checks that it exits 1 within
// unrecoverableExit with one ERROR line that contains every want, without
// a retry and without the password.
func exitsAtOnce(t *testing.T, args []string, password string, want ...string) string {
	t.Helper()
	r := startRelay(t, append(args, "--halt-linger", "1h"))
	if code := r.wait(unrecoverableExit); code != exitFailed {
		t.Fatalf("exit code %d, want %d:\n%s", code, exitFailed, tailString(r.Output(), 4000))
	}
	out := r.Output()
	lines := errorLines(out)
	if len(lines) != 1 {
		t.Fatalf("%d ERROR lines, want 1:\n%s", len(lines), out)
	}
	for _, w := range want {
		if !strings.Contains(lines[0], w) {
			t.Errorf("ERROR line lacks %q:\n%s", w, lines[0])
		}
	}
	if strings.Contains(out, "msg=reconnect") {
		t.Errorf("the relay retried:\n%s", out)
	}
	if strings.Contains(lines[0], "tls error") {
		t.Errorf("ERROR line names the TLS fallback, not the cause:\n%s", lines[0])
	}
	if password != "" && strings.Contains(out, password) {
		t.Errorf("the output contains the password %q:\n%s", password, out)
	}
	return lines[0]
}

// assertNothingCreated checks that the relay created neither the
// publication nor the slot on database db of c.
func assertNothingCreated(t *testing.T, c *pgtest.Cluster, db string, f *fixture) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := c.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var pubs, slots int
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_catalog.pg_publication WHERE pubname = $1),
		(SELECT count(*) FROM pg_catalog.pg_replication_slots WHERE slot_name = $2)`, f.publication, f.slot).Scan(&pubs, &slots); err != nil {
		t.Fatal(err)
	}
	if pubs != 0 || slots != 0 {
		t.Errorf("the relay created %d publication(s) %s and %d slot(s) %s; want none", pubs, f.publication, slots, f.slot)
	}
}

// TestWALLevelReplicaExitsBeforeCreatingAnything: on a server with
// wal_level = replica the relay exits 1 at once, naming wal_level and the
// fix, and has created neither the publication nor the slot.
func TestWALLevelReplicaExitsBeforeCreatingAnything(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	c, db := privateTarget(t, pgtest.Options{Settings: map[string]string{"wal_level": "replica"}})
	if err := c.Exec(context.Background(), db, fmt.Sprintf(outboxDDL, "public."+f.table)); err != nil {
		t.Fatal(err)
	}
	args := f.args()
	setFlag(args, "--pg-url", c.URL(db))
	line := exitsAtOnce(t, args, "", `wal_level is \"replica\"`, "logical decoding needs wal_level = logical", "ALTER SYSTEM SET wal_level = logical", "restart PostgreSQL")
	t.Log(line)
	assertNothingCreated(t, c, db, f)

	// check says the same.
	code, out := runCommand(commandArgs("check", args))
	if code != exitFailed || !strings.Contains(out, `FAIL  PostgreSQL: wal_level is "replica": logical decoding needs wal_level = logical`) {
		t.Fatalf("check = %d:\n%s", code, out)
	}
}

// authCluster is a cluster of the test's own where role relay_pw needs its
// password (scram-sha-256) and every other role is trusted.
func authCluster(t *testing.T, f *fixture) (*pgtest.Cluster, string) {
	t.Helper()
	ctx := context.Background()
	c, db := privateTarget(t, pgtest.Options{})
	for _, sql := range []string{
		fmt.Sprintf(outboxDDL, "public."+f.table),
		"SET password_encryption = 'scram-sha-256'; CREATE ROLE relay_pw LOGIN REPLICATION PASSWORD 'right-secret-4711'",
	} {
		if err := c.Exec(ctx, db, sql); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.SetHBA(ctx,
		"local all all trust",
		"host all postgres 127.0.0.1/32 trust",
		"host all relay_pw 127.0.0.1/32 scram-sha-256",
		"host all all 127.0.0.1/32 trust",
	); err != nil {
		t.Fatal(err)
	}
	// The reload is asynchronous: wait until the server asks for the password.
	waitFor(t, 30*time.Second, "pg_hba.conf reloaded", func() bool {
		conn, err := pgx.Connect(ctx, urlFor(c, "relay_pw", "wrong", db)+"?sslmode=disable")
		if err == nil {
			conn.Close(ctx)
			return false
		}
		var pgErr *pgconn.PgError
		return errors.As(err, &pgErr) && pgErr.Code == "28P01"
	})
	return c, db
}

// TestUnrecoverableConnectErrorsExitAtOnce: a wrong password, a missing
// database or role and missing privileges end the relay at once (exit 1,
// one ERROR line with the cause and the fix), not a retry loop.
func TestUnrecoverableConnectErrorsExitAtOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	c, db := authCluster(t, f)
	withURL := func(url string) []string {
		args := f.args()
		setFlag(args, "--pg-url", url)
		return args
	}

	t.Run("wrong password", func(t *testing.T) {
		args := withURL(urlFor(c, "relay_pw", "wrong-secret-0815", db))
		line := exitsAtOnce(t, args, "wrong-secret-0815", "28P01", `password authentication failed for user \"relay_pw\"`, "check the password in --pg-url")
		t.Log(line)
		assertNothingCreated(t, c, db, f)
		code, out := runCommand(commandArgs("check", args))
		if code != exitFailed || !strings.Contains(out, "FAIL  PostgreSQL: ") || !strings.Contains(out, "28P01") ||
			!strings.Contains(out, "check the password in --pg-url") || strings.Contains(out, "wrong-secret-0815") {
			t.Fatalf("check = %d:\n%s", code, out)
		}
	})
	t.Run("missing database", func(t *testing.T) {
		line := exitsAtOnce(t, withURL(urlFor(c, "relay_pw", "right-secret-4711", "nosuchdb")), "right-secret-4711",
			"3D000", `database \"nosuchdb\" does not exist`, "create the database")
		t.Log(line)
	})
	t.Run("missing role", func(t *testing.T) {
		line := exitsAtOnce(t, withURL(urlFor(c, "nosuchrole", "", db)), "", "28000", `role \"nosuchrole\" does not exist`, "--pg-url")
		t.Log(line)
	})
	t.Run("no CREATE on the database", func(t *testing.T) {
		if err := c.Exec(context.Background(), db, "CREATE ROLE notowner LOGIN REPLICATION"); err != nil {
			t.Fatal(err)
		}
		line := exitsAtOnce(t, withURL(urlFor(c, "notowner", "", db)), "", "42501", "permission denied for database app", "GRANT CREATE ON DATABASE app TO notowner")
		t.Log(line)
		assertNothingCreated(t, c, db, f)
	})
	t.Run("not the table's owner", func(t *testing.T) {
		if err := c.Exec(context.Background(), db, "GRANT CREATE ON DATABASE app TO notowner"); err != nil {
			t.Fatal(err)
		}
		line := exitsAtOnce(t, withURL(urlFor(c, "notowner", "", db)), "", "42501", "must be owner of table", "CREATE PUBLICATION")
		t.Log(line)
		assertNothingCreated(t, c, db, f)
	})
	t.Run("no REPLICATION attribute", func(t *testing.T) {
		ctx := context.Background()
		if err := c.Exec(ctx, db, "CREATE ROLE norepl LOGIN"); err != nil {
			t.Fatal(err)
		}
		// An admin created the publication: the role needs to own nothing.
		if err := c.Exec(ctx, db, fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE public.%s WITH (publish = 'insert')", f.publication, f.table)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Exec(ctx, db, "DROP PUBLICATION "+f.publication) })
		line := exitsAtOnce(t, withURL(urlFor(c, "norepl", "", db)), "", "42501", "ALTER ROLE norepl WITH REPLICATION")
		t.Log(line)
	})
}

// TestRetriedErrorLoggedOnceRootCauseFirst: an error a retry may fix (here
// the role's connection limit) is retried with backoff and logged once,
// beginning with the server's answer rather than the refused TLS attempt
// before it; once the cause is gone the relay streams.
func TestRetriedErrorLoggedOnceRootCauseFirst(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	c, db := privateTarget(t, pgtest.Options{})
	ctx := context.Background()
	for _, sql := range []string{
		fmt.Sprintf(outboxDDL, "public."+f.table),
		"CREATE ROLE limited LOGIN REPLICATION CONNECTION LIMIT 0",
		fmt.Sprintf("ALTER TABLE public.%s OWNER TO limited", f.table),
		"GRANT CREATE ON DATABASE app TO limited",
	} {
		if err := c.Exec(ctx, db, sql); err != nil {
			t.Fatal(err)
		}
	}
	args := f.args()
	setFlag(args, "--pg-url", urlFor(c, "limited", "", db))
	r := startRelay(t, args)
	waitFor(t, 90*time.Second, "five failed attempts", func() bool {
		n, err := r.metric("cdc_relay_reconnects_total")
		return err == nil && n >= 5
	})
	var warns []string
	for _, l := range strings.Split(r.Output(), "\n") {
		if strings.Contains(l, "msg=reconnect") && strings.Contains(l, "level=WARN") {
			warns = append(warns, l)
		}
	}
	if len(warns) != 1 {
		t.Fatalf("%d reconnect warnings for one repeated error, want 1:\n%s", len(warns), r.Output())
	}
	msg := warns[0][strings.Index(warns[0], `err=`):]
	if i := strings.Index(msg, "tls error"); i >= 0 {
		msg = msg[:i]
	}
	if !strings.HasPrefix(msg, `err="connect: 127.0.0.1:`) || !strings.Contains(msg, "too many connections for role") {
		t.Fatalf("the warning does not begin with the server's answer:\n%s", warns[0])
	}
	if err := c.Exec(ctx, db, "ALTER ROLE limited CONNECTION LIMIT -1"); err != nil {
		t.Fatal(err)
	}
	r.waitStreaming(90 * time.Second)
	if errs := errorLines(r.Output()); len(errs) != 0 {
		t.Fatalf("ERROR lines for a retried error:\n%s", strings.Join(errs, "\n"))
	}
}

// TestOtherPluginSlotNamesSafeProcedure: a slot of another plugin (a
// Debezium decoderbufs slot, here test_decoding) halts the relay with the
// procedure of docs/MIGRATING.md section B, which keeps every event: a new
// slot created before the old reader stops, never "drop it" first. check
// gives the same fix.
func TestOtherPluginSlotNamesSafeProcedure(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	f.exec("SELECT pg_create_logical_replication_slot($1, 'test_decoding')", f.slot)
	r := startRelay(t, f.args("--halt-linger", "0s"))
	if code := r.wait(unrecoverableExit); code != exitFailed {
		t.Fatalf("exit code %d, want %d:\n%s", code, exitFailed, tailString(r.Output(), 4000))
	}
	want := "set --slot to a new name so the relay creates its own pgoutput slot, and do it BEFORE the old reader stops; " +
		"wait until the old slot's confirmed_flush_lsn has passed the new slot's start"
	out := r.Output()
	if !strings.Contains(out, `uses plugin \"test_decoding\"`) || !strings.Contains(out, want) || !strings.Contains(out, "docs/MIGRATING.md, section B") {
		t.Fatalf("the halt does not give the safe procedure:\n%s", out)
	}
	if strings.Contains(out, "choose another --slot") || strings.Contains(out, "drop it (") {
		t.Fatalf("the halt still suggests dropping the slot first:\n%s", out)
	}
	code, checkOut := runCommand(commandArgs("check", f.args()))
	if code != exitFailed || !strings.Contains(checkOut, want) {
		t.Fatalf("check = %d, its fix differs:\n%s", code, checkOut)
	}
}
