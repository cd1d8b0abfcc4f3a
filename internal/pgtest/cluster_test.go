package pgtest

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/internal/testtier"
)

func TestStartLogical(t *testing.T) {
	testtier.Need(t)
	c, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	url, err := c.CreateDatabase(ctx, "pgtest_db")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var got string
	if err := conn.QueryRow(ctx, "SHOW wal_level").Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != "logical" {
		t.Fatalf("wal_level = %q, want logical", got)
	}
	conn.Close(ctx)
	if err := c.Restart("immediate"); err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(ctx, "pgtest_db", "SELECT 1"); err != nil {
		t.Fatalf("after restart: %v", err)
	}
}

// TestVersions: every supported major starts and reports its version.
func TestVersions(t *testing.T) {
	testtier.Need(t)
	for _, v := range Versions {
		t.Run(strconv.Itoa(v), func(t *testing.T) {
			c, err := Start(Options{Version: v})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			conn, err := pgx.Connect(context.Background(), c.URL(""))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(context.Background())
			var n int
			if err := conn.QueryRow(context.Background(), "SELECT current_setting('server_version_num')::int / 10000").Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != v || c.Version() != v {
				t.Fatalf("server major %d, Version() %d, want %d", n, c.Version(), v)
			}
		})
	}
}

// TestStandby: a standby of a 17 primary replays its writes and can be
// promoted.
func TestStandby(t *testing.T) {
	testtier.Need(t)
	p, err := Start(Options{Version: 17})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	sb, err := StartStandby(p, "sb1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	ctx := context.Background()
	if err := p.Exec(ctx, "", "CREATE TABLE t (x int); INSERT INTO t VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, sb.URL(""))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	err = WaitFor(ctx, 30*time.Second, func() (bool, error) {
		var n int
		err := conn.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n)
		return n == 1, err
	})
	if err != nil {
		t.Fatalf("standby never saw the row: %v", err)
	}
	if err := p.Stop("immediate"); err != nil {
		t.Fatal(err)
	}
	if err := sb.Promote(); err != nil {
		t.Fatal(err)
	}
	var recovery bool
	if err := conn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&recovery); err != nil || recovery {
		t.Fatalf("after promotion: in recovery %v, err %v", recovery, err)
	}
}
