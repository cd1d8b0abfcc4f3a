package replication

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/cdc-relay/cdc-relay/internal/rawsock"
)

// prepare checks the publication and slot on a normal connection, which it
// returns open, with the slot's state and whether it must be a failover
// slot. Its queries are bounded by setupCtx, except the creation of a missing
// slot on first start, which only ctx (shutdown) ends: it waits for the
// transactions running at that moment, however long they take. On a standby
// it creates nothing and returns ErrWaitingPromotion.
func (s *Stream) prepare(ctx, setupCtx context.Context, createSlot *bool, server Server, rconn *pgconn.PgConn) (*pgx.Conn, SlotInfo, bool, error) {
	ccfg, err := pgx.ParseConfig(s.cfg.URL)
	if err != nil {
		return nil, SlotInfo{}, false, Fatal(fmt.Errorf("parse --pg-url: %w", err))
	}
	configureConn(&ccfg.Config)
	conn, err := pgx.ConnectConfig(setupCtx, ccfg)
	if err != nil {
		return nil, SlotInfo{}, false, connectError("connect", err)
	}
	fail := func(err error) (*pgx.Conn, SlotInfo, bool, error) {
		conn.Close(context.Background())
		return nil, SlotInfo{}, false, err
	}
	major, version, err := ServerVersion(setupCtx, conn)
	if err != nil {
		return fail(err)
	}
	s.stats.serverMajor.Store(int32(major))
	failover, err := s.cfg.SlotFailover.Enabled(major, version)
	if err != nil {
		return fail(Fatal(err))
	}
	if rec, err := InRecovery(setupCtx, conn); err != nil {
		return fail(err)
	} else if rec {
		return fail(fmt.Errorf("%w: %s is in recovery", ErrWaitingPromotion, hostOf(conn)))
	}
	if err := CheckWALLevel(setupCtx, conn); err != nil { // before anything is created
		return fail(err)
	}
	if s.found == nil { // once, on the first connection that gets this far
		in, err := s.deps.Inspect(setupCtx, conn)
		if err != nil {
			return fail(err)
		}
		if in.NewSession == nil {
			return fail(Fatal(errors.New("replication: Deps.Inspect returned no NewSession")))
		}
		s.found = &in
	}
	// The guard decides from the slot as found, before anything is created.
	verdict := VerdictStream
	if *createSlot {
		verdict = VerdictCreate
	}
	var gin GuardInput
	if s.deps.Guard != nil {
		found, exists, err := LookupSlot(setupCtx, conn, s.cfg.Slot)
		if err != nil {
			return fail(err)
		}
		gin = GuardInput{Server: server, Slot: s.cfg.Slot, Info: found, Exists: exists, First: *createSlot,
			History: func(ctx context.Context) ([]TimelineSwitch, error) {
				return TimelineHistory(ctx, rconn, server.Timeline)
			}}
		if verdict, err = s.deps.Guard.Check(setupCtx, gin); err != nil {
			return fail(err)
		}
		if verdict == VerdictCreate && !*createSlot {
			return fail(Fatal(fmt.Errorf("slot %q: %w", s.cfg.Slot, ErrSlotDropped)))
		}
	}
	// Extra tables are refused at start only: one ALTERed in while the
	// relay runs is dead-lettered row by row (handleWAL), and a reconnect
	// must not turn that into an exit.
	var added []string
	created, err := EnsurePublication(setupCtx, conn, s.cfg.Publication, s.tableNames(), PublicationOptions{AllowExtraTables: s.cfg.AllowExtraTables || !*createSlot, Logger: s.log, FirstStart: verdict == VerdictCreate,
		OnAdded: func(table string) { added = append(added, table) }})
	if err != nil {
		return fail(err)
	}
	if verdict == VerdictStream && gin.Exists {
		s.warnJoinedTables(setupCtx, conn, server, added)
	}
	if created {
		s.log.Info("publication created", "publication", s.cfg.Publication, "tables", s.tableNames())
	}
	slotCtx := setupCtx
	if verdict != VerdictStream {
		slotCtx = ctx
	}
	info, created, err := EnsureSlot(slotCtx, conn, s.cfg.Slot, verdict == VerdictCreate, failover)
	var lost *SlotInfo
	if errors.Is(err, ErrSlotLost) && (verdict == VerdictRecreate || s.deps.Guard == nil && s.cfg.RecreateLostSlot) {
		old := info
		lost = &old
		if info, err = RecreateLostSlot(slotCtx, conn, s.cfg.Slot, failover); err != nil {
			return fail(err)
		}
		created = false
		s.log.Error("replication slot was LOST and has been DROPPED AND RECREATED because --recreate-lost-slot is set: "+
			"events committed after the lost slot's confirmed LSN and before the new slot's start may never have been published; "+
			"publish them again from the outbox table with cdc-relay replay (docs/OPERATIONS.md, \"The slot is gone\")",
			"slot", s.cfg.Slot, "lost_confirmed_lsn", old.Confirmed.String(), "new_confirmed_lsn", info.Confirmed.String())
	}
	if err != nil {
		return fail(err)
	}
	if !created && lost == nil && s.createdUnrecorded && s.deps.Guard != nil {
		// This process created the slot on an earlier connection, which
		// failed before the first checkpoint was written: write it now,
		// with a later clock (only more rows, never fewer).
		created = true
	}
	if created {
		s.createdUnrecorded = s.deps.Guard != nil
		// The instant the rows the slot never decodes were created before:
		// an initial replay, or the replay the warning below prints, reaches it.
		if gin.Created, err = DatabaseClock(setupCtx, conn); err != nil {
			return fail(err)
		}
	}
	if s.deps.Guard != nil && (created || lost != nil) {
		if err := s.deps.Guard.SlotCreated(setupCtx, gin, info, lost); err != nil {
			return fail(err)
		}
	}
	s.createdUnrecorded = false
	// From now on a missing slot means events may have been lost (dropped,
	// or a failover to a server without it): never create one again.
	*createSlot = false
	if created {
		s.log.Info("slot created: first start", "slot", s.cfg.Slot, "plugin", "pgoutput", "failover", failover, "confirmed_lsn", info.Confirmed.String())
		if s.deps.InitialReplay == nil {
			s.warnFirstStartRows(setupCtx, conn, gin.Created)
		}
	}
	if !failover && major >= FailoverSlotsMajor && !info.Failover {
		s.log.Warn("the slot is not a failover slot (--slot-failover false): it will not survive a promotion of a standby", "slot", s.cfg.Slot)
	}
	return conn, info, failover, nil
}

