package inbox

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// quiet drops the benchmarks' consumer logs, which would interleave with
// the benchmark lines.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// BenchmarkThroughput consumes a topic of 10000 events (3 partitions, 1000
// aggregates) from the start with N workers; each event is one transaction:
// the mark plus one INSERT of the handler. It reports events/s. Every
// iteration is a new consumer (its own group and marks).
func BenchmarkThroughput(b *testing.B) {
	const events = 10000
	url := newDB(b)
	execSQL(b, url, "CREATE TABLE effects (event_id text, order_id text, cents bigint)")
	topic := "bench" + suffix()
	createTopic(b, topic, 3)
	s := registerSchema(b, topic+"-value", "OrderCreated")
	recs := make([]record, events)
	for i := range recs {
		key := uuidN(i % 1000)
		recs[i] = record{key: key, partition: int32(i % 1000 % 3), value: avroValue(b, s, orderCreated(key, "c-1", int64(i))),
			headers: map[string]string{"id": fmt.Sprintf("ev-%d", i), "event_type": "OrderCreated"}}
	}
	produce(b, topic, recs)
	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		b.Fatal(err)
	}
	pcfg.MaxConns = 20 // more than the most workers
	pool, err := pgxpool.NewWithConfig(context.Background(), pcfg)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	for _, workers := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			b.ReportAllocs()
			var total time.Duration
			for i := 0; i < b.N; i++ {
				c, err := New(Config[map[string]any]{
					Consumer: "bench_" + suffix(), Brokers: []string{broker.Addr()}, Topics: []string{topic},
					RegistryURL: registry.URL(), DB: pool, MaxAttempts: 1, Workers: workers, SessionTimeout: 6 * time.Second, Logger: quiet,
					Handler: func(ctx context.Context, tx pgx.Tx, ev *Event[map[string]any]) error {
						_, err := tx.Exec(ctx, "INSERT INTO effects VALUES ($1, $2, $3)", ev.ID, ev.AggregateID, ev.Value["amount_cents"])
						return err
					},
				})
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				start := time.Now()
				go func() { done <- c.Run(ctx) }()
				waitFor(b, 5*time.Minute, "every event processed", func() bool { return c.Stats().Processed == events })
				total += time.Since(start)
				cancel()
				if err := <-done; err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(events*b.N)/total.Seconds(), "events/s")
		})
	}
}

// BenchmarkMark measures what the dedupe mark costs per event: the same
// handler INSERT in its own transaction with the mark INSERT before it
// (Consumer.process) and without it, alternating event by event so that
// both see the same load on a shared machine. It reports the mean of each
// and their difference, in microseconds per event.
func BenchmarkMark(b *testing.B) {
	url := newDB(b)
	execSQL(b, url, "CREATE TABLE effects (event_id text, order_id text, cents bigint)")
	pool := newPool(b, url)
	ctx := context.Background()
	handler := func(ctx context.Context, tx pgx.Tx, ev *Event[map[string]any]) error {
		_, err := tx.Exec(ctx, "INSERT INTO effects VALUES ($1, $2, $3)", ev.ID, ev.AggregateID, 100)
		return err
	}
	c, err := New(Config[map[string]any]{Consumer: "mark_" + suffix(), Brokers: []string{"unused"}, Topics: []string{"unused"},
		RegistryURL: "http://unused", DB: pool, MaxAttempts: 1, Handler: handler})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("alternating", func(b *testing.B) {
		var with, without time.Duration
		run := suffix() // the benchmark function runs more than once
		for i := 0; i < b.N; i++ {
			ev := &Event[map[string]any]{ID: fmt.Sprintf("m-%s-%d", run, i), AggregateID: "o-1"}
			t0 := time.Now()
			if dup, herr, err := c.process(ctx, ev); dup || herr != nil || err != nil {
				b.Fatal(dup, herr, err)
			}
			t1 := time.Now()
			tx, err := pool.Begin(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if err := handler(ctx, tx, ev); err != nil {
				b.Fatal(err)
			}
			if err := tx.Commit(ctx); err != nil {
				b.Fatal(err)
			}
			with, without = with+t1.Sub(t0), without+time.Since(t1)
		}
		n := float64(b.N)
		b.ReportMetric(float64(with.Microseconds())/n, "µs/event_with_mark")
		b.ReportMetric(float64(without.Microseconds())/n, "µs/event_without_mark")
		b.ReportMetric(float64((with-without).Microseconds())/n, "µs/mark")
	})
	b.Run("duplicate", func(b *testing.B) {
		// A redelivered event: the mark conflicts and the handler is skipped.
		ev := &Event[map[string]any]{ID: "d-" + suffix(), AggregateID: "o-1"}
		if _, _, err := c.process(ctx, ev); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if dup, _, err := c.process(ctx, ev); !dup || err != nil {
				b.Fatal(dup, err)
			}
		}
	})
}

