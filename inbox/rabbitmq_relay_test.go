package inbox

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/internal/freeport"
	"github.com/cdc-relay/cdc-relay/outbox"
)

// TestRabbitMQFromRelay: events written with the outbox package go
// through the real relay to RabbitMQ (JSON values; CloudEvents in binary
// mode, cloudEvents_* headers; in structured mode, the envelope as the
// value) and into a RabbitMQ consumer. The relay is killed with -9 once
// while events flow, so part of them come twice. Each event is applied
// exactly once, under the id Write returned, with its type and aggregate,
// in order per aggregate.
func TestRabbitMQFromRelay(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		flags []string
	}{
		{"json", nil},
		{"cloudevents-binary", []string{"--cloudevents", "--cloudevents-source", "/shop/orders"}},
		{"cloudevents-structured", []string{"--cloudevents", "--cloudevents-source", "/shop/orders", "--cloudevents-mode", "structured"}},
	} {
		t.Run(tc.name, func(t *testing.T) { rabbitFromRelay(t, tc.flags) })
	}
}

func rabbitFromRelay(t *testing.T, flags []string) {
	node, url := rabbitSetup(t)
	execDoc(t, url, "outbox.sql")
	s := suffix()
	ex := "x" + s
	cfg := rabbitConfig(t, node.URL(), url, ex)
	cfg.RoutingKeys = []string{"#"}
	var mu sync.Mutex
	seen := map[string]*Event[orderEvent]{}
	apply := cfg.Handler
	cfg.Handler = func(ctx context.Context, tx pgx.Tx, ev *Event[orderEvent]) error {
		mu.Lock()
		seen[ev.ID] = ev
		mu.Unlock()
		return apply(ctx, tx, ev)
	}
	c, _ := runRabbit(t, cfg)
	waitConsuming(t, node, cfg.Consumer)

	port, _ := freeport.Get()
	argv := append([]string{"run", "--pg-url", url, "--slot", "slot_" + s, "--publication", "pub_" + s, "--table", "public.outbox",
		"--rabbitmq-url", node.URL(), "--rabbitmq-exchange", ex, "--rabbitmq-dlq-stream", ex + ".dlq",
		"--rabbitmq-checkpoint-stream", ex + ".checkpoints", "--value-format", "json",
		"--metrics-addr", "127.0.0.1:" + strconv.Itoa(port), "--halt-linger", "0s"}, flags...)
	relay := startRelay(t, url, s, argv)

	pool := newPool(t, url)
	const aggs, txs = 5, 40
	type written struct {
		id, agg string
		n       int
	}
	var all []written
	write := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			tx, err := pool.Begin(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for a := range aggs {
				agg := fmt.Sprintf("agg-%d", a)
				id, err := outbox.Write(context.Background(), tx, outbox.Event{AggregateType: "Order", AggregateID: agg,
					EventType: "OrderCreated", Payload: orderEvent{OrderID: agg, N: i}})
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, written{id, agg, i})
			}
			if err := tx.Commit(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(0, txs/2)
	t.Cleanup(func() {
		if t.Failed() {
			conf, _ := queryInt(url, "SELECT (confirmed_flush_lsn - '0/0')::bigint FROM pg_replication_slots WHERE slot_name = $1", "slot_"+s)
			wal, _ := queryInt(url, "SELECT (pg_current_wal_lsn() - '0/0')::bigint")
			rows, _ := queryInt(url, "SELECT count(*) FROM outbox")
			eff, _ := queryInt(url, "SELECT count(*) FROM effects")
			t.Logf("the slot confirmed %X, the WAL ends at %X; %d outbox rows, %d effects; the consumer's stats %+v", conf, wal, rows, eff, c.Stats())
			relay.MetricsAddr = "127.0.0.1:" + strconv.Itoa(port)
			for _, m := range []string{"cdc_relay_events_read_total", "cdc_relay_events_published_total", "cdc_relay_confirmed_lsn"} {
				v, err := relay.Metric(m)
				t.Logf("the relay's %s: %v (%v)", m, v, err)
			}
		}
	})
	waitFor(t, 60*time.Second, "events applied before the kill", func() bool { return c.Stats().Processed >= 20 })
	relay.Kill()
	write(txs/2, txs)
	startRelay(t, url, s, argv)

	waitFor(t, 120*time.Second, fmt.Sprintf("all %d events applied", len(all)), func() bool {
		n, err := queryInt(url, "SELECT count(*) FROM effects WHERE consumer = $1", cfg.Consumer)
		return err == nil && n >= int64(len(all))
	})
	if n := mustInt(t, url, "SELECT count(*) FROM effects WHERE consumer = $1", cfg.Consumer); n != int64(len(all)) {
		t.Errorf("%d effects, want %d: one per event", n, len(all))
	}
	if n := outOfOrder(t, url, cfg.Consumer); n != 0 {
		t.Errorf("%d pairs of an aggregate's events applied out of order", n)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, w := range all {
		ev := seen[w.id]
		if ev == nil {
			t.Errorf("event %s (%s, %d) never reached the handler under its id", w.id, w.agg, w.n)
			continue
		}
		if ev.Type != "OrderCreated" || ev.AggregateType != "Order" || ev.AggregateID != w.agg || ev.Value.OrderID != w.agg || ev.Value.N != w.n {
			t.Errorf("event %s: the handler saw type %q, aggregate %q/%q, value %+v; want OrderCreated, %s, %d",
				w.id, ev.Type, ev.AggregateType, ev.AggregateID, ev.Value, w.agg, w.n)
		}
	}
	if st := c.Stats(); st.DeadLettered != 0 {
		t.Errorf("Stats %+v: nothing should be dead-lettered", st)
	}
}
