package replication

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cdc-relay/cdc-relay/catalog"
)

// SlotInfo is the slot's row in pg_replication_slots.
type SlotInfo struct {
	Plugin    string
	Type      string
	Database  string
	WALStatus string
	Confirmed LSN
	ActivePID int32
	// Failover is true for a failover slot (PostgreSQL 17+), which physical
	// standbys synchronise so that it survives a promotion.
	Failover bool
	// Synced is true on a standby for a slot synchronised from the primary.
	Synced bool
	// Conflicting is true for a logical slot invalidated by a conflict with
	// recovery (PostgreSQL 16+), InvalidationReason the cause of any
	// invalidation (PostgreSQL 17+; "" when valid or not reported).
	Conflicting        bool
	InvalidationReason string
}

// SplitTable splits "schema.table" ("table" means schema public).
func SplitTable(table string) (schema, name string) {
	if i := strings.IndexByte(table, '.'); i >= 0 {
		return table[:i], table[i+1:]
	}
	return "public", table
}

// CheckPublication reads from the catalog whether the existing publication
// publishes the inserts of table under the table's own name, and returns
// an error saying what is wrong and the statement that fixes it.
func CheckPublication(ctx context.Context, conn *pgx.Conn, publication, table string) error {
	schema, name := SplitTable(table)
	var publishes, inserts, viaRoot, partitioned bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_publication_tables
		WHERE pubname = $1 AND schemaname = $2 AND tablename = $3),
		coalesce((SELECT pubinsert FROM pg_catalog.pg_publication WHERE pubname = $1), false),
		coalesce((SELECT pubviaroot FROM pg_catalog.pg_publication WHERE pubname = $1), false),
		EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = $2 AND c.relname = $3 AND c.relkind = 'p')`, publication, schema, name).Scan(&publishes, &inserts, &viaRoot, &partitioned); err != nil {
		return fmt.Errorf("look up publication %s tables: %w", publication, err)
	}
	pub := pgx.Identifier{publication}.Sanitize()
	switch {
	case !publishes && partitioned && !viaRoot:
		return fmt.Errorf("publication %s does not publish %s.%s under its own name: %s is partitioned and the publication has publish_via_partition_root = false, so rows would arrive under each partition's name; run ALTER PUBLICATION %s SET (publish_via_partition_root = true)",
			publication, schema, name, name, pub)
	case !publishes:
		return fmt.Errorf("publication %s does not publish %s.%s: run ALTER PUBLICATION %s ADD TABLE %s, or set --publication",
			publication, schema, name, pub, pgx.Identifier{schema, name}.Sanitize())
	case !inserts:
		return fmt.Errorf("publication %s does not publish INSERTs, so no outbox row would ever arrive: run ALTER PUBLICATION %s SET (publish = 'insert'), or set --publication",
			publication, pub)
	}
	return nil
}

// LookupSlot reads the slot's row; ok is false when the slot does not exist.
func LookupSlot(ctx context.Context, conn *pgx.Conn, slot string) (info SlotInfo, ok bool, err error) {
	var confirmed, walStatus, plugin, database *string
	var pid *int32
	// failover, synced and invalidation_reason exist from PostgreSQL 17
	// on, conflicting from 16: read through to_jsonb so that one query
	// serves every version.
	err = conn.QueryRow(ctx, `SELECT plugin, slot_type, database, wal_status, confirmed_flush_lsn::text, active_pid,
			coalesce((to_jsonb(s) ->> 'failover')::bool, false), coalesce((to_jsonb(s) ->> 'synced')::bool, false),
			coalesce((to_jsonb(s) ->> 'conflicting')::bool, false), coalesce(to_jsonb(s) ->> 'invalidation_reason', '')
		FROM pg_catalog.pg_replication_slots s WHERE slot_name = $1`, slot).
		Scan(&plugin, &info.Type, &database, &walStatus, &confirmed, &pid, &info.Failover, &info.Synced, &info.Conflicting, &info.InvalidationReason)
	if errors.Is(err, pgx.ErrNoRows) {
		return info, false, nil
	}
	if err != nil {
		return info, false, fmt.Errorf("look up slot %s: %w", slot, err)
	}
	info.Plugin, info.Database, info.WALStatus = deref(plugin), deref(database), deref(walStatus)
	if pid != nil {
		info.ActivePID = *pid
	}
	if confirmed != nil {
		if info.Confirmed, err = ParseLSN(*confirmed); err != nil {
			return info, true, err
		}
	}
	return info, true, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// EnsureSlot checks the slot and, when create is true and it is missing,
// creates a persistent pgoutput slot, a failover slot when failover is true
// (PostgreSQL 17+). It returns the slot's state and whether it created it. A
// slot with another plugin, of the physical kind, in another database or
// with lost WAL is an error.
func EnsureSlot(ctx context.Context, conn *pgx.Conn, slot string, create, failover bool) (info SlotInfo, created bool, err error) {
	info, ok, err := LookupSlot(ctx, conn, slot)
	if err != nil {
		return info, false, err
	}
	if !ok {
		if !create {
			return info, false, Fatal(fmt.Errorf("slot %q: %w", slot, ErrSlotDropped))
		}
		sql := `SELECT pg_catalog.pg_create_logical_replication_slot($1, 'pgoutput')`
		if failover {
			// Arguments: temporary = false, twophase = false, failover = true.
			sql = `SELECT pg_catalog.pg_create_logical_replication_slot($1, 'pgoutput', false, false, true)`
		}
		_, err := conn.Exec(ctx, sql, slot)
		var pgErr *pgconn.PgError
		switch {
		case err == nil:
			created = true
		case errors.As(err, &pgErr) && pgErr.Code == "42710": // a peer created it first
		default:
			return info, false, fmt.Errorf("create slot %s: %w", slot, err)
		}
		if info, ok, err = LookupSlot(ctx, conn, slot); err != nil || !ok {
			return info, created, fmt.Errorf("slot %s vanished right after creation: %v", slot, err)
		}
	}
	var db string
	if err := conn.QueryRow(ctx, `SELECT current_database()`).Scan(&db); err != nil {
		return info, created, fmt.Errorf("current database: %w", err)
	}
	switch {
	case info.Type != "logical":
		return info, created, Fatal(&SlotError{Slot: slot, Reason: "it is a " + info.Type + " slot", Fix: "use another --slot name for the relay"})
	case info.Plugin != "pgoutput":
		return info, created, Fatal(&SlotError{Slot: slot, Reason: fmt.Sprintf("it uses plugin %q, the relay needs pgoutput", info.Plugin),
			Fix: OtherPluginFix(slot)})
	case info.Database != db:
		return info, created, Fatal(&SlotError{Slot: slot, Reason: fmt.Sprintf("it belongs to database %q, not %q", info.Database, db),
			Fix: "point --pg-url at database " + info.Database + " or choose another --slot"})
	case info.Invalidated():
		return info, created, Fatal(fmt.Errorf("slot %q (confirmed LSN %s): %w (fix: find the events that were not published, then drop the slot so the relay creates a new one, or start the relay once with --recreate-lost-slot)",
			slot, info.Confirmed, ErrSlotLost))
	}
	return info, created, nil
}

// RecreateLostSlot drops the slot if it is still invalidated (wal_status
// lost, or conflicting) and creates it again, returning the new slot's state. Checking and dropping in
// one statement keeps it from dropping a slot that a peer has just recreated;
// a peer that created the new slot first is fine.
func RecreateLostSlot(ctx context.Context, conn *pgx.Conn, slot string, failover bool) (SlotInfo, error) {
	if _, err := conn.Exec(ctx, `SELECT pg_catalog.pg_drop_replication_slot(slot_name) FROM pg_catalog.pg_replication_slots
		WHERE slot_name = $1 AND (wal_status = 'lost' OR coalesce((to_jsonb(pg_replication_slots) ->> 'conflicting')::bool, false)
			OR coalesce(to_jsonb(pg_replication_slots) ->> 'invalidation_reason', '') <> '')`, slot); err != nil {
		return SlotInfo{}, fmt.Errorf("drop lost slot %s: %w", slot, err)
	}
	info, _, err := EnsureSlot(ctx, conn, slot, true, failover)
	return info, err
}

// TableInfo is what the catalog says of a table: its oid (the relation id
// pgoutput sends; 0 when the table does not exist) and its columns by name.
type TableInfo struct {
	Name    string
	OID     uint32
	Columns map[string]catalog.Column
}

// DescribeTable reads the table's oid and columns from pg_class and
// pg_attribute (the catalog; never the table itself).
func DescribeTable(ctx context.Context, conn *pgx.Conn, table string) (TableInfo, error) {
	schema, name := SplitTable(table)
	info := TableInfo{Name: table, Columns: map[string]catalog.Column{}}
	rows, err := conn.Query(ctx, `SELECT c.oid::int8, a.attname, a.atttypid::int8,
		CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE a.atttypid END::int8,
		pg_catalog.format_type(a.atttypid, a.atttypmod), a.attnotnull
		FROM pg_catalog.pg_attribute a
		JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
		JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
		WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r','p') AND a.attnum > 0 AND NOT a.attisdropped`, schema, name)
	if err != nil {
		return info, fmt.Errorf("describe table %s: %w", table, err)
	}
	for rows.Next() {
		var oid, typ, base int64
		var col string
		var c catalog.Column
		if err := rows.Scan(&oid, &col, &typ, &base, &c.Type, &c.NotNull); err != nil {
			return info, fmt.Errorf("describe table %s: %w", table, err)
		}
		c.TypeOID, c.BaseOID = uint32(typ), uint32(base)
		info.OID = uint32(oid)
		info.Columns[col] = c
	}
	if err := rows.Err(); err != nil {
		return info, fmt.Errorf("describe table %s: %w", table, err)
	}
	return info, nil
}

