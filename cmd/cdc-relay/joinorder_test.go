package main

// docs/OPERATIONS.md's two ways to add a second outbox table, each with a
// writer inserting into it throughout, followed as the relay says: 0 lost.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestSecondTableBothOrders: the second table configured first (the relay
// adds it to the publication at the restart), and added to the publication
// first, by hand, while the relay runs without it. Its rows from before it
// joined come back through the replay the relay's WARN prints, run as
// printed; its rows while the publication published it and --table did not
// (dead letters, unconfigured_table) through dlq redrive. Every row the
// writer committed reaches Kafka as an event.
func TestSecondTableBothOrders(t *testing.T) {
	t.Parallel()
	for _, order := range []string{"config first", "publication first"} {
		t.Run(order, func(t *testing.T) {
			f := newFixture(t, "")
			t.Cleanup(func() { f.exec("DROP PUBLICATION IF EXISTS " + f.publication) })
			second := secondTable(t, f, "second")
			sf := *f
			sf.table = strings.TrimPrefix(second, "public.")
			conn := f.connect()
			c := consume(t, "^"+f.topicPrefix+`\..*`)
			r := startRelay(t, f.args())
			r.waitStreaming(60 * time.Second)
			w := startWriter(t, &sf, 5*time.Millisecond)
			waitFor(t, 60*time.Second, "40 rows before the table joins", func() bool { return w.count() >= 40 })
			if order == "publication first" {
				f.exec(fmt.Sprintf("ALTER PUBLICATION %s ADD TABLE %s", f.publication, second))
				n := w.count()
				waitFor(t, 60*time.Second, "80 rows while only the publication names the table", func() bool { return w.count() >= n+80 })
			}
			// The heuristic reads pg_stat_user_tables, which a backend
			// updates up to a second or so after its commits.
			waitFor(t, 30*time.Second, "the inserts in pg_stat_user_tables", func() bool {
				var n int64
				conn.QueryRow(context.Background(), "SELECT coalesce((SELECT n_tup_ins FROM pg_stat_user_tables WHERE relid = to_regclass($1)), 0)", second).Scan(&n)
				return n > 0
			})
			if order == "publication first" && !strings.Contains(r.Output(), "dlq redrive") {
				t.Errorf("the WARN for the unconfigured table does not name dlq redrive:\n%s", tailString(r.Output(), 3000))
			}
			if code := r.terminate(); code != 0 {
				t.Fatalf("exit %d:\n%s", code, tailString(r.Output(), 3000))
			}

			args := f.args("--table", second)
			r = startRelay(t, args)
			r.waitStreaming(60 * time.Second)
			n := w.count()
			waitFor(t, 60*time.Second, "rows after the table joined", func() bool { return w.count() >= n+40 })
			ids := w.finish(t)
			var m []string
			waitFor(t, 30*time.Second, "the WARN with the replay command", func() bool {
				m = untilRE.FindStringSubmatch(r.Output())
				return m != nil
			})
			if !strings.Contains(m[1], "--table "+second) {
				t.Fatalf("the replay command %q does not name %s", m[0], second)
			}
			replay := append(append([]string{"replay"}, withTables(args[1:])...), strings.Fields(strings.TrimPrefix(m[0], "cdc-relay replay"))...)
			if code, _, _ := runReplay(t, nil, replay); code != 0 {
				t.Fatalf("the replay as printed exited %d", code)
			}
			if order == "publication first" {
				redrive := withTables(f.dlqArgs("redrive", "", "--kind", "unconfigured_table"), "public."+f.table, second)
				if code, _, _ := runReplay(t, nil, redrive); code != 0 {
					t.Fatalf("dlq redrive exited %d", code)
				}
			}
			recs := c.waitIDs(180*time.Second, ids)
			for _, rec := range recs {
				if rec.Topic == f.dlq {
					continue
				}
				if rec.Topic != f.topic("Order") || rec.Headers["id"] == "" {
					t.Fatalf("a record of the second table on %s with headers %v", rec.Topic, rec.Headers)
				}
			}
			if code := r.terminate(); code != 0 {
				t.Fatalf("exit %d", code)
			}
		})
	}
}
