package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Names in the benchmark database.
const (
	dbName      = "bench"
	publication = "bench_pub"
	// aggregates is how many distinct aggregate ids (Kafka keys) the rows
	// use; payloadExpr and insertRows spell it as g % 1000.
	aggregates = 1000
)

// database is the benchmark database and the connection that sets it up,
// loads it and polls pg_replication_slots.
type database struct {
	url  string
	conn *pgx.Conn
	pad  string // appended to customer_id so that payloads reach --payload-bytes
}

// slotNames are one run's slots, all created before the load: the relay's
// in at-least-once mode, the relay's in exactly-once mode, pg_recvlogical's
// and, with --debezium, Debezium's.
type slotNames struct {
	relay, relayEOS, recv, dbz string
}

// all returns the slots' names, leaving out unused ones (Debezium's without
// --debezium; with --broker rabbitmq there is only the relay's).
func (s slotNames) all() []string {
	var names []string
	for _, n := range []string{s.relay, s.relayEOS, s.recv, s.dbz} {
		if n != "" {
			names = append(names, n)
		}
	}
	return names
}

// loadInfo describes one run's backlog.
type loadInfo struct {
	Rows         int     `json:"rows"`
	Messages     bool    `json:"messages,omitempty"` // logical decoding messages, not rows
	MinID        int64   `json:"min_id"`             // outbox ids of the load: MinID..MaxID
	MaxID        int64   `json:"max_id"`
	Transactions int     `json:"transactions"`
	StartLSN     lsn     `json:"start_lsn"`
	EndLSN       lsn     `json:"end_lsn"`
	WALBytes     int64   `json:"wal_bytes"`
	PayloadBytes int64   `json:"payload_bytes"` // sum of the payloads' jsonb text sizes
	Seconds      float64 `json:"load_seconds"`
}

// prepareDatabase creates the database, the outbox table (docs/outbox_bigserial.sql)
// and the publication, and sizes the payload padding.
func prepareDatabase(ctx context.Context, svc *services, o options) (*database, error) {
	ddl, err := os.ReadFile(o.outboxSQL)
	if err != nil {
		return nil, fmt.Errorf("--outbox-sql: %w", err)
	}
	url, err := svc.pg.CreateDatabase(ctx, dbName)
	if err != nil {
		return nil, err
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	db := &database{url: url, conn: conn}
	stmts := []string{
		string(ddl),
		// Nothing but the drains should use CPU while they are timed.
		"ALTER TABLE public.outbox SET (autovacuum_enabled = false)",
		"CREATE PUBLICATION " + publication + " FOR TABLE public.outbox WITH (publish = 'insert')",
		// Each load commit is flushed when it returns, so that
		// pg_current_wal_lsn() after the last one covers it.
		"SET synchronous_commit = on",
	}
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			db.close()
			return nil, fmt.Errorf("%.60s: %w", s, err)
		}
	}
	var base float64
	if err := conn.QueryRow(ctx, "SELECT avg(octet_length(("+payloadExpr+")::text)) FROM generate_series(1, 1000) AS g", "").Scan(&base); err != nil {
		db.close()
		return nil, fmt.Errorf("size the payload: %w", err)
	}
	if pad := o.payloadBytes - int(math.Round(base)); pad > 0 {
		db.pad = strings.Repeat("x", pad)
	} else if pad < 0 {
		progress("note: the smallest payload is %.0f bytes, more than --payload-bytes %d", base, o.payloadBytes)
	}
	return db, nil
}

// close closes the connection.
func (db *database) close() {
	if db != nil && db.conn != nil {
		db.conn.Close(context.Background())
	}
}

// payloadExpr is one OrderCreated payload (testdata/schemas/OrderCreated.avsc)
// for row number g, with $1 appended to customer_id: a uuid order_id that is
// also the aggregate id (one of 1000), an enum status, long amount_cents, a
// line item, a coupon on every fourth order (null otherwise) and an
// RFC 3339 created_at.
const payloadExpr = `jsonb_build_object(
	'order_id', md5('order-' || (g % 1000))::uuid,
	'customer_id', 'cust-' || lpad((g % 50000)::text, 5, '0') || $1::text,
	'status', (ARRAY['PENDING','CONFIRMED','SHIPPED','DELIVERED','CANCELLED'])[1 + (g % 5)::int],
	'amount_cents', 1999 + g % 100000,
	'currency', 'EUR',
	'items', jsonb_build_array(
		jsonb_build_object('sku', 'SKU-' || lpad((g % 977)::text, 4, '0'), 'quantity', 1 + g % 3, 'unit_price_cents', 999 + g % 5000)),
	'coupon_code', CASE WHEN g % 4 = 0 THEN 'SPRING' END,
	'created_at', to_char(timestamp '2024-05-01 12:30:15.123' + g * interval '1 millisecond', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))`

// insertRows inserts rows $2..$3 in one statement, hence one transaction.
const insertRows = `INSERT INTO public.outbox (aggregate_type, aggregate_id, event_type, payload)
SELECT 'Order', md5('order-' || (g % 1000))::uuid::text, 'OrderCreated', ` + payloadExpr + `
FROM generate_series($2::bigint, $3::bigint) AS g`

// emitMessages writes rows $2..$3 as transactional logical decoding
// messages with the relay's default prefix, in one statement, hence one
// transaction: the same events as insertRows, with the row number as id.
const emitMessages = `SELECT count(pg_logical_emit_message(true, 'outbox', jsonb_build_object(
	'id', g, 'aggregate_type', 'Order', 'aggregate_id', md5('order-' || (g % 1000))::uuid::text, 'event_type', 'OrderCreated',
	'payload', ` + payloadExpr + `)::text))
FROM generate_series($2::bigint, $3::bigint) AS g`

