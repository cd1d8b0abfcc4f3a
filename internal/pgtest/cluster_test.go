package pgtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestStartLogical(t *testing.T) {
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