// connectError reports a failed connection root cause first (see
// ConnectCause), and marks a failed connection to a standby (a multi-host URL
// with target_session_attrs=read-write or primary found no primary, only
// standbys) as waiting for promotion.
func connectError(what string, err error) error {
	failure := &connectFailure{what: what, err: err}
	if errors.Is(err, pgconn.ErrReadOnlyConnection) || errors.Is(err, pgconn.ErrStandbyConnection) {
		return fmt.Errorf("%w: %w", ErrWaitingPromotion, failure)
	}
	return failure
}

func hostOf(conn *pgx.Conn) string {
	cfg := conn.PgConn().Conn().RemoteAddr()
	if cfg == nil {
		return "the server"
	}
	return cfg.String()
}

// alterFailover turns the slot into a failover slot. It needs the slot
// unused: a slot active in another process is a standby's wait as usual.
func (s *Stream) alterFailover(ctx context.Context, rconn *pgconn.PgConn) error {
	sql := fmt.Sprintf("ALTER_REPLICATION_SLOT %s (FAILOVER true)", pgx.Identifier{s.cfg.Slot}.Sanitize())
	if _, err := rconn.Exec(ctx, sql).ReadAll(); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "55006" {
			return fmt.Errorf("%w: %s", ErrSlotActive, pgErr.Message)
		}
		return fmt.Errorf("turn slot %s into a failover slot: %w", s.cfg.Slot, err)
	}
	s.log.Info("slot turned into a failover slot (ALTER_REPLICATION_SLOT ... FAILOVER true)", "slot", s.cfg.Slot)
	return nil
}

