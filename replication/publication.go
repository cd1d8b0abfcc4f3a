package replication

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// PublicationError is a publication that publishes other tables than the
// configured outbox tables, or lacks one the relay cannot add itself. It is
// a configuration error: the relay exits with code 2.
type PublicationError struct {
	Publication string
	// Reason says what is wrong and the statement or setting that fixes it.
	Reason string
}

func (e *PublicationError) Error() string { return e.Reason }

// PublicationOptions are the settings EnsurePublication applies.
type PublicationOptions struct {
	// AllowExtraTables accepts a publication that publishes tables other
	// than the outbox tables (FOR ALL TABLES, TABLES IN SCHEMA, or a
	// table list with more tables); the stream skips their rows. Default
	// false: such a publication is a *PublicationError.
	AllowExtraTables bool
	// Logger receives the warning when a missing table is added. Default
	// slog.Default().
	Logger *slog.Logger
	// FirstStart is set when the slot is about to be created: the rows of
	// a table added now are covered by the first start's own warning (or
	// --initial-replay), which reaches the slot's creation.
	FirstStart bool
	// OnAdded, when set, is called with each configured table the relay
	// added to the publication.
	OnAdded func(table string)
}

// PublicationDrift is how an existing publication differs from the
// configured outbox tables.
type PublicationDrift struct {
	// AllTables is true for a FOR ALL TABLES publication.
	AllTables bool
	// Schemas are the schemas of FOR TABLES IN SCHEMA (PostgreSQL 15+).
	Schemas []string
	// Extra are tables the publication lists that are not configured
	// ("schema.table"; partitions of a configured table are not counted).
	Extra []string
	// Missing are configured tables the publication does not publish.
	Missing []MissingTable
	// Filtered are configured tables the publication lists with a row
	// filter (FOR TABLE t WHERE (...), PostgreSQL 15+): "schema.table" and
	// the filter. Rows that do not match are never decoded.
	Filtered [][2]string
	// Owner is the publication's owner.
	Owner string
	// Role is the relay's role (current_user).
	Role string
}

// MissingTable is a configured table a publication does not publish.
type MissingTable struct {
	// Name is "schema.table".
	Name string
	// CanAdd is true when the relay's role has the privileges of the
	// owners of both the publication and the table, so that it can run
	// ALTER PUBLICATION … ADD TABLE.
	CanAdd bool
	// Owner is the table's owner.
	Owner string
	// Inserts is pg_stat_user_tables.n_tup_ins: rows inserted since the
	// statistics were last reset. Rows inserted before the table joined the
	// publication are never decoded.
	Inserts int64
	// Live is pg_stat_user_tables.n_live_tup.
	Live int64
	// Partitioned is true for a partitioned table in a publication with
	// publish_via_partition_root = false: adding it would not help (see
	// CheckPublication).
	Partitioned bool
}

// Extras reports whether the publication publishes tables that are not
// configured.
func (d *PublicationDrift) Extras() bool {
	return d.AllTables || len(d.Schemas) > 0 || len(d.Extra) > 0
}

