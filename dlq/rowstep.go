package dlq

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/decoder"
	recordpkg "github.com/cdc-relay/cdc-relay/record"
	"github.com/cdc-relay/cdc-relay/relay"
	"github.com/cdc-relay/cdc-relay/replication"
)

// rowStep is today's row → record step as dlq redrive runs a dead letter
// through it again, whichever the broker: the settings' schemas, router
// and record builder, the catalog's types of the outbox tables, and
// redrive's own decoder.
type rowStep struct {
	cfg     *relay.Config
	su      *relay.Setup
	builder *recordpkg.Builder
	dec     *decoder.Decoder
	tables  map[string]tableTypes // by "schema.table"
	// relations are the tables by the name their Relation message gives
	// (schema.table, unquoted), which an unconfigured_table letter keeps.
	relations map[string]recordpkg.Relation
}

// tableTypes is what a rebuilt row of one table needs from the catalog.
type tableTypes struct {
	oid   uint32
	types []uint32
	mods  []int32
	// rel is the table as its Relation message would describe it, for an
	// unconfigured_table letter of the table.
	rel recordpkg.Relation
}

// newRowStep reads the schemas and the catalog of the outbox tables and
// builds today's row → record step; lookupOnly (a dry run) registers no
// schema. On failure it prints the reason on stderr and returns the exit
// code, ok false.
func newRowStep(ctx context.Context, cfg *relay.Config, log *slog.Logger, lookupOnly bool, stderr io.Writer) (s *rowStep, code int, ok bool) {
	fail := func(what string, err error) (*rowStep, int, bool) {
		return nil, relay.FailExit(stderr, "cdc-relay dlq redrive failed: ", what, err), false
	}
	su, err := relay.NewSetup(cfg, log, lookupOnly)
	if err != nil {
		fmt.Fprintf(stderr, "cdc-relay: %v\n", err)
		return nil, relay.ExitConfig, false
	}
	setupCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := relay.ConnectOutbox(setupCtx, cfg.PGURL)
	if err != nil {
		return fail("PostgreSQL", err)
	}
	defer conn.Close(context.Background())
	in, err := relay.Inspect(setupCtx, conn, cfg)
	if err != nil {
		return fail("read the catalog", err)
	}
	s = &rowStep{cfg: cfg, su: su, tables: map[string]tableTypes{}, relations: map[string]recordpkg.Relation{}}
	if s.builder, err = su.NewBuilder(in); err != nil {
		return fail("", err)
	}
	extra := s.builder.ExtraColumns()
	for _, info := range in.Tables {
		tt, err := catalogTypes(setupCtx, conn, info, extra)
		if err != nil {
			return fail("read the catalog", err)
		}
		s.tables[info.Name] = tt
		s.relations[tt.rel.Schema+"."+tt.rel.Name] = tt.rel
	}
	// The decoder of the relay's stream: messages, and the rows of
	// unconfigured_table letters whose table is now configured.
	s.dec = decoder.NewDecoder(decoder.Config{Tables: cfg.Tables, MessagePrefix: redrivePrefix, Extra: extra})
	if err := su.Preflight(setupCtx); err != nil {
		return fail("schema registry", err)
	}
	return s, 0, true
}

// rebuild is the row of dead letter l, ready for the builder; an error
// wrapping recordpkg.ErrNotRedrivable says why the letter cannot be built
// again (it lacks what the step needs, or its table is not configured).
func (s *rowStep) rebuild(l *recordpkg.Letter) (*recordpkg.Rebuilt, error) {
	if l.Kind() == recordpkg.ReasonUnconfigured {
		return s.unconfiguredRow(l)
	}
	rb, err := recordpkg.Rebuild(l, s.builder.ExtraColumns(), s.dec, redrivePrefix)
	if err != nil || rb.Row.Message {
		return rb, err
	}
	err = recordpkg.LetterTable(rb, relay.TableNames(s.cfg.Tables))
	if tt, ok := s.tables[rb.Table]; ok {
		rb.Row.RelationID, rb.Row.ExtraTypes, rb.Row.ExtraTypmods = tt.oid, tt.types, tt.mods
	} else if err == nil {
		err = fmt.Errorf("%w: the table of the letter is not known", recordpkg.ErrNotRedrivable)
	}
	return rb, err
}

// unconfiguredRow is the row of an unconfigured_table letter, built as a
// live insert into its table would be, now that the table is configured.
func (s *rowStep) unconfiguredRow(l *recordpkg.Letter) (*recordpkg.Rebuilt, error) {
	ur, err := recordpkg.LetterUnconfigured(l)
	if err != nil {
		return nil, err
	}
	notConfigured := fmt.Errorf("%w: its table %s is not a configured outbox table: add it to --table first (for dlq redrive, and for run so that new rows are events), then run cdc-relay dlq redrive again", recordpkg.ErrNotRedrivable, ur.Table)
	rel, ok := s.relations[ur.Table]
	if !ok {
		return nil, notConfigured
	}
	rb, ok, err := recordpkg.RebuildUnconfigured(l, ur, s.dec, rel)
	if err == nil && !ok {
		err = notConfigured
	}
	return rb, err
}

// catalogTypes reads the type oids and modifiers of the extra columns of
// one outbox table, as its Relation message would carry them.
func catalogTypes(ctx context.Context, conn *pgx.Conn, info replication.TableInfo, extra []string) (tableTypes, error) {
	mods, err := relay.Typmods(ctx, conn, info.OID)
	if err != nil {
		return tableTypes{}, err
	}
	tt := tableTypes{oid: info.OID, types: make([]uint32, len(extra)), mods: make([]int32, len(extra))}
	for i, name := range extra {
		tt.types[i], tt.mods[i] = info.Columns[name].TypeOID, mods[name]
	}
	tt.rel = recordpkg.Relation{OID: info.OID, Types: map[string]recordpkg.ColumnType{}}
	if err := conn.QueryRow(ctx, `SELECT n.nspname, c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE c.oid = $1::int8::oid`, int64(info.OID)).Scan(&tt.rel.Schema, &tt.rel.Name); err != nil {
		return tableTypes{}, fmt.Errorf("read the name of table %s: %w", info.Name, err)
	}
	for name, c := range info.Columns {
		tt.rel.Types[name] = recordpkg.ColumnType{OID: c.TypeOID, Typmod: mods[name]}
	}
	return tt, nil
}
