package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/cdc-relay/cdc-relay/internal/freeport"
)

// rabbitLatency is one rate's measurement with RabbitMQ: the relay's
// commit -> consumed and the anchor's publish -> consumed.
type rabbitLatency struct {
	TargetRate    int     `json:"target_events_per_second"`
	AchievedRate  float64 `json:"achieved_events_per_second"`
	Events        int     `json:"events"`
	Missing       int     `json:"missing"`
	P50Ms         float64 `json:"p50_ms"`
	P99Ms         float64 `json:"p99_ms"`
	MaxMs         float64 `json:"max_ms"`
	AnchorEvents  int     `json:"anchor_events"`
	AnchorMissing int     `json:"anchor_missing"`
	AnchorP50Ms   float64 `json:"anchor_p50_ms"`
	AnchorP99Ms   float64 `json:"anchor_p99_ms"`
	AnchorMaxMs   float64 `json:"anchor_max_ms"`
}

// runRabbitLatency measures, at each of --rates, the relay (writers
// committing single-row transactions, a consumer on the bound queue) and
// then the anchor publishing the relay's messages at the same rate.
func runRabbitLatency(ctx context.Context, o options, svc *services, db *database, relayBin string, fail func(error) int) int {
	conn, err := amqp.Dial(svc.rabbit.URL())
	if err != nil {
		return fail(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return fail(err)
	}
	pool := &writerPool{url: db.url}
	defer pool.close()
	var rs []rabbitLatency
	var row atomic.Int64 // the payloads' row numbers
	for _, rate := range o.rates {
		r := rabbitLatency{TargetRate: rate}
		if err := rabbitTopology(ch, o.queueType); err != nil {
			return fail(err)
		}
		if err := waitQuiet(ctx, o.quietWait); err != nil {
			return fail(err)
		}
		template, err := relayLatency(ctx, o, svc, db, relayBin, pool, &row, &r)
		if err != nil {
			return fail(fmt.Errorf("%d/s: cdc-relay: %w", rate, err))
		}
		if err := rabbitTopology(ch, o.queueType); err != nil {
			return fail(err)
		}
		if err := waitQuiet(ctx, o.quietWait); err != nil {
			return fail(err)
		}
		if err := anchorLatency(ctx, o, svc, template, &r); err != nil {
			return fail(fmt.Errorf("%d/s: anchor: %w", rate, err))
		}
		rs = append(rs, r)
	}
	printRabbitLatency(os.Stdout, o, rs)
	if err := writeJSONTo(o.jsonPath, rs); err != nil {
		return fail(err)
	}
	return 0
}

// idRoom is how many ids one phase may use: the writers also commit while
// the relay catches up at the end.
func idRoom(o options, rate int) int {
	return int(float64(rate)*(o.warmup+o.duration+30*time.Second).Seconds()) + 1000
}

// relayLatency runs the relay on a fresh slot while writers commit at
// r.TargetRate, and fills r's relay fields from the events committed in
// the measured window. It returns one message the relay published, the
// anchor's template.
func relayLatency(ctx context.Context, o options, svc *services, db *database, relayBin string, pool *writerPool, row *atomic.Int64, r *rabbitLatency) (amqp.Delivery, error) {
	var tmpl amqp.Delivery
	var base int64
	if err := db.conn.QueryRow(ctx, "SELECT nextval(pg_get_serial_sequence('public.outbox', 'id'))").Scan(&base); err != nil {
		return tmpl, fmt.Errorf("read the id sequence: %w", err)
	}
	base++
	n := idRoom(o, r.TargetRate)
	ev := newEventTimes(base, n)
	col, err := startCollector(svc.rabbit.URL(), base, n, false, func(id int64, at time.Time) {
		ev.recv[id-base].Store(at.UnixNano())
	})
	if err != nil {
		return tmpl, err
	}
	defer col.close()
	slot := fmt.Sprintf("bench_rmq_lat_%d", r.TargetRate)
	if err := createSlot(ctx, db, slot); err != nil {
		return tmpl, err
	}
	port, err := freeport.Get()
	if err != nil {
		return tmpl, err
	}
	metricsAddr := "127.0.0.1:" + strconv.Itoa(port)
	c, err := startChild(ctx, "cdc-relay", relayBin, rabbitRelayArgs(o, svc, db, slot, fmt.Sprintf("bench_lat%d", r.TargetRate), metricsAddr), nil)
	if err != nil {
		return tmpl, err
	}
	defer c.kill()
	if _, err := waitActive(ctx, db, c, slot); err != nil {
		return tmpl, err
	}
	conns, err := pool.forRate(ctx, r.TargetRate)
	if err != nil {
		return tmpl, err
	}
	progress("latency %d/s: cdc-relay, %s warm-up and %s measured", r.TargetRate, o.warmup, o.duration)
	w := startWriters(ctx, db, conns, r.TargetRate, ev, row)
	sleepUntil(ctx, time.Now().Add(o.warmup))
	win := window{from: time.Now().UnixNano()}
	sleepUntil(ctx, time.Now().Add(o.duration))
	win.to = time.Now().UnixNano()
	if err := w.halt(); err != nil {
		return tmpl, err
	}
	if ctx.Err() != nil {
		return tmpl, ctx.Err()
	}
	awaitWindow(ctx, ev, win, 10*time.Second)
	ms, events, missing := windowLatencies(ev, win)
	r.Events, r.Missing = events, missing
	r.AchievedRate = float64(events) / (float64(win.to-win.from) / 1e9)
	r.P50Ms, r.P99Ms, r.MaxMs = pct(ms, 0.5), pct(ms, 0.99), pct(ms, 1)
	c.signal(syscall.SIGTERM)
	if err := c.wait(ctx, stopWithin); err != nil {
		return tmpl, c.failure("after SIGTERM: %v", err)
	}
	if err := dropSlot(ctx, db, slot); err != nil {
		return tmpl, err
	}
	col.close() // so that reading first below follows the consumer's last write
	if col.count.Load() == 0 {
		return tmpl, fmt.Errorf("the consumer of %s received nothing", rabbitQueue)
	}
	return col.first, nil
}

// anchorLatency publishes tmpl (with fresh message ids) at r.TargetRate on
// a confirm channel, with deferred confirmations and a bounded window, and
// fills r's anchor fields: publish -> consumed.
func anchorLatency(ctx context.Context, o options, svc *services, tmpl amqp.Delivery, r *rabbitLatency) error {
	n := idRoom(o, r.TargetRate)
	ev := newEventTimes(1, n)
	col, err := startCollector(svc.rabbit.URL(), 1, n, false, func(id int64, at time.Time) {
		ev.recv[id-1].Store(at.UnixNano())
	})
	if err != nil {
		return err
	}
	defer col.close()
	p, err := newAnchorPublisher(svc.rabbit.URL(), anchorWindow)
	if err != nil {
		return err
	}
	defer p.close()
	progress("latency %d/s: anchor, %s warm-up and %s measured", r.TargetRate, o.warmup, o.duration)
	interval := time.Second / time.Duration(r.TargetRate)
	start := time.Now()
	warm, end := start.Add(o.warmup), start.Add(o.warmup+o.duration)
	var win window
	// Message i is due at start + i*interval; one that is late goes at
	// once, so that the rate holds on average.
	for next := 0; next < n; next++ {
		due := start.Add(time.Duration(next) * interval)
		if !due.Before(end) {
			break
		}
		sleepUntil(ctx, due)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if win.from == 0 && !due.Before(warm) {
			win.from = time.Now().UnixNano()
		}
		m := publishing(tmpl)
		m.MessageId = strconv.Itoa(next + 1)
		m.Headers = maps.Clone(tmpl.Headers)
		m.Headers["id"] = m.MessageId
		t := time.Now()
		ev.commit[next].Store(t.UnixNano())
		if err := p.publish(ctx, tmpl.RoutingKey, m); err != nil {
			return err
		}
	}
	win.to = time.Now().UnixNano()
	if err := p.flush(ctx); err != nil {
		return err
	}
	awaitWindow(ctx, ev, win, 10*time.Second)
	ms, events, missing := windowLatencies(ev, win)
	r.AnchorEvents, r.AnchorMissing = events, missing
	r.AnchorP50Ms, r.AnchorP99Ms, r.AnchorMaxMs = pct(ms, 0.5), pct(ms, 0.99), pct(ms, 1)
	return nil
}

// awaitWindow waits until every event committed (or published) in win has
// been received, or within passes.
func awaitWindow(ctx context.Context, ev *eventTimes, win window, within time.Duration) {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if _, _, missing := windowLatencies(ev, win); missing == 0 {
			return
		}
		sleepUntil(ctx, time.Now().Add(slotPoll))
	}
}

