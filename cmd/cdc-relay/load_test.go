package main

// A reusable background load for fault tests: writer goroutines, each on its
// own connection, keep committing outbox transactions until stopped and
// remember every committed id with its aggregate and its place in that
// aggregate's order.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// loadOptions shape a backgroundLoad. Zero values take the defaults.
type loadOptions struct {
	Writers             int           // writer goroutines, each with its own connection; default 4
	AggregatesPerWriter int           // aggregates owned by each writer; default 10
	MaxTxRows           int           // a transaction holds 1..MaxTxRows rows; default 30
	Pause               time.Duration // mean pause between a writer's transactions (load shaping, not synchronisation); default 25 ms
	HoldPercent         int           // share of a holding writer's transactions kept open across a partner's commit; default 25
	Seed                uint64        // seeds every writer's PCG
}

// committedEvent is one outbox row whose transaction committed.
type committedEvent struct {
	ID        int64
	Aggregate string
	Seq       int    // position in the aggregate's committing order, from 0
	Writer    int    // the only writer of this aggregate
	TxEnd     uint64 // WAL insert position read after the commit: at or past the commit's end LSN
}

// backgroundLoad runs the writers. Writers come in pairs: the even one
// sometimes inserts half its rows, lets its odd partner commit a whole
// transaction, inserts the rest and only then commits, so commits are not in
// insert order and a transaction's rows straddle another one's commit in WAL.
// Each aggregate belongs to one writer, so its order is the writer's order.
type backgroundLoad struct {
	f    *fixture
	opts loadOptions
	stop chan struct{}
	wg   sync.WaitGroup

	hold []chan chan struct{} // per pair: the holder hands its partner a channel to close after a commit

	mu     sync.Mutex
	events []committedEvent
	err    error

	txs         atomic.Int64 // committed transactions
	interleaved atomic.Int64 // transactions committed after a partner's later-begun transaction
}

// startBackgroundLoad starts the writers; they stop at Stop or when the test ends.
func startBackgroundLoad(t *testing.T, f *fixture, opts loadOptions) *backgroundLoad {
	t.Helper()
	if opts.Writers == 0 {
		opts.Writers = 4
	}
	if opts.AggregatesPerWriter == 0 {
		opts.AggregatesPerWriter = 10
	}
	if opts.MaxTxRows == 0 {
		opts.MaxTxRows = 30
	}
	if opts.Pause == 0 {
		opts.Pause = 25 * time.Millisecond
	}
	if opts.HoldPercent == 0 {
		opts.HoldPercent = 25
	}
	l := &backgroundLoad{f: f, opts: opts, stop: make(chan struct{})}
	for range (opts.Writers + 1) / 2 {
		l.hold = append(l.hold, make(chan chan struct{}))
	}
	conns := make([]*pgx.Conn, opts.Writers)
	for w := range conns {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		conn, err := pgx.Connect(ctx, dbURL)
		cancel()
		if err != nil {
			for _, c := range conns[:w] {
				c.Close(context.Background())
			}
			t.Fatalf("background load: connect writer %d: %v", w, err)
		}
		conns[w] = conn
	}
	for w, conn := range conns {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			defer conn.Close(context.Background())
			if err := l.write(w, conn); err != nil {
				l.mu.Lock()
				if l.err == nil {
					l.err = fmt.Errorf("writer %d: %w", w, err)
				}
				l.mu.Unlock()
			}
		}()
	}
	t.Cleanup(func() { l.Stop() })
	return l
}

// aggregateOf names writer w's k-th aggregate.
func (l *backgroundLoad) aggregateOf(w, k int) string { return uuidFor(900000 + w*1000 + k) }

