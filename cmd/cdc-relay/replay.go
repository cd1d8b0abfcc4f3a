package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/decoder"
	"github.com/cdc-relay/cdc-relay/internal/config"
	"github.com/cdc-relay/cdc-relay/publisher"
	recordpkg "github.com/cdc-relay/cdc-relay/record"
	relaypkg "github.com/cdc-relay/cdc-relay/relay"
	"github.com/cdc-relay/cdc-relay/replication"
)

// replayFlags are replay's action flags (config.Replay's Actions): read
// from the command line only, so that an environment variable or a YAML key
// can never start a replay.
type replayFlags struct {
	since, until, fromID, toID string
	dryRun                     bool
}

// replayActions reads the action flags; a valued one given empty is an error.
func replayActions(v *config.Values) (replayFlags, error) {
	rf := replayFlags{dryRun: v.ActionBool("dry-run")}
	for name, dst := range map[string]*string{"since": &rf.since, "until": &rf.until, "from-id": &rf.fromID, "to-id": &rf.toID} {
		if val, given := v.Action(name); given {
			if *dst = strings.TrimSpace(val); *dst == "" {
				return rf, cfgErr(name, "is empty")
			}
		}
	}
	return rf, nil
}

// replayWindow is the resolved selection of rows.
type replayWindow struct {
	since, until   time.Time // zero: unbounded
	fromID, toID   string    // "": unbounded; canonical text
	idCast         string    // "int8" or "uuid"
	idColumn       string
	createdColumn  string
	hasTime, hasID bool
}

// uuidVersion checks that s is a uuid and returns it in lowercase with its
// version (0 when the variant is not RFC 9562's).
func uuidVersion(s string) (string, int, bool) {
	s = strings.ToLower(s)
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return "", 0, false
	}
	for i, c := range s {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			continue
		}
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return "", 0, false
		}
	}
	v, _ := strconv.ParseUint(s[14:15], 16, 8)
	if !strings.ContainsRune("89ab", rune(s[19])) {
		v = 0
	}
	return s, int(v), true
}

// Type oids of the id and created_at columns replay can order by.
const (
	oidInt8        = 20
	oidInt2        = 21
	oidInt4        = 23
	oidUUID        = 2950
	oidTimestamp   = 1114
	oidTimestamptz = 1184
)

// resolveWindow checks the action flags against the table's columns.
func resolveWindow(rf replayFlags, cols decoder.Columns, info replication.TableInfo, now time.Time) (*replayWindow, error) {
	w := &replayWindow{idColumn: cols.ID, createdColumn: cols.CreatedAt}
	if rf.until != "" && rf.since == "" {
		return nil, cfgErr("until", "needs --since: give where the time range starts")
	}
	if rf.toID != "" && rf.fromID == "" {
		return nil, cfgErr("to-id", "needs --from-id: give where the id range starts")
	}
	if rf.since == "" && rf.fromID == "" {
		return nil, cfgErr("since", "replay needs --since TIME or --from-id ID to choose the rows (--until and --to-id only end a range)")
	}
	if rf.since != "" {
		var err error
		if w.since, err = relaypkg.ParseTime("since", rf.since, now); err != nil {
			return nil, err
		}
		if rf.until != "" {
			if w.until, err = relaypkg.ParseTime("until", rf.until, now); err != nil {
				return nil, err
			}
			if !w.until.After(w.since) {
				return nil, cfgErr("until", "%s is not after --since %s", w.until.Format(time.RFC3339Nano), w.since.Format(time.RFC3339Nano))
			}
		}
		col, ok := info.Columns[cols.CreatedAt]
		if cols.CreatedAt == "" || !ok {
			return nil, cfgErr("since", "%s has no created_at column (%q; YAML columns: created_at: names it), so its rows can be chosen only by id: use --from-id and --to-id (Debezium's outbox DDL has no such column)", info.Name, cols.CreatedAt)
		}
		if col.BaseOID != oidTimestamptz && col.BaseOID != oidTimestamp {
			return nil, cfgErr("since", "column %q of %s is of type %s: --since needs a timestamptz or timestamp column (YAML columns: created_at:), or choose the rows by id with --from-id", cols.CreatedAt, info.Name, col.Type)
		}
		w.hasTime = true
	}
	if rf.fromID != "" {
		col, ok := info.Columns[cols.ID]
		if !ok {
			return nil, cfgErr("from-id", "%s has no id column %q: name it in YAML columns: id:", info.Name, cols.ID)
		}
		switch col.BaseOID {
		case oidInt2, oidInt4, oidInt8:
			w.idCast = "int8"
		case oidUUID:
			w.idCast = "uuid"
		default:
			return nil, cfgErr("from-id", "the id column %q of %s is of type %s, whose order is not the order of events: choose the rows by time with --since", cols.ID, info.Name, col.Type)
		}
		bounds := []struct {
			name string
			in   string
			out  *string
		}{{"from-id", rf.fromID, &w.fromID}, {"to-id", rf.toID, &w.toID}}
		for _, b := range bounds {
			if b.in == "" {
				continue
			}
			if w.idCast == "int8" {
				n, err := strconv.ParseInt(b.in, 10, 64)
				if err != nil {
					return nil, cfgErr(b.name, "%q is not an integer, and the id column %q of %s is of type %s", b.in, cols.ID, info.Name, col.Type)
				}
				*b.out = strconv.FormatInt(n, 10)
				continue
			}
			u, version, ok := uuidVersion(b.in)
			switch {
			case !ok:
				return nil, cfgErr(b.name, "%q is not a uuid, and the id column %q of %s is of type uuid", b.in, cols.ID, info.Name)
			case version != 7:
				return nil, cfgErr(b.name, "%s is a version %d uuid, not a UUIDv7: only v7 uuids are ordered by time; random uuids (v4) are not, so a range between two of them is not a range of events. Choose the rows by time with --since and --until instead", u, version)
			}
			*b.out = u
		}
		if w.toID != "" && idLess(w.idCast, w.toID, w.fromID) {
			return nil, cfgErr("to-id", "%s is before --from-id %s", w.toID, w.fromID)
		}
		w.hasID = true
	}
	return w, nil
}