// windowLatencies returns, for the events whose commit falls in win, the
// milliseconds to their receipt, how many there were, and how many were
// not received.
func windowLatencies(ev *eventTimes, win window) (ms []float64, events, missing int) {
	for k := range ev.commit {
		c := ev.commit[k].Load()
		if c < win.from || c >= win.to {
			continue
		}
		events++
		if rc := ev.recv[k].Load(); rc > 0 {
			ms = append(ms, float64(rc-c)/1e6)
		} else {
			missing++
		}
	}
	return ms, events, missing
}

// printRabbitLatency prints the relay's latency beside the anchor's.
func printRabbitLatency(w io.Writer, o options, rs []rabbitLatency) {
	fmt.Fprintf(w, "\nSteady-state latency to RabbitMQ: %s measured per rate after %s warm-up, JSON values, %s queue %s bound with #\n", o.duration, o.warmup, o.queueType, rabbitQueue)
	fmt.Fprintln(w, "cdc-relay = single-row commit returned to the writer -> consumed by an amqp091-go consumer (prefetch 2000); anchor = the relay's message published by amqp091-go (deferred confirms) -> consumed, the same consumer, the relay stopped")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target/s\tachieved/s\tevents\tmissing\tp50 ms\tp99 ms\tmax ms\tanchor events\tanchor missing\tanchor p50 ms\tanchor p99 ms\tanchor max ms\tp99 - anchor p99\t")
	for _, r := range rs {
		fmt.Fprintf(tw, "%d\t%.0f\t%d\t%d\t%.2f\t%.2f\t%.2f\t%d\t%d\t%.2f\t%.2f\t%.2f\t%+.2f\t\n", r.TargetRate, r.AchievedRate, r.Events, r.Missing,
			r.P50Ms, r.P99Ms, r.MaxMs, r.AnchorEvents, r.AnchorMissing, r.AnchorP50Ms, r.AnchorP99Ms, r.AnchorMaxMs, r.P99Ms-r.AnchorP99Ms)
	}
	tw.Flush()
}