// BenchmarkBatchSize consumes the same topic of 20000 events (3 partitions,
// 1000 aggregates, 4 workers) with BatchSize 1 and with BatchSize 100,
// alternating in each iteration so that both see the same load on a shared
// machine. Each event's effect is one INSERT. It reports effects/s of each,
// timed from the first handler call to the last event processed (so the
// group join is not counted), and their ratio, and fails unless every
// event was applied exactly once (one effect and one mark per event) in
// both.
func BenchmarkBatchSize(b *testing.B) {
	const events, workers = 20000, 4
	url := newDB(b)
	execSQL(b, url, "CREATE TABLE effects (consumer text, event_id text, order_id text, cents bigint)")
	topic := "batch" + suffix()
	createTopic(b, topic, 3)
	s := registerSchema(b, topic+"-value", "OrderCreated")
	recs := make([]record, events)
	for i := range recs {
		key := uuidN(i % 1000)
		recs[i] = record{key: key, partition: int32(i % 1000 % 3), value: avroValue(b, s, orderCreated(key, "c-1", int64(i))),
			headers: map[string]string{"id": fmt.Sprintf("ev-%d", i), "event_type": "OrderCreated"}}
	}
	produce(b, topic, recs)
	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		b.Fatal(err)
	}
	pcfg.MaxConns = workers + 2
	pool, err := pgxpool.NewWithConfig(context.Background(), pcfg)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	consume := func(batch int) time.Duration {
		name := fmt.Sprintf("batch%d_%s", batch, suffix())
		var first atomic.Int64 // UnixNano of the first handler call
		c, err := New(Config[map[string]any]{
			Consumer: name, Brokers: []string{broker.Addr()}, Topics: []string{topic},
			RegistryURL: registry.URL(), DB: pool, Workers: workers, BatchSize: batch, SessionTimeout: 6 * time.Second, Logger: quiet,
			Handler: func(ctx context.Context, tx pgx.Tx, ev *Event[map[string]any]) error {
				first.CompareAndSwap(0, time.Now().UnixNano())
				_, err := tx.Exec(ctx, "INSERT INTO effects VALUES ($1, $2, $3, $4)", name, ev.ID, ev.AggregateID, ev.Value["amount_cents"])
				return err
			},
		})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx) }()
		waitFor(b, 5*time.Minute, "every event processed", func() bool { return c.Stats().Processed == events })
		took := time.Since(time.Unix(0, first.Load()))
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		if n := mustInt(b, url, "SELECT count(*) FROM effects WHERE consumer = $1", name); n != events {
			b.Fatalf("BatchSize %d: %d effects, want %d", batch, n, events)
		}
		if n := mustInt(b, url, "SELECT count(DISTINCT event_id) FROM effects WHERE consumer = $1", name); n != events {
			b.Fatalf("BatchSize %d: %d distinct events applied, want %d", batch, n, events)
		}
		if n := mustInt(b, url, "SELECT count(*) FROM processed_messages WHERE consumer = $1", name); n != events {
			b.Fatalf("BatchSize %d: %d marks, want %d", batch, n, events)
		}
		return took
	}
	var one, hundred time.Duration
	for i := 0; i < b.N; i++ {
		one += consume(1)
		hundred += consume(100)
	}
	n := float64(events * b.N)
	b.ReportMetric(n/one.Seconds(), "effects/s_batch1")
	b.ReportMetric(n/hundred.Seconds(), "effects/s_batch100")
	b.ReportMetric(one.Seconds()/hundred.Seconds(), "ratio")
}