// idLess compares two canonical id bounds.
func idLess(cast, a, b string) bool {
	if cast == "int8" {
		x, _ := strconv.ParseInt(a, 10, 64)
		y, _ := strconv.ParseInt(b, 10, 64)
		return x < y
	}
	return a < b // lowercase canonical uuids sort as their bytes
}

// String describes the selection, for the summary line.
func (w *replayWindow) String() string {
	var parts []string
	if w.hasTime {
		s := w.createdColumn + " >= " + w.since.Format(time.RFC3339Nano)
		if !w.until.IsZero() {
			s += " < " + w.until.Format(time.RFC3339Nano)
		}
		parts = append(parts, s)
	}
	if w.hasID {
		s := w.idColumn + " >= " + w.fromID
		if w.toID != "" {
			s += " <= " + w.toID
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// replayQuery is the SELECT of the rows and where each Row field is in its
// result.
type replayQuery struct {
	sql  string
	args []any
	// Indexes into the result's columns; -1 when the table has none.
	id, aggType, aggID, eventType, payload, headers, createdAt int
	extra                                                      []int
}

// newReplayQuery builds the SELECT for table info with the builder's extra
// columns, in the window's order.
func newReplayQuery(info replication.TableInfo, cols decoder.Columns, extra []string, w *replayWindow) (*replayQuery, error) {
	q := &replayQuery{}
	var names []string
	index := func(name string) int {
		for i, n := range names {
			if n == name {
				return i
			}
		}
		names = append(names, name)
		return len(names) - 1
	}
	required := []struct {
		field, name string
		dst         *int
	}{
		{"id", cols.ID, &q.id}, {"aggregate_type", cols.AggregateType, &q.aggType}, {"aggregate_id", cols.AggregateID, &q.aggID},
		{"event_type", cols.EventType, &q.eventType}, {"payload", cols.Payload, &q.payload},
	}
	for _, r := range required {
		if _, ok := info.Columns[r.name]; !ok {
			return nil, cfgErr("table", "%s has no %s column %q: name it in the YAML columns: mapping (columns: {%s: ...})", info.Name, r.field, r.name, r.field)
		}
		*r.dst = index(r.name)
	}
	q.headers, q.createdAt = -1, -1
	if _, ok := info.Columns[cols.Headers]; ok && cols.Headers != "" {
		q.headers = index(cols.Headers)
	}
	if _, ok := info.Columns[cols.CreatedAt]; ok && cols.CreatedAt != "" {
		q.createdAt = index(cols.CreatedAt)
	}
	for _, name := range extra {
		q.extra = append(q.extra, index(name))
	}
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = pgx.Identifier{n}.Sanitize()
	}
	schema, name := replication.SplitTable(info.Name)
	var where []string
	arg := func(cond, v string) {
		q.args = append(q.args, v)
		where = append(where, fmt.Sprintf(cond, len(q.args)))
	}
	created, id := pgx.Identifier{cols.CreatedAt}.Sanitize(), pgx.Identifier{cols.ID}.Sanitize()
	if w.hasTime {
		arg(created+" >= $%d::timestamptz", w.since.Format(time.RFC3339Nano))
		if !w.until.IsZero() {
			arg(created+" < $%d::timestamptz", w.until.Format(time.RFC3339Nano))
		}
	}
	if w.hasID {
		arg(id+" >= $%d::"+w.idCast, w.fromID)
		if w.toID != "" {
			arg(id+" <= $%d::"+w.idCast, w.toID)
		}
	}
	order := id
	if w.hasTime {
		order = created + ", " + id
	}
	q.sql = fmt.Sprintf("SELECT %s FROM %s WHERE %s ORDER BY %s", strings.Join(quoted, ", "),
		pgx.Identifier{schema, name}.Sanitize(), strings.Join(where, " AND "), order)
	return q, nil
}

// replayFetch is how many rows one FETCH reads: memory stays bounded by it
// and by the in-flight bounds, whatever the window holds.
const replayFetch = 1000

// replayCursor is the cursor's name in the replay's transaction.
const replayCursor = "cdc_relay_replay"

// replayLine is what replay prints of one event once Kafka acknowledged it.
type replayLine struct {
	seq            uint64
	table          int // index into the replay's tables
	id, topic, key string
	reason         string // a dead letter's reason; "" for an event
}

func (l *replayLine) String() string {
	if l.reason != "" {
		return fmt.Sprintf("dead-lettered id=%s topic=%s key=%s reason=%s", l.id, l.topic, l.key, strconv.Quote(l.reason))
	}
	return fmt.Sprintf("published id=%s topic=%s key=%s", l.id, l.topic, l.key)
}

// replayAcker is the publisher session's Acker: it prints the lines of the
// acknowledged events, in order, and bounds what is in flight.
type replayAcker struct {
	out       io.Writer
	maxEvents int
	maxBytes  int64

	mu      sync.Mutex
	pending []replayLine
	events  int
	bytes   int64
	tables  []replayCount // acknowledged events by table
	room    chan struct{}
}

// replayCount is what Kafka acknowledged of one table's events.
type replayCount struct {
	published int // acknowledged events
	dead      int // of them, dead letters
}

var _ publisher.Acker = (*replayAcker)(nil)

func newReplayAcker(out io.Writer, tables, maxEvents int, maxBytes int64) *replayAcker {
	return &replayAcker{out: out, maxEvents: maxEvents, maxBytes: maxBytes, tables: make([]replayCount, tables), room: make(chan struct{}, 1)}
}

// Ack prints the events up to upTo and frees their room.
func (a *replayAcker) Ack(upTo uint64, events int, bytes int64) {
	a.mu.Lock()
	n := 0
	for n < len(a.pending) && a.pending[n].seq <= upTo {
		l := &a.pending[n]
		fmt.Fprintln(a.out, l.String())
		a.tables[l.table].published++
		if l.reason != "" {
			a.tables[l.table].dead++
		}
		n++
	}
	a.pending = append(a.pending[:0], a.pending[n:]...)
	a.events -= events
	a.bytes -= bytes
	a.mu.Unlock()
	select {
	case a.room <- struct{}{}:
	default:
	}
}

// add records an event about to be enqueued.
func (a *replayAcker) add(l replayLine, size int) {
	a.mu.Lock()
	a.pending = append(a.pending, l)
	a.events++
	a.bytes += int64(size)
	a.mu.Unlock()
}

// rejected marks an event the broker refused, which goes to the
// dead-letter topic instead (publisher.Config.Reject).
func (a *replayAcker) rejected(seq uint64, dlq, reason string) {
	a.mu.Lock()
	for i := range a.pending {
		if a.pending[i].seq == seq {
			a.pending[i].topic, a.pending[i].reason = dlq, reason
		}
	}
	a.mu.Unlock()
}

// waitRoom waits until another event fits in the in-flight bounds.
func (a *replayAcker) waitRoom(ctx context.Context, done <-chan struct{}) error {
	for {
		a.mu.Lock()
		full := a.events >= a.maxEvents || a.bytes >= a.maxBytes
		a.mu.Unlock()
		if !full {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-done:
			return errors.New("kafka session stopped")
		case <-a.room:
		}
	}
}

// counts returns the acknowledged events and dead letters of table i.
func (a *replayAcker) counts(i int) (int, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.tables[i].published, a.tables[i].dead
}

// replay is `cdc-relay replay`: re-publish outbox rows chosen by time or id.
func replay(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cfg, v, code, ok := commandConfig(config.Replay, args, getenv, stdout, stderr)
	if !ok {
		return code
	}
	rf, err := replayActions(v)
	if err != nil {
		fmt.Fprintf(stderr, "cdc-relay: %v\n", err)
		return exitConfig
	}
	// With several tables configured, replay reads each of them, in
	// --table order, with the same window.
	if len(cfg.Tables) == 0 {
		fmt.Fprintln(stderr, "cdc-relay: --table: is empty (a table-less outbox of logical messages): such events are kept in no table, so there is nothing to read back; replay needs an outbox table (--table schema.table)")
		return exitConfig
	}
	log := newLogger(cfg, stderr)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	r := &replayer{cfg: cfg, rf: rf, log: log, stdout: stdout, stderr: stderr}
	return r.run(ctx)
}

// replayer holds one replay's state.
type replayer struct {
	cfg            *Config
	rf             replayFlags
	log            *slog.Logger
	stdout, stderr io.Writer
}

// fail reports err in one line and returns its exit code (relay.FailExit).
func (r *replayer) fail(what string, err error) int {
	return relaypkg.FailExit(r.stderr, "cdc-relay: replay failed: ", what, err)
}

// replayTable is one table's part of a replay: its rows, how to select
// them, and the types of the builder's extra columns in it.
type replayTable struct {
	info       replication.TableInfo
	w          *replayWindow
	q          *replayQuery
	extraTypes []uint32
	extraMods  []int32
	read       int // rows read
	dryDead    int // of them, in a dry run, invalid ones
}

func (r *replayer) run(ctx context.Context) int {
	cfg := r.cfg
	su, err := relaypkg.NewSetup(cfg, r.log, false)
	if err != nil {
		fmt.Fprintf(r.stderr, "cdc-relay: %v\n", err)
		return exitConfig
	}

	setupCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := relaypkg.ConnectOutbox(setupCtx, cfg.PGURL)
	if err != nil {
		return r.fail("PostgreSQL", err)
	}
	defer conn.Close(context.Background())
	in, err := relaypkg.Inspect(setupCtx, conn, cfg)
	if err != nil {
		return r.fail("read the catalog", err)
	}
	// Every table's window is checked before anything is published.
	tables := make([]*replayTable, len(in.Tables))
	now := time.Now()
	for i, info := range in.Tables {
		w, err := resolveWindow(r.rf, cfg.Tables[i].Columns, info, now)
		if err != nil {
			return r.fail("", err)
		}
		tables[i] = &replayTable{info: info, w: w}
	}

	builder, err := su.NewBuilder(in)
	if err != nil {
		return r.fail("", err)
	}
	extra := builder.ExtraColumns()
	for i, t := range tables {
		if t.q, err = newReplayQuery(t.info, cfg.Tables[i].Columns, extra, t.w); err != nil {
			return r.fail("", err)
		}
		mods, err := relaypkg.Typmods(setupCtx, conn, t.info.OID)
		if err != nil {
			return r.fail("read the catalog", err)
		}
		t.extraTypes, t.extraMods = make([]uint32, len(extra)), make([]int32, len(extra))
		for j, name := range extra {
			t.extraTypes[j], t.extraMods[j] = t.info.Columns[name].TypeOID, mods[name]
		}
	}
	if err := su.Preflight(setupCtx); err != nil {
		return r.fail("schema registry", err)
	}

	h := &handler{builder: builder, halt: cfg.OnInvalid == "halt", dlq: cfg.DLQTopic, metrics: su.Metrics, log: r.log}
	acker := newReplayAcker(r.stdout, len(tables), cfg.MaxInFlightEvents, cfg.MaxInFlightBytes)
	pub, err := su.NewPublisher(func(rec *publisher.Record, err error) (*publisher.Record, error) {
		dl, rerr := h.rejected(rec, err)
		if rerr == nil {
			acker.rejected(rec.Seq, cfg.DLQTopic, headerText(dl, recordpkg.HeaderError))
		}
		return dl, rerr
	}, nil)
	if err != nil {
		fmt.Fprintf(r.stderr, "cdc-relay: %v\n", err)
		return exitConfig
	}
	defer pub.Close()

	for _, t := range tables {
		r.log.Info("replay", "version", version, "pg_url", Redact(cfg.PGURL), "table", t.info.Name, "rows", t.w.String(),
			"kafka_brokers", cfg.KafkaBrokers, "dry_run", r.rf.dryRun)
	}
	var sess *publisher.Session
	if !r.rf.dryRun {
		sess = pub.NewSession(context.WithoutCancel(ctx), acker)
		defer sess.Close()
	}
	rs := &replayRows{r: r, builder: builder, h: h, acker: acker, sess: sess}
	err = rs.readAll(ctx, conn, tables)
	if sess != nil {
		// Whatever was read is published before the exit, even after a
		// failure or a signal (bounded by --shutdown-timeout then).
		dctx := context.WithoutCancel(ctx)
		if err != nil || ctx.Err() != nil {
			var c context.CancelFunc
			dctx, c = context.WithTimeout(dctx, cfg.ShutdownTimeout)
			defer c()
		}
		if derr := sess.Drain(dctx); derr != nil && err == nil {
			err = fmt.Errorf("wait for Kafka: %w", derr)
		}
		sess.Close() // no Ack prints after this
	}
	if err == nil && ctx.Err() != nil {
		err = errors.New("interrupted by a signal")
	}
	if r.rf.dryRun {
		if err != nil {
			return r.fail("read the outbox", err)
		}
		r.summary(tables, "dry run: would replay %d events (%d to the dead-letter topic) %s; published nothing\n",
			func(_ int, t *replayTable) []int { return []int{t.read, t.dryDead} })
		return exitOK
	}
	if err != nil {
		r.summary(tables, "replay incomplete: %d events acknowledged (%d to the dead-letter topic) of %d read %s\n", func(i int, t *replayTable) []int {
			p, d := acker.counts(i)
			return []int{p, d, t.read}
		})
		return r.fail("", err)
	}
	r.summary(tables, "replayed %d events (%d to the dead-letter topic) %s\n", func(i int, _ *replayTable) []int {
		p, d := acker.counts(i)
		return []int{p, d}
	})
	return exitOK
}

// summary prints one line of format per table, its counts followed by
// "from TABLE, WINDOW"; with several tables, then a line of their totals,
// "from N tables in total".
func (r *replayer) summary(tables []*replayTable, format string, counts func(i int, t *replayTable) []int) {
	var total []int
	line := func(c []int, where string) {
		args := make([]any, 0, len(c)+1)
		for _, n := range c {
			args = append(args, n)
		}
		fmt.Fprintf(r.stdout, format, append(args, where)...)
	}
	for i, t := range tables {
		c := counts(i, t)
		if total == nil {
			total = make([]int, len(c))
		}
		for j, n := range c {
			total[j] += n
		}
		line(c, "from "+t.info.Name+", "+t.w.String())
	}
	if len(tables) > 1 {
		line(total, fmt.Sprintf("from %d tables in total", len(tables)))
	}
}

// headerText is a header's value as text, or "".
func headerText(rec *publisher.Record, key string) string {
	if rec == nil {
		return ""
	}
	for _, hd := range rec.Headers {
		if hd.Key == key {
			return string(hd.Value)
		}
	}
	return ""
}

// replayRows reads the rows through a cursor and hands each record to the
// publisher session (or prints it, in a dry run).
type replayRows struct {
	r       *replayer
	builder *recordpkg.Builder
	h       *handler
	acker   *replayAcker
	sess    *publisher.Session
	t       *replayTable // the table being read
	table   int          // its index
	seq     uint64       // the last record's, across the tables
}

// readAll reads every row of each table's window, one table after the
// other, in one read-only snapshot, counting in each table the rows it
// read and, in a dry run, how many of them are invalid.
func (rs *replayRows) readAll(ctx context.Context, conn *pgx.Conn, tables []*replayTable) error {
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(context.Background())
	for i, t := range tables {
		rs.t, rs.table = t, i
		if err := rs.readTable(ctx, tx); err != nil {
			return err
		}
	}
	return nil
}

// readTable reads the rows of rs.t through the cursor.
func (rs *replayRows) readTable(ctx context.Context, tx pgx.Tx) error {
	t := rs.t
	if _, err := tx.Exec(ctx, "DECLARE "+replayCursor+" NO SCROLL CURSOR FOR "+t.q.sql, t.q.args...); err != nil {
		return fmt.Errorf("declare cursor: %w", err)
	}
	extra := make([][]byte, len(t.q.extra))
	for {
		rows, err := tx.Query(ctx, fmt.Sprintf("FETCH FORWARD %d FROM %s", replayFetch, replayCursor))
		if err != nil {
			return fmt.Errorf("fetch: %w", err)
		}
		n := 0
		for rows.Next() {
			n++
			rs.seq++
			invalid, err := rs.row(ctx, rs.seq, rows.RawValues(), extra)
			if err != nil {
				rows.Close()
				return err
			}
			t.read++
			if invalid {
				t.dryDead++
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("fetch: %w", err)
		}
		if n < replayFetch {
			break
		}
	}
	if _, err := tx.Exec(ctx, "CLOSE "+replayCursor); err != nil {
		return fmt.Errorf("close cursor: %w", err)
	}
	return nil
}

// row turns one result row into its record and hands it over.
func (rs *replayRows) row(ctx context.Context, seq uint64, vals [][]byte, extra [][]byte) (invalid bool, err error) {
	q := rs.t.q
	row := decoder.Row{
		ID: vals[q.id], IDNull: vals[q.id] == nil,
		AggregateType: vals[q.aggType], AggregateTypeNull: vals[q.aggType] == nil,
		AggregateID: vals[q.aggID], AggregateIDNull: vals[q.aggID] == nil,
		EventType: vals[q.eventType], EventTypeNull: vals[q.eventType] == nil,
		Payload: vals[q.payload], PayloadNull: vals[q.payload] == nil,
		RelationID: rs.t.info.OID, ExtraTypes: rs.t.extraTypes, ExtraTypmods: rs.t.extraMods,
	}
	if q.headers >= 0 {
		row.Headers = vals[q.headers]
	}
	if q.createdAt >= 0 {
		row.CreatedAt = vals[q.createdAt]
	}
	for i, x := range q.extra {
		extra[i] = vals[x]
	}
	row.Extra = extra
	size := 0
	for _, v := range vals {
		size += len(v)
	}
	if rs.sess != nil {
		if err := rs.acker.waitRoom(ctx, rs.sess.Done()); err != nil {
			if serr := rs.sess.Err(); serr != nil {
				return false, serr
			}
			return false, err
		}
	}
	rec := publisher.NewRecord()
	rec.Seq, rec.Reserved = seq, size
	// The table keeps no commit time: the record's timestamp (and ce_time)
	// is created_at, unless --timestamp-column gives one.
	inv, err := rs.builder.Build(ctx, rec, createdTime(row.CreatedAt), &row)
	if err != nil {
		publisher.Release(rec)
		return false, err
	}
	line := replayLine{seq: seq, table: rs.table, id: relaypkg.Token(row.ID), topic: rec.Topic, key: relaypkg.Token(rec.Key)}
	if inv != nil {
		line.reason = inv.Reason
		if rs.h.halt && rs.sess != nil {
			publisher.Release(rec)
			return true, replication.Fatal(inv)
		}
		if rs.sess != nil {
			rs.h.invalid(inv, seq)
		}
	}
	if rs.sess == nil {
		publisher.Release(rec)
		fmt.Fprintln(rs.r.stdout, "would be "+line.String())
		return inv != nil, nil
	}
	rs.acker.add(line, size)
	if err := rs.sess.Enqueue(rec); err != nil {
		return inv != nil, err
	}
	return inv != nil, nil
}

// createdTime parses created_at's text (timestamptz under TimeZone UTC, or
// timestamp, read as UTC); the zero time when it is NULL or not a
// timestamp (the builder then uses the time of publishing).
func createdTime(b []byte) time.Time {
	if b == nil {
		return time.Time{}
	}
	for _, layout := range []string{"2006-01-02 15:04:05.999999-07", "2006-01-02 15:04:05.999999-07:00", "2006-01-02 15:04:05.999999"} {
		if t, err := time.Parse(layout, string(b)); err == nil {
			return t.UTC()
		}
	}
	return time.Time{}
}