// readTimeoutMargin is what the read timeout keeps above wal_sender_timeout/2.
//
// A healthy walsender answers each status update (every --status-interval,
// each asking for a reply) at once, except while it decodes a large
// transaction that sends nothing: then it sends a keepalive only
// wal_sender_timeout/2 after the last reply it processed. The margin covers
// scheduling delay on a loaded host. It was 15 s; 5 s is enough for that, and
// a larger margin only delays noticing a dead stream (a blackholed
// connection): with wal_sender_timeout = 10 s the relay now notices after
// 10 s instead of 20 s. A false alarm costs one reconnect, never an event.
const readTimeoutMargin = 5 * time.Second

// readTimeout is the configured read timeout, raised to
// wal_sender_timeout/2 + readTimeoutMargin when that is longer.
func (s *Stream) readTimeout(ctx context.Context, conn *pgx.Conn) time.Duration {
	rt := s.cfg.ReadTimeout
	var ms int64
	if err := conn.QueryRow(ctx, `SELECT setting::bigint FROM pg_catalog.pg_settings WHERE name = 'wal_sender_timeout'`).Scan(&ms); err != nil || ms <= 0 {
		return rt
	}
	if need := time.Duration(ms)*time.Millisecond/2 + readTimeoutMargin; rt < need {
		if !s.raisedTimeout {
			s.log.Info("read timeout raised to cover the server's wal_sender_timeout", "read_timeout", need.String(), "wal_sender_timeout_ms", ms)
			s.raisedTimeout = true
		}
		return need
	}
	return rt
}

func (s *Stream) connectReplication(ctx context.Context) (*pgconn.PgConn, error) {
	return ConnectReplication(ctx, s.cfg.URL)
}

// ConnectReplication opens a logical replication connection
// (replication=database) to url, set up as the stream's.
func ConnectReplication(ctx context.Context, url string) (*pgconn.PgConn, error) {
	cfg, err := pgconn.ParseConfig(url)
	if err != nil {
		return nil, Fatal(fmt.Errorf("parse --pg-url: %w", err))
	}
	cfg.RuntimeParams["replication"] = "database"
	// pgoutput writes column values with the walsender's output functions:
	// fix the text forms of dates and timestamps the relay parses.
	cfg.RuntimeParams["DateStyle"] = "ISO"
	cfg.RuntimeParams["TimeZone"] = "UTC"
	configureConn(cfg)
	// The stream's reads and writes skip the runtime's system-call path,
	// which wakes sysmon after every idle spell (internal/rawsock).
	dial := cfg.DialFunc
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return rawsock.Wrap(c), nil
	}
	// Read the stream in large chunks: while draining, the socket holds
	// many messages, and pgproto3's own 8 KB reads would cost a read system
	// call per one or two 4 KB rows.
	// The counter under the buffer tells the reader when a message needed
	// the socket, and so may have waited for it.
	rc := &readCounter{}
	cfg.BuildFrontend = func(r io.Reader, w io.Writer) *pgproto3.Frontend {
		rc.r = r
		return pgproto3.NewFrontend(bufio.NewReaderSize(rc, streamReadBuffer), w)
	}
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, connectError("connect for replication", err)
	}
	conn.CustomData()[readCounterKey] = rc
	return conn, nil
}

// readCounter counts the reads of the replication connection below its
// read buffer: while it does not move, each message came from the buffer
// without waiting, and the reader need not read the clock again (on some
// virtual machines a clock read costs 100 ns, 5% of the relay's CPU at two
// reads per message).
type readCounter struct {
	r io.Reader
	n atomic.Uint64
}

func (c *readCounter) Read(p []byte) (int, error) {
	c.n.Add(1)
	return c.r.Read(p)
}

// readCounterKey is the readCounter's key in the connection's CustomData.
const readCounterKey = "cdc-relay.reads"

// streamReadBuffer is the read buffer of the replication connection.
const streamReadBuffer = 256 << 10
