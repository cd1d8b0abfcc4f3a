package replication

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// TableRows is what the statistics views say of a table's rows; the table
// itself is never read.
type TableRows struct {
	// Name is "schema.table".
	Name string
	// Live is pg_stat_user_tables.n_live_tup, Inserted n_tup_ins: rows
	// inserted since the statistics were last reset.
	Live, Inserted int64
}

// Seems reports whether the table seems to hold rows. It is a heuristic:
// the statistics are reset after a crash (immediate shutdown) and on a
// promoted standby, and pg_stat_reset() clears them, so a table can hold
// rows while both are 0.
func (t TableRows) Seems() bool { return t.Live > 0 || t.Inserted > 0 }

func (t TableRows) String() string {
	return fmt.Sprintf("%s (n_live_tup %d, n_tup_ins %d)", t.Name, t.Live, t.Inserted)
}

// ExistingRows reads pg_stat_user_tables for tables ("schema.table"), never
// the tables themselves, and returns those that seem to hold rows.
func ExistingRows(ctx context.Context, conn *pgx.Conn, tables []string) ([]TableRows, error) {
	var out []TableRows
	for _, t := range tables {
		schema, name := SplitTable(t)
		r := TableRows{Name: schema + "." + name}
		err := conn.QueryRow(ctx, `SELECT coalesce(s.n_live_tup, 0), coalesce(s.n_tup_ins, 0)
			FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
			LEFT JOIN pg_catalog.pg_stat_user_tables s ON s.relid = c.oid
			WHERE n.nspname = $1 AND c.relname = $2`, schema, name).Scan(&r.Live, &r.Inserted)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read pg_stat_user_tables of %s: %w", r.Name, err)
		}
		if r.Seems() {
			out = append(out, r)
		}
	}
	return out, nil
}

// DatabaseClock reads the database's clock (clock_timestamp(), not the
// transaction's start): the instant a replay of the rows written before
// something happened must reach.
func DatabaseClock(ctx context.Context, conn *pgx.Conn) (time.Time, error) {
	var t time.Time
	if err := conn.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&t); err != nil {
		return time.Time{}, fmt.Errorf("read the database clock: %w", err)
	}
	return t.UTC(), nil
}

// ReplaySince is the --since of a replay of every row written before an
// instant: the outbox holds no row older.
const ReplaySince = "1970-01-01T00:00:00Z"

// ReplayCommand is the cdc-relay replay command that publishes the rows of
// tables created before until (created_at < until), every table named.
func ReplayCommand(tables []string, until time.Time) string {
	var b strings.Builder
	b.WriteString("cdc-relay replay")
	for _, t := range tables {
		b.WriteString(" --table " + t)
	}
	b.WriteString(" --since " + ReplaySince + " --until " + until.UTC().Format(time.RFC3339Nano))
	return b.String()
}

// existingRowsHeuristic is what the warnings about rows written before
// the relay could see them say of their source.
const existingRowsHeuristic = "a heuristic from pg_stat_user_tables, whose counts are reset after a crash and on a promoted standby; the tables themselves are never read"

// warnFirstStartRows logs at WARN, on a first start, the configured tables
// that seem to hold rows written before the slot existed: the slot never
// decodes them. until is the database clock read right after the slot's
// creation.
func (s *Stream) warnFirstStartRows(ctx context.Context, conn *pgx.Conn, until time.Time) {
	rows, err := ExistingRows(ctx, conn, s.tableNames())
	if err != nil {
		s.log.Warn("first start: could not read pg_stat_user_tables to tell whether the outbox tables held rows before the slot existed", "err", err.Error())
		return
	}
	if len(rows) == 0 {
		return
	}
	seems := make([]string, len(rows))
	for i, r := range rows {
		seems[i] = r.String()
	}
	s.log.Warn("first start: "+strings.Join(seems, ", ")+" seem to hold rows written before the slot existed ("+existingRowsHeuristic+"); "+
		"the slot never decodes them. To publish them, run (with run's other settings): "+ReplayCommand(s.tableNames(), until)+
		"; or start with --initial-replay, which does it before streaming",
		"slot", s.cfg.Slot, "until", until.Format(time.RFC3339Nano))
}

// JoinedRows says what becomes of the rows written to a table before it
// joined the publication at until (the database clock read right after),
// with the statistics' hint (t) and the replay command that publishes them.
func JoinedRows(t TableRows, until time.Time) string {
	seems := t.Name + " seems to hold no rows (" + existingRowsHeuristic + ")"
	if t.Seems() {
		seems = t.String() + " seems to hold rows (" + existingRowsHeuristic + ")"
	}
	return seems + "; rows written to it before it joined the publication are never decoded: publish them with (and run's other settings) " +
		ReplayCommand([]string{t.Name}, until)
}

// warnJoinedTables logs at WARN, once per process, each configured table
// that is not among the tables of the relay's last checkpoint (it joined
// later) and seems to hold rows, unless the relay added it to the
// publication just now (EnsurePublication warned then): its rows from
// before it joined the publication were never decoded. The instant it
// joined is not known, so the replay command's --until is the database
// clock now; the rows since then come twice, none is missed.
func (s *Stream) warnJoinedTables(ctx context.Context, conn *pgx.Conn, server Server, added []string) {
	kt, ok := s.deps.Guard.(KnownTablesGuard)
	if !ok || s.joinedWarned {
		return
	}
	known, ok := kt.KnownTables(server)
	if !ok {
		return
	}
	s.joinedWarned = true
	seen := map[string]bool{}
	for _, t := range append(known, added...) {
		schema, name := SplitTable(t)
		seen[schema+"."+name] = true
	}
	var joined []string
	for _, t := range s.tableNames() {
		if schema, name := SplitTable(t); !seen[schema+"."+name] {
			joined = append(joined, t)
		}
	}
	if len(joined) == 0 {
		return
	}
	rows, err := ExistingRows(ctx, conn, joined)
	if err != nil || len(rows) == 0 {
		return
	}
	until, err := DatabaseClock(ctx, conn)
	if err != nil {
		return
	}
	for _, r := range rows {
		s.log.Warn("a configured outbox table that the last checkpoint did not list joined since (--table and the publication): "+JoinedRows(r, until)+
			" (--until is now, as the instant it joined is not known: the rows since then come twice, which consumers drop by id)",
			"table", r.Name, "until", until.Format(time.RFC3339Nano))
	}
}