// ServerVersion reads the server's version: its major (13 for 13.22) and
// its text (server_version, e.g. "17.6").
func ServerVersion(ctx context.Context, conn *pgx.Conn) (major int, text string, err error) {
	var num int
	if err := conn.QueryRow(ctx, `SELECT current_setting('server_version_num')::int, current_setting('server_version')`).Scan(&num, &text); err != nil {
		return 0, "", fmt.Errorf("read server version: %w", err)
	}
	return num / 10000, text, nil
}

// InRecovery reports whether the server is a standby (in recovery).
func InRecovery(ctx context.Context, conn *pgx.Conn) (bool, error) {
	var rec bool
	if err := conn.QueryRow(ctx, `SELECT pg_catalog.pg_is_in_recovery()`).Scan(&rec); err != nil {
		return false, fmt.Errorf("read pg_is_in_recovery: %w", err)
	}
	return rec, nil
}

// FailoverSlotsMajor is the first PostgreSQL major with failover slots.
const FailoverSlotsMajor = 17

// FailoverMode is the --slot-failover setting.
type FailoverMode string

// The failover modes.
const (
	FailoverAuto FailoverMode = "auto"  // on for PostgreSQL 17+, off before
	FailoverOn   FailoverMode = "true"  // on; an older server is a configuration error
	FailoverOff  FailoverMode = "false" // off: the slot is created without FAILOVER and left as it is
)

// Enabled reports whether the slot should be a failover slot on a server
// of the given major; an error when the mode needs a newer server.
func (m FailoverMode) Enabled(major int, version string) (bool, error) {
	switch m {
	case FailoverOn:
		if major < FailoverSlotsMajor {
			return false, &ServerTooOldError{Feature: "failover slots", Setting: "slot-failover", Value: string(m), Server: version, Need: FailoverSlotsMajor}
		}
		return true, nil
	case FailoverOff:
		return false, nil
	}
	return major >= FailoverSlotsMajor, nil
}
