package replication

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
)

// SlotSample is one reading of the slot's row in pg_replication_slots (and,
// on PostgreSQL 14+, pg_stat_replication_slots), taken by a SlotPoller.
type SlotSample struct {
	At time.Time
	// WALStatus is reserved, extended, unreserved or lost.
	WALStatus string
	// SafeWALSize is how many bytes of WAL can still be written before the
	// slot is in danger of losing WAL it needs; nil when
	// max_slot_wal_keep_size is unset (-1).
	SafeWALSize *int64
	// LagBytes is the current WAL position minus confirmed_flush_lsn.
	LagBytes int64
	// LagGrowth is how fast LagBytes grew over the last few samples, in
	// bytes per second (negative while it shrinks); 0 with one sample.
	LagGrowth float64
	// Failover is the slot's failover flag (PostgreSQL 17+).
	Failover bool
	// SpillTxns and SpillBytes are the transactions and bytes the slot's
	// decoding spilled to disk; nil before PostgreSQL 14.
	SpillTxns, SpillBytes *int64
}

// ExhaustionSeconds estimates the time until the slot loses WAL:
// SafeWALSize divided by the lag's growth rate. ok is false when there is
// no limit (max_slot_wal_keep_size unset) or the lag is not growing.
func (s *SlotSample) ExhaustionSeconds() (seconds float64, ok bool) {
	if s == nil || s.SafeWALSize == nil || s.LagGrowth <= 0 {
		return 0, false
	}
	return float64(max(*s.SafeWALSize, 0)) / s.LagGrowth, true
}

// SlotPoller reads the slot's catalog row every Interval on a normal
// connection of its own (a catalog query: never the outbox table) and
// publishes the newest SlotSample in Stats.
type SlotPoller struct {
	// URL is the libpq URL (multi-host allowed).
	URL string
	// Slot is the slot's name.
	Slot string
	// Interval is the time between readings. Default 15 s.
	Interval time.Duration
	// Stats receives the samples (Stats.SlotSample).
	Stats *Stats
	// Logger receives errors. Default slog.Default().
	Logger *slog.Logger
}

// growthWindow is how many past samples the lag's growth rate spans: with
// the default interval of 15 s, one minute.
const growthWindow = 4

type lagPoint struct {
	at  time.Time
	lag int64
}

// Run polls until ctx ends. Errors (no primary, slot not created yet) clear
// the sample and are retried at the next tick.
func (p *SlotPoller) Run(ctx context.Context) {
	interval := p.Interval
	if interval <= 0 {
		interval = 15 * time.Second
	}
	log := p.Logger
	if log == nil {
		log = slog.Default()
	}
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	var history []lagPoint
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if conn == nil {
			if c, err := p.connect(ctx, interval); err == nil {
				conn = c
			} else if ctx.Err() == nil {
				log.Debug("slot poll: connect", "err", err.Error())
			}
		}
		if conn != nil {
			qctx, cancel := context.WithTimeout(ctx, max(interval, 5*time.Second))
			s, err := p.read(qctx, conn)
			cancel()
			switch {
			case err == nil:
				history = append(history, lagPoint{s.At, s.LagBytes})
				if len(history) > growthWindow+1 {
					history = history[1:]
				}
				if first := history[0]; len(history) > 1 {
					if dt := s.At.Sub(first.at).Seconds(); dt > 0 {
						s.LagGrowth = float64(s.LagBytes-first.lag) / dt
					}
				}
				p.Stats.slotSample.Store(s)
				p.Stats.slotFailover.Store(s.Failover)
			case errors.Is(err, errNoSlot):
				p.Stats.slotSample.Store(nil)
				history = nil
			default:
				if ctx.Err() == nil {
					log.Debug("slot poll", "err", err.Error())
				}
				p.Stats.slotSample.Store(nil)
				history = nil
				conn.Close(context.Background())
				conn = nil
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

var errNoSlot = errors.New("slot does not exist yet")

func (p *SlotPoller) connect(ctx context.Context, interval time.Duration) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(p.URL)
	if err != nil {
		return nil, err
	}
	configureConn(&cfg.Config)
	cctx, cancel := context.WithTimeout(ctx, max(interval, connectTimeout))
	defer cancel()
	return pgx.ConnectConfig(cctx, cfg)
}

func (p *SlotPoller) read(ctx context.Context, conn *pgx.Conn) (*SlotSample, error) {
	s := &SlotSample{At: time.Now()}
	var walStatus *string
	var lag *int64
	var major int
	err := conn.QueryRow(ctx, `SELECT wal_status, safe_wal_size,
			pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_lsn(), confirmed_flush_lsn)::bigint,
			coalesce((to_jsonb(s) ->> 'failover')::bool, false),
			current_setting('server_version_num')::int / 10000
		FROM pg_catalog.pg_replication_slots s WHERE slot_name = $1`, p.Slot).Scan(&walStatus, &s.SafeWALSize, &lag, &s.Failover, &major)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errNoSlot
	}
	if err != nil {
		return nil, fmt.Errorf("read pg_replication_slots: %w", err)
	}
	s.WALStatus = deref(walStatus)
	if lag != nil {
		s.LagBytes = *lag
	}
	if major >= 14 {
		var txns, bytes int64
		err := conn.QueryRow(ctx, `SELECT spill_txns, spill_bytes FROM pg_catalog.pg_stat_replication_slots WHERE slot_name = $1`, p.Slot).Scan(&txns, &bytes)
		switch {
		case errors.Is(err, pgx.ErrNoRows): // no statistics yet
			txns, bytes = 0, 0
		case err != nil:
			return nil, fmt.Errorf("read pg_stat_replication_slots: %w", err)
		}
		s.SpillTxns, s.SpillBytes = &txns, &bytes
	}
	return s, nil
}