// DescribeDrift compares the existing publication with the configured
// tables ("schema.table"), from the catalog and the statistics views (never
// the tables themselves).
func DescribeDrift(ctx context.Context, conn *pgx.Conn, publication string, tables []string) (PublicationDrift, error) {
	var d PublicationDrift
	var oid int64
	var viaRoot bool
	if err := conn.QueryRow(ctx, `SELECT p.oid::int8, p.puballtables, p.pubviaroot, pg_catalog.pg_get_userbyid(p.pubowner), current_user
		FROM pg_catalog.pg_publication p WHERE p.pubname = $1`, publication).Scan(&oid, &d.AllTables, &viaRoot, &d.Owner, &d.Role); err != nil {
		return d, fmt.Errorf("look up publication %s: %w", publication, err)
	}
	configured := make(map[string]bool, len(tables))
	for _, t := range tables {
		schema, name := SplitTable(t)
		configured[schema+"."+name] = true
	}
	// Tables listed FOR TABLE; a partition counts as its root's.
	rows, err := conn.Query(ctx, `SELECT n.nspname, c.relname, rn.nspname, r.relname
		FROM pg_catalog.pg_publication_rel pr
		JOIN pg_catalog.pg_class c ON c.oid = pr.prrelid
		JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		JOIN pg_catalog.pg_class r ON r.oid = coalesce(pg_catalog.pg_partition_root(c.oid), c.oid)
		JOIN pg_catalog.pg_namespace rn ON rn.oid = r.relnamespace
		WHERE pr.prpubid = $1 ORDER BY 1, 2`, oid)
	if err != nil {
		return d, fmt.Errorf("list publication %s tables: %w", publication, err)
	}
	for rows.Next() {
		var schema, name, rootSchema, root string
		if err := rows.Scan(&schema, &name, &rootSchema, &root); err != nil {
			return d, fmt.Errorf("list publication %s tables: %w", publication, err)
		}
		if !configured[schema+"."+name] && !configured[rootSchema+"."+root] {
			d.Extra = append(d.Extra, schema+"."+name)
		}
	}
	if err := rows.Err(); err != nil {
		return d, fmt.Errorf("list publication %s tables: %w", publication, err)
	}
	// Row filters exist from PostgreSQL 15 on.
	var hasFilters bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute
		WHERE attrelid = 'pg_catalog.pg_publication_rel'::regclass AND attname = 'prqual')`).Scan(&hasFilters); err != nil {
		return d, fmt.Errorf("look up publication %s row filters: %w", publication, err)
	}
	if hasFilters {
		rows, err := conn.Query(ctx, `SELECT n.nspname, c.relname, pg_catalog.pg_get_expr(pr.prqual, pr.prrelid)
			FROM pg_catalog.pg_publication_rel pr
			JOIN pg_catalog.pg_class c ON c.oid = pr.prrelid
			JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
			WHERE pr.prpubid = $1 AND pr.prqual IS NOT NULL ORDER BY 1, 2`, oid)
		if err != nil {
			return d, fmt.Errorf("look up publication %s row filters: %w", publication, err)
		}
		for rows.Next() {
			var schema, name, where string
			if err := rows.Scan(&schema, &name, &where); err != nil {
				return d, fmt.Errorf("look up publication %s row filters: %w", publication, err)
			}
			if configured[schema+"."+name] {
				d.Filtered = append(d.Filtered, [2]string{schema + "." + name, where})
			}
		}
		if err := rows.Err(); err != nil {
			return d, fmt.Errorf("look up publication %s row filters: %w", publication, err)
		}
	}
	// FOR TABLES IN SCHEMA exists from PostgreSQL 15 on.
	var hasSchemas bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('pg_catalog.pg_publication_namespace') IS NOT NULL`).Scan(&hasSchemas); err != nil {
		return d, fmt.Errorf("look up publication %s schemas: %w", publication, err)
	}
	if hasSchemas {
		rows, err := conn.Query(ctx, `SELECT n.nspname FROM pg_catalog.pg_publication_namespace pn
			JOIN pg_catalog.pg_namespace n ON n.oid = pn.pnnspid WHERE pn.pnpubid = $1 ORDER BY 1`, oid)
		if err != nil {
			return d, fmt.Errorf("look up publication %s schemas: %w", publication, err)
		}
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				return d, fmt.Errorf("look up publication %s schemas: %w", publication, err)
			}
			d.Schemas = append(d.Schemas, s)
		}
		if err := rows.Err(); err != nil {
			return d, fmt.Errorf("look up publication %s schemas: %w", publication, err)
		}
	}
	for _, t := range tables {
		schema, name := SplitTable(t)
		m := MissingTable{Name: schema + "." + name}
		var published, partitioned, ownsPub, ownsTable bool
		if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_publication_tables
				WHERE pubname = $1 AND schemaname = $2 AND tablename = $3),
			c.relkind = 'p', pg_catalog.pg_get_userbyid(c.relowner),
			pg_catalog.pg_has_role((SELECT pubowner FROM pg_catalog.pg_publication WHERE pubname = $1), 'USAGE'),
			pg_catalog.pg_has_role(c.relowner, 'USAGE'),
			coalesce((SELECT s.n_tup_ins FROM pg_catalog.pg_stat_user_tables s WHERE s.relid = c.oid), 0),
			coalesce((SELECT s.n_live_tup FROM pg_catalog.pg_stat_user_tables s WHERE s.relid = c.oid), 0)
			FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = $2 AND c.relname = $3`, publication, schema, name).
			Scan(&published, &partitioned, &m.Owner, &ownsPub, &ownsTable, &m.Inserts, &m.Live); errors.Is(err, pgx.ErrNoRows) {
			continue // no such table: EnsurePublication and check say so
		} else if err != nil {
			return d, fmt.Errorf("look up table %s in publication %s: %w", m.Name, publication, err)
		}
		if published {
			continue
		}
		m.Partitioned = partitioned && !viaRoot
		m.CanAdd = ownsPub && ownsTable && !d.AllTables && !m.Partitioned
		d.Missing = append(d.Missing, m)
	}
	return d, nil
}

// ExtrasError says why a publication that publishes tables other than the
// configured ones is refused, and what fixes it; nil when it publishes no
// other table.
func (d *PublicationDrift) ExtrasError(publication string, tables []string) error {
	pub := pgx.Identifier{publication}.Sanitize()
	outbox := "CREATE PUBLICATION cdc_relay FOR TABLE " + strings.Join(quoteTables(tables), ", ") +
		" WITH (publish = 'insert', publish_via_partition_root = true) and set --publication cdc_relay"
	if len(tables) == 0 {
		outbox = "CREATE PUBLICATION cdc_relay (for no table: logical messages need no table) and set --publication cdc_relay"
	}
	var what string
	switch {
	case d.AllTables:
		what = "is FOR ALL TABLES: it publishes the rows of every table"
	case len(d.Schemas) > 0:
		what = "is FOR TABLES IN SCHEMA " + strings.Join(d.Schemas, ", ") + ": it publishes the rows of every table in " + plural(len(d.Schemas), "that schema", "those schemas")
	case len(d.Extra) > 0:
		configured := "no table (--table '')"
		if len(tables) > 0 {
			configured = strings.Join(tables, ", ")
		}
		flags := make([]string, 0, len(tables)+len(d.Extra))
		for _, t := range append(slices.Clone(tables), d.Extra...) {
			flags = append(flags, "--table "+t)
		}
		return &PublicationError{Publication: publication, Reason: fmt.Sprintf(
			"publication %s publishes %s %s, which %s not configured (the relay is configured for %s): the relay would not publish %s rows as events; "+
				"run ALTER PUBLICATION %s DROP TABLE %s, or configure %s as %s (%s), or set --allow-extra-tables to skip and count %s rows",
			publication, plural(len(d.Extra), "table", "tables"), strings.Join(d.Extra, ", "), plural(len(d.Extra), "is", "are"), configured,
			plural(len(d.Extra), "its", "their"), pub, strings.Join(quoteTables(d.Extra), ", "), plural(len(d.Extra), "it", "them"),
			plural(len(d.Extra), "an outbox table", "outbox tables"), strings.Join(flags, " "), plural(len(d.Extra), "its", "their"))}
	default:
		return nil
	}
	return &PublicationError{Publication: publication, Reason: fmt.Sprintf(
		"publication %s %s, not only the outbox tables: set --allow-extra-tables to skip and count the other tables' rows (cdc_relay_skipped_rows_total), "+
			"or use a publication of the outbox tables alone: %s", publication, what, outbox)}
}

// FilterError says that the publication filters the rows of an outbox
// table, and how to publish all of them; nil when it filters none.
func (d *PublicationDrift) FilterError(publication string) error {
	if len(d.Filtered) == 0 {
		return nil
	}
	table, where := d.Filtered[0][0], d.Filtered[0][1]
	q := quoteTables([]string{table})[0]
	pub := pgx.Identifier{publication}.Sanitize()
	return &PublicationError{Publication: publication, Reason: fmt.Sprintf(
		"publication %s publishes only the rows of outbox table %s that match WHERE %s: the others are never decoded; publish all of them, in one transaction so that no row falls between: "+
			"BEGIN; ALTER PUBLICATION %s DROP TABLE %s; ALTER PUBLICATION %s ADD TABLE %s; COMMIT;",
		publication, table, where, pub, q, pub, q)}
}

// MissingError says that table is not published and gives the exact
// statement that adds it.
func (d *PublicationDrift) MissingError(publication string, m MissingTable) error {
	who := fmt.Sprintf("the relay's role %s does not own both the publication (owner %s) and the table (owner %s)", d.Role, d.Owner, m.Owner)
	if d.AllTables {
		who = "the publication is FOR ALL TABLES"
	}
	return &PublicationError{Publication: publication, Reason: fmt.Sprintf(
		"publication %s does not publish %s, and the relay cannot add it (%s): run %s as their owner, or set --publication; %s",
		publication, m.Name, who, AddTableStatement(publication, m.Name), NeverDecoded(m.Name))}
}

// AddTableStatement is the statement that adds table to publication.
func AddTableStatement(publication, table string) string {
	return "ALTER PUBLICATION " + pgx.Identifier{publication}.Sanitize() + " ADD TABLE " + quoteTables([]string{table})[0]
}

// NeverDecoded says what becomes of the rows written to table before it
// joined the publication.
func NeverDecoded(table string) string {
	return "rows written to " + table + " before it joined the publication are never decoded: publish them with cdc-relay replay --table " + table + " --since TIME"
}

// EnsurePublication creates the publication FOR TABLE <tables> WITH (publish
// = 'insert', publish_via_partition_root = true) when it does not exist (an
// empty publication for no tables), and checks that an existing one
// publishes exactly the tables and their inserts. A publication that
// publishes other tables too is a *PublicationError unless
// opts.AllowExtraTables is set. A configured table the publication lacks is
// added (ALTER PUBLICATION … ADD TABLE, logged at WARN) when the relay's
// role owns both; otherwise it is a *PublicationError giving the statement.
// It reports whether it created the publication.
func EnsurePublication(ctx context.Context, conn *pgx.Conn, publication string, tables []string, opts PublicationOptions) (created bool, err error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	idents := make([]string, len(tables))
	for i, table := range tables {
		schema, name := SplitTable(table)
		var exists bool
		if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r','p'))`, schema, name).Scan(&exists); err != nil {
			return false, fmt.Errorf("look up table %s: %w", table, err)
		}
		if !exists {
			return false, fmt.Errorf("outbox table %s.%s does not exist: create it (see docs/outbox.sql) or set --table", schema, name)
		}
		idents[i] = pgx.Identifier{schema, name}.Sanitize()
	}
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_publication WHERE pubname = $1)`, publication).Scan(&exists); err != nil {
		return false, fmt.Errorf("look up publication %s: %w", publication, err)
	}
	if !exists {
		// publish_via_partition_root makes a partitioned outbox's rows arrive
		// under the root table; it changes nothing for a plain table.
		sql := fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE %s WITH (publish = 'insert', publish_via_partition_root = true)",
			pgx.Identifier{publication}.Sanitize(), strings.Join(idents, ", "))
		if len(tables) == 0 {
			// A table-less outbox: pgoutput needs a publication, and
			// logical messages are not filtered by one.
			sql = "CREATE PUBLICATION " + pgx.Identifier{publication}.Sanitize()
		}
		_, err := conn.Exec(ctx, sql)
		var pgErr *pgconn.PgError
		switch {
		case err == nil:
			created = true
		case errors.As(err, &pgErr) && (pgErr.Code == "42710" || pgErr.Code == "23505"): // created concurrently by a peer
		default:
			return false, fmt.Errorf("create publication %s: %w", publication, err)
		}
	}
	drift, err := DescribeDrift(ctx, conn, publication, tables)
	if err != nil {
		return created, err
	}
	if err := drift.FilterError(publication); err != nil {
		return created, Fatal(err)
	}
	if !opts.AllowExtraTables {
		if err := drift.ExtrasError(publication, tables); err != nil {
			return created, Fatal(err)
		}
	}
	for _, m := range drift.Missing {
		if m.Partitioned {
			continue // CheckPublication says why
		}
		if !m.CanAdd {
			return created, Fatal(drift.MissingError(publication, m))
		}
		stmt := AddTableStatement(publication, m.Name)
		_, err := conn.Exec(ctx, stmt)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42710" { // a peer added it first
			continue
		}
		if err != nil {
			return created, Fatal(&PublicationError{Publication: publication, Reason: fmt.Sprintf(
				"publication %s does not publish %s and adding it failed (%v): run %s as the owner of both, or set --publication; %s",
				publication, m.Name, err, stmt, NeverDecoded(m.Name))})
		}
		if opts.OnAdded != nil {
			opts.OnAdded(m.Name)
		}
		if opts.FirstStart {
			log.Warn("the publication did not publish a configured outbox table: the relay added it; the rows written to it before are those of the first start (see below)",
				"publication", publication, "table", m.Name, "statement", stmt)
			continue
		}
		until, err := DatabaseClock(ctx, conn)
		if err != nil {
			return created, err
		}
		log.Warn("the publication did not publish a configured outbox table: the relay added it; "+JoinedRows(TableRows{Name: m.Name, Live: m.Live, Inserted: m.Inserts}, until),
			"publication", publication, "table", m.Name, "statement", stmt, "until", until.Format(time.RFC3339Nano))
	}
	for _, table := range tables {
		if err := CheckPublication(ctx, conn, publication, table); err != nil {
			return created, Fatal(err)
		}
	}
	return created, nil
}

func quoteTables(tables []string) []string {
	q := make([]string, len(tables))
	for i, t := range tables {
		schema, name := SplitTable(t)
		q[i] = pgx.Identifier{schema, name}.Sanitize()
	}
	return q
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// skipRow reports a row of another table skipped under AllowExtraTables.
//
// Without AllowExtraTables such a row goes to the session, and from there to
// the dead-letter topic, and never halts the stream: pgoutput decides what
// is published from the catalog as of each change, so rows already in the
// WAL keep coming after the publication is fixed, and a halt would halt
// again on the same row at every restart.
func (s *Stream) skipRow(table string) {
	if s.deps.OnSkippedRow != nil {
		s.deps.OnSkippedRow(table)
	}
}