func (l *backgroundLoad) write(w int, conn *pgx.Conn) error {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(l.opts.Seed, uint64(w)+1))
	seqs := map[string]int{}
	holder := w%2 == 0 && w+1 < l.opts.Writers
	pair := l.hold[w/2]
	n := 0 // rows written so far, for payload variety
	for {
		var served chan struct{}
		if !holder {
			// A waiting holder's request is served by the next transaction.
			select {
			case served = <-pair:
			default:
			}
		}
		select {
		case <-l.stop:
			if served != nil {
				close(served)
			}
			return nil
		default:
		}
		rows := 1 + rng.IntN(l.opts.MaxTxRows)
		evs := make([]event, rows)
		meta := make([]committedEvent, rows)
		for i := range evs {
			agg := l.aggregateOf(w, rng.IntN(l.opts.AggregatesPerWriter))
			evType, payload := "OrderCreated", orderCreated(agg, n)
			if rng.IntN(3) == 0 {
				evType, payload = "OrderCancelled", orderCancelled(agg, n)
			}
			n++
			evs[i] = event{AggregateType: "Order", AggregateID: agg, EventType: evType, Payload: payload}
			meta[i] = committedEvent{Aggregate: agg, Writer: w}
		}
		hold := holder && rng.IntN(100) < l.opts.HoldPercent
		ids, txEnd, handedOff, err := l.commit(ctx, conn, evs, hold, pair)
		if served != nil {
			close(served)
		}
		if err != nil {
			return err
		}
		for i := range meta {
			meta[i].ID = ids[i]
			meta[i].Seq = seqs[meta[i].Aggregate]
			meta[i].TxEnd = txEnd
			seqs[meta[i].Aggregate]++
		}
		l.mu.Lock()
		l.events = append(l.events, meta...)
		l.mu.Unlock()
		l.txs.Add(1)
		if handedOff {
			l.interleaved.Add(1)
		}
		// Load shaping: a random pause, so the load is steady, not maximal.
		pause := time.NewTimer(time.Duration(rng.Int64N(2 * int64(l.opts.Pause))))
		select {
		case <-l.stop:
			pause.Stop()
		case <-pause.C:
		}
	}
}

// commit inserts evs in one transaction. With hold, it inserts the first
// half, waits until the partner committed a transaction begun after it,
// inserts the rest and commits; handedOff reports whether that happened.
func (l *backgroundLoad) commit(ctx context.Context, conn *pgx.Conn, evs []event, hold bool, pair chan chan struct{}) (ids []int64, txEnd uint64, handedOff bool, err error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, 0, false, err
	}
	defer tx.Rollback(ctx)
	insert := func(evs []event) error {
		for _, e := range evs {
			var id int64
			if err := tx.QueryRow(ctx, fmt.Sprintf(`INSERT INTO public.%s (aggregate_type, aggregate_id, event_type, payload)
				VALUES ($1, $2, $3, $4::jsonb) RETURNING id`, l.f.table), e.AggregateType, e.AggregateID, e.EventType, e.Payload).Scan(&id); err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return nil
	}
	half := len(evs) / 2
	if !hold {
		half = len(evs)
	}
	if err := insert(evs[:half]); err != nil {
		return nil, 0, false, err
	}
	if hold {
		done := make(chan struct{})
		select {
		case pair <- done:
			select {
			case <-done:
				handedOff = true
			case <-l.stop:
			}
		case <-l.stop:
		}
	}
	if err := insert(evs[half:]); err != nil {
		return nil, 0, false, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, 0, false, err
	}
	var lsn string
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&lsn); err != nil {
		return nil, 0, false, err
	}
	var hi, lo uint32
	if _, err := fmt.Sscanf(lsn, "%X/%X", &hi, &lo); err != nil {
		return nil, 0, false, err
	}
	return ids, uint64(hi)<<32 | uint64(lo), handedOff, nil
}

// Stop stops the writers and waits for them; it returns the first writer
// error. Calling it again does nothing more.
func (l *backgroundLoad) Stop() error {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Committed returns every committed event, in no particular order.
func (l *backgroundLoad) Committed() []committedEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]committedEvent(nil), l.events...)
}

// Err returns the first writer error so far.
func (l *backgroundLoad) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}
