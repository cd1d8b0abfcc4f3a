package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/outbox"
)

// TestWriteRefusesPool: a *pgxpool.Pool, a *pgx.Conn or a *sql.DB passed
// where Write wants the business transaction does not compile (each would
// commit the event on its own), while a pgx.Tx and a *sql.Tx do. The
// programs are built with the go command against this module, through an
// overlay, so nothing is written into the tree. A nil transaction, the one
// thing the compiler lets through, is refused at run time against the real
// PostgreSQL with ErrNotTx, and nothing is written.
func TestWriteRefusesPool(t *testing.T) {
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	build := func(t *testing.T, body string) (string, error) {
		t.Helper()
		src := `package main

import (
	"context"
	"database/sql"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cdc-relay/cdc-relay/outbox"
)

var (
	_ *pgxpool.Pool
	_ *pgx.Conn
	_ *sql.DB
)

func main() {
	ctx := context.Background()
	ev := outbox.Event{AggregateType: "Order", AggregateID: "o-1", EventType: "OrderCreated", Payload: []byte("{}")}
	_ = ev
	_ = ctx
	` + body + `
}
`
		dir := t.TempDir()
		file := filepath.Join(dir, "main.go")
		if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(root, "outbox", "testdata", "notx", "main.go")
		overlay, _ := json.Marshal(map[string]any{"Replace": map[string]string{target: file}})
		ov := filepath.Join(dir, "overlay.json")
		if err := os.WriteFile(ov, overlay, 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(goBin, "build", "-overlay", ov, "-o", os.DevNull, "./outbox/testdata/notx")
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for _, c := range []struct {
		name, body, want string
	}{
		{"pool", `var pool *pgxpool.Pool; outbox.Write(ctx, pool, ev)`, "*pgxpool.Pool does not implement pgx.Tx"},
		{"pool batch", `var pool *pgxpool.Pool; outbox.WriteBatch(ctx, pool, []outbox.Event{ev})`, "*pgxpool.Pool does not implement pgx.Tx"},
		{"conn", `var conn *pgx.Conn; outbox.Write(ctx, conn, ev)`, "*pgx.Conn does not implement pgx.Tx"},
		{"sql.DB", `var db *sql.DB; outbox.WriteSQL(ctx, db, ev)`, "cannot use db (variable of type *sql.DB) as *sql.Tx value"},
		{"writer pool", `w, _ := outbox.New(outbox.Config{}); var pool *pgxpool.Pool; w.Write(ctx, pool, ev)`, "*pgxpool.Pool does not implement pgx.Tx"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := build(t, c.body)
			if err == nil {
				t.Fatalf("%s compiled; it must not", c.body)
			}
			if !strings.Contains(out, c.want) {
				t.Fatalf("go build: %v\n%s\nwant an error containing %q", err, out, c.want)
			}
		})
	}
	t.Run("transactions compile", func(t *testing.T) {
		out, err := build(t, `var tx pgx.Tx; var stx *sql.Tx; w, _ := outbox.New(outbox.Config{})
	outbox.Write(ctx, tx, ev); outbox.WriteSQL(ctx, stx, ev); w.WriteBatch(ctx, tx, nil); w.WriteBatchSQL(ctx, stx, nil)`)
		if err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	})
	t.Run("nil", func(t *testing.T) {
		ctx := context.Background()
		conn := connect(t)
		table := newTable(t, conn)
		w, err := outbox.New(outbox.Config{Table: "public." + table})
		if err != nil {
			t.Fatal(err)
		}
		var tx pgx.Tx
		if _, err := w.Write(ctx, tx, order("o-1", 1)); !errors.Is(err, outbox.ErrNotTx) {
			t.Errorf("Write with a nil pgx.Tx: err = %v, want ErrNotTx", err)
		}
		if _, err := w.WriteSQL(ctx, nil, order("o-1", 1)); !errors.Is(err, outbox.ErrNotTx) {
			t.Errorf("WriteSQL with a nil *sql.Tx: err = %v, want ErrNotTx", err)
		}
		if got := readTable(t, conn, table); len(got) != 0 {
			t.Errorf("the table holds %d rows after refused writes", len(got))
		}
	})
}