// loadBacklog empties the table, creates the run's slots, then inserts
// --rows rows in transactions of --tx-size while nothing reads, and notes
// the WAL positions before and after.
func (db *database) loadBacklog(ctx context.Context, o options, slots slotNames) (loadInfo, error) {
	info := loadInfo{Rows: o.rows, Messages: o.messages}
	if _, err := db.conn.Exec(ctx, "TRUNCATE public.outbox"); err != nil {
		return info, fmt.Errorf("truncate: %w", err)
	}
	for _, s := range slots.all() {
		if _, err := db.conn.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", s); err != nil {
			return info, fmt.Errorf("create slot %s: %w", s, err)
		}
	}
	var err error
	if info.StartLSN, err = db.walLSN(ctx); err != nil {
		return info, err
	}
	load := insertRows
	if o.messages {
		load = emitMessages
	}
	start := time.Now()
	for lo := 1; lo <= o.rows; lo += o.txSize {
		hi := min(lo+o.txSize-1, o.rows)
		if _, err := db.conn.Exec(ctx, load, db.pad, lo, hi); err != nil {
			return info, fmt.Errorf("insert rows %d-%d: %w", lo, hi, err)
		}
		info.Transactions++
	}
	info.Seconds = time.Since(start).Seconds()
	if info.EndLSN, err = db.walLSN(ctx); err != nil {
		return info, err
	}
	info.WALBytes = int64(info.EndLSN - info.StartLSN)
	if o.messages {
		info.MinID, info.MaxID = 1, int64(o.rows)
		if err := db.conn.QueryRow(ctx, "SELECT sum(octet_length(("+payloadExpr+")::text)) FROM generate_series(1, $2::bigint) AS g", db.pad, o.rows).
			Scan(&info.PayloadBytes); err != nil {
			return info, fmt.Errorf("measure payloads: %w", err)
		}
		return info, db.checkpoint(ctx)
	}
	var rows int64
	if err := db.conn.QueryRow(ctx, "SELECT count(*), coalesce(sum(octet_length(payload::text)), 0), min(id), max(id) FROM public.outbox").
		Scan(&rows, &info.PayloadBytes, &info.MinID, &info.MaxID); err != nil {
		return info, fmt.Errorf("measure payloads: %w", err)
	}
	if rows != int64(o.rows) || info.MaxID-info.MinID+1 != rows {
		return info, fmt.Errorf("the table holds %d rows with ids %d..%d, want %d consecutive ids", rows, info.MinID, info.MaxID, o.rows)
	}
	return info, db.checkpoint(ctx)
}

// checkpoint writes the loaded pages out now rather than during a drain.
func (db *database) checkpoint(ctx context.Context) error {
	if _, err := db.conn.Exec(ctx, "CHECKPOINT"); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// walLSN returns pg_current_wal_lsn().
func (db *database) walLSN(ctx context.Context) (lsn, error) {
	var s string
	if err := db.conn.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&s); err != nil {
		return 0, fmt.Errorf("pg_current_wal_lsn: %w", err)
	}
	return parseLSN(s)
}

// slotState is a slot's row in pg_replication_slots and its walsender's in
// pg_stat_replication.
type slotState struct {
	confirmed lsn
	activePID int // the walsender serving the slot, 0 when inactive
	sent      lsn // how far the walsender has decoded and sent, 0 when inactive
}

// slot reads the slot's confirmed_flush_lsn, active_pid and sent_lsn.
func (db *database) slot(ctx context.Context, name string) (slotState, error) {
	var confirmed, sent *string
	var pid *int32
	err := db.conn.QueryRow(ctx, `SELECT s.confirmed_flush_lsn::text, s.active_pid, r.sent_lsn::text
		FROM pg_replication_slots s LEFT JOIN pg_stat_replication r ON r.pid = s.active_pid
		WHERE s.slot_name = $1`, name).Scan(&confirmed, &pid, &sent)
	if err != nil {
		return slotState{}, fmt.Errorf("read slot %s: %w", name, err)
	}
	var st slotState
	if pid != nil {
		st.activePID = int(*pid)
	}
	for _, f := range []struct {
		s   *string
		dst *lsn
	}{{confirmed, &st.confirmed}, {sent, &st.sent}} {
		if f.s == nil {
			continue
		}
		if *f.dst, err = parseLSN(*f.s); err != nil {
			return st, err
		}
	}
	return st, nil
}

// dropSlots drops the run's slots so that their WAL can go.
func (db *database) dropSlots(ctx context.Context, slots slotNames) error {
	for _, s := range slots.all() {
		if _, err := db.conn.Exec(ctx, "SELECT pg_drop_replication_slot($1)", s); err != nil {
			return fmt.Errorf("drop slot %s: %w", s, err)
		}
	}
	return nil
}

// lsn is a WAL position.
type lsn uint64

// parseLSN parses PostgreSQL's "X/X" form.
func parseLSN(s string) (lsn, error) {
	var hi, lo uint32
	if _, err := fmt.Sscanf(s, "%X/%X", &hi, &lo); err != nil {
		return 0, fmt.Errorf("parse LSN %q: %w", s, err)
	}
	return lsn(uint64(hi)<<32 | uint64(lo)), nil
}

// String formats the position as PostgreSQL does.
func (l lsn) String() string { return fmt.Sprintf("%X/%X", uint32(l>>32), uint32(l)) }

// MarshalText makes JSON carry the "X/X" form.
func (l lsn) MarshalText() ([]byte, error) { return []byte(l.String()), nil }
