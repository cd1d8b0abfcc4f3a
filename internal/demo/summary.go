package main

import (
	"context"
	"fmt"
	"time"
)

// slotState is the relay's slot as pg_replication_slots shows it.
type slotState struct {
	confirmed  string // confirmed_flush_lsn
	current    string // pg_current_wal_lsn()
	behind     int64  // bytes from confirmed_flush_lsn to pg_current_wal_lsn()
	pastTarget bool   // confirmed_flush_lsn has reached the writer's last commit
}

// summary waits until the slot has confirmed the writer's last commit and the
// relay's metrics count every record, prints the numbers, then stops the
// relay with SIGTERM and checks that it exits 0.
func (d *demo) summary(ctx context.Context, want []written, endLSN string) error {
	var (
		slot    slotState
		metrics map[string]float64
	)
	err := poll(ctx, settleTimeout, func(ctx context.Context) (bool, error) {
		var err error
		if slot, err = d.slot(ctx, endLSN); err != nil {
			return false, err
		}
		if metrics, err = d.relay.metrics(ctx); err != nil {
			return false, err
		}
		return slot.pastTarget && metrics["cdc_relay_events_published_total"] >= float64(len(want)), nil
	})
	fmt.Printf("summary     records: %s (%d ids written, %d duplicates)\n", d.consumer.counts(), len(want), d.consumer.duplicates())
	fmt.Printf("            slot %s: confirmed_flush_lsn %s, pg_current_wal_lsn %s (%d bytes behind; last commit ends at %s)\n",
		slotName, slot.confirmed, slot.current, slot.behind, endLSN)
	fmt.Printf("            relay /metrics: cdc_relay_events_published_total %g (dead letters included), cdc_relay_dlq_events_total %g, cdc_relay_slot_lag_bytes %g\n",
		metrics["cdc_relay_events_published_total"], metrics["cdc_relay_dlq_events_total"], metrics["cdc_relay_slot_lag_bytes"])
	if d.rabbit != nil {
		fmt.Printf("            relay /metrics: cdc_relay_rabbitmq_unroutable_total %g, cdc_relay_rabbitmq_nacks_total %g, cdc_relay_rabbitmq_blocked %g\n",
			metrics["cdc_relay_rabbitmq_unroutable_total"], metrics["cdc_relay_rabbitmq_nacks_total"], metrics["cdc_relay_rabbitmq_blocked"])
	}
	if err != nil {
		return fmt.Errorf("the slot did not confirm up to %s, or the relay did not count %d published records: %w", endLSN, len(want), err)
	}

	t := time.Now()
	code, err := d.relay.stop(stopTimeout)
	if err != nil {
		return err
	}
	fmt.Printf("relay       SIGTERM: exited with code %d in %s\n", code, since(t))
	if code != 0 {
		return fmt.Errorf("relay exited with code %d after SIGTERM, want 0", code)
	}
	return nil
}

// slot reads the relay's slot and whether it has confirmed target.
func (d *demo) slot(ctx context.Context, target string) (slotState, error) {
	var s slotState
	err := d.conn.QueryRow(ctx, `SELECT confirmed_flush_lsn::text, pg_current_wal_lsn()::text,
			pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint, confirmed_flush_lsn >= $2::pg_lsn
		FROM pg_replication_slots WHERE slot_name = $1`, slotName, target).Scan(&s.confirmed, &s.current, &s.behind, &s.pastTarget)
	if err != nil {
		return s, fmt.Errorf("read slot %s: %w", slotName, err)
	}
	return s, nil
}

// poll calls cond every 100 ms, with a context that ends at the deadline,
// until it returns true, ctx ends or timeout passes; the error then carries
// cond's last error.
func poll(ctx context.Context, timeout time.Duration, cond func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		ok, err := cond(ctx)
		if ok {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("%w (last error: %v)", ctx.Err(), last)
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}
