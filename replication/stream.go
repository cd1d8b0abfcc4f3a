package replication

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/cdc-relay/cdc-relay/decoder"
	"github.com/cdc-relay/cdc-relay/internal/backoff"
)

// Stream reads the slot and hands outbox rows to sessions, reconnecting with
// backoff until its context ends or a fatal error halts it.
type Stream struct {
	cfg        Config
	newSession NewSessionFunc
	log        *slog.Logger
	stats      Stats

	raisedTimeout bool
}

// NewStream returns a stream; Run starts it.
func NewStream(cfg Config, newSession NewSessionFunc) *Stream {
	cfg.setDefaults()
	s := &Stream{cfg: cfg, newSession: newSession, log: cfg.Logger}
	s.stats.hosts = Hosts(cfg.URL)
	return s
}

// Stats returns the stream's live figures.
func (s *Stream) Stats() *Stats { return &s.stats }

// Run streams until ctx ends (returning nil after a clean drain and a final
// status update) or a fatal error (returned).
func (s *Stream) Run(ctx context.Context) error {
	bo := backoff.Backoff{Min: 250 * time.Millisecond, Max: 5 * time.Second}
	createSlot := true
	logged := map[string]bool{} // the distinct errors logged since the last progress
	for {
		progressed, err := s.connectAndStream(ctx, &createSlot)
		if ctx.Err() != nil && !IsFatal(err) {
			s.stats.state.Store(int32(StateStopped))
			s.log.Info("shutdown", "final_lsn", s.stats.Confirmed().String())
			return nil
		}
		if IsFatal(err) {
			cause := err.Error()
			s.stats.haltCause.Store(&cause)
			s.stats.state.Store(int32(StateHalted))
			s.log.Error("halt", "cause", err.Error(), "confirmed_lsn", s.stats.Confirmed().String())
			return err
		}
		if u := s.unrecoverable(err); u != nil {
			return u
		}
		if progressed {
			bo.Reset()
			clear(logged)
		}
		if errors.Is(err, ErrWaitingPromotion) {
			if s.stats.State() != StateWaiting {
				s.log.Info("standby: waiting for promotion; the relay retries and never creates a slot on a standby", "slot", s.cfg.Slot, "detail", err.Error())
			} else {
				s.log.Debug("standby: still waiting for promotion", "attempts", bo.Attempts()+1, "detail", err.Error())
			}
			s.stats.state.Store(int32(StateWaiting))
			bo.Max = waitingRetryMax
		} else if errors.Is(err, ErrSlotActive) {
			if s.stats.State() != StateStandby {
				s.log.Info("standby: slot is active in another process; retrying", "slot", s.cfg.Slot)
			} else {
				s.log.Debug("standby: slot still active", "slot", s.cfg.Slot, "attempts", bo.Attempts()+1)
			}
			s.stats.state.Store(int32(StateStandby))
			bo.Max = standbyRetryMax
		} else {
			cause := classify(err)
			s.stats.countReconnect(cause)
			s.stats.state.Store(int32(StateReconnecting))
			bo.Max = 5 * time.Second
			// Each distinct error once: a retry loop repeats the same one.
			if key := errorKey(cause, err); !logged[key] {
				if len(logged) >= maxLoggedErrors {
					clear(logged)
				}
				logged[key] = true
				s.log.Warn("reconnect", "cause", cause, "err", err.Error(), "consecutive_errors", bo.Attempts()+1)
			} else {
				s.log.Debug("reconnect: the same error again", "cause", cause, "err", err.Error(), "consecutive_errors", bo.Attempts()+1)
			}
		}
		if bo.Wait(ctx) != nil {
			s.stats.state.Store(int32(StateStopped))
			s.log.Info("shutdown", "final_lsn", s.stats.Confirmed().String())
			return nil
		}
	}
}

// classify names an error's cause for logs and metrics.
func classify(err error) string {
	var pgErr *pgconn.PgError
	var netErr net.Error
	switch {
	case errors.Is(err, errStreamSilent):
		return "read_timeout"
	case errors.Is(err, errSession), errors.Is(err, ErrCheckpointUnavailable):
		return "kafka"
	case errors.As(err, &pgErr):
		return "postgres_error"
	case errors.As(err, &netErr), errors.Is(err, net.ErrClosed):
		return "network"
	}
	return "other"
}

// waitingRetryMax caps the wait between attempts while no host is a
// primary: with jitter the relay tries again at least every 1.2 s, and so
// streams soon after a promotion.
const waitingRetryMax = time.Second

// standbyRetryMax caps a standby's wait between attempts. The backoff adds
// up to 20 % jitter, so a standby tries again at least every 2 s (1.92 s
// plus the attempt itself) and takes over soon after the slot is released.
const standbyRetryMax = 1600 * time.Millisecond

var (
	errStreamSilent = errors.New("no message from PostgreSQL within the read timeout: stream considered dead")
	errSession      = errors.New("session failed")
)

// progressAfter is how long a connection must stream before a failure
// counts as a fresh one (backoff reset) even without confirmed progress.
const progressAfter = 30 * time.Second

// connectAndStream runs one connection. progressed reports whether it got
// anywhere: the confirmed LSN moved or it streamed for progressAfter.
func (s *Stream) connectAndStream(ctx context.Context, createSlot *bool) (progressed bool, err error) {
	// Everything up to streaming is bounded (see dial.go): on a blackholed
	// connection a query would otherwise wait forever.
	setupCtx, cancelSetup := context.WithTimeout(ctx, setupTimeout)
	defer cancelSetup()
	rconn, err := s.connectReplication(setupCtx)
	if err != nil {
		return false, err
	}
	defer rconn.Close(context.Background())
	server, err := Identify(setupCtx, rconn)
	if err != nil {
		return false, err
	}
	conn, prepared, failover, err := s.prepare(ctx, setupCtx, createSlot, server, rconn)
	if err != nil {
		return false, err
	}
	defer conn.Close(context.Background())
	s.stats.server.Store(&server)
	readTimeout := s.readTimeout(setupCtx, conn)
	if failover && !prepared.Failover {
		if err := s.alterFailover(setupCtx, rconn); err != nil {
			return false, err
		}
	}

	// The publication name is quoted so that its case survives.
	pluginArgs := []string{"proto_version '1'", fmt.Sprintf(`publication_names '"%s"'`, s.cfg.Publication)}
	if s.cfg.MessagePrefix != "" {
		pluginArgs = append(pluginArgs, "messages 'true'")
	}
	if err := pglogrepl.StartReplication(setupCtx, rconn, s.cfg.Slot, 0, pglogrepl.StartReplicationOptions{PluginArgs: pluginArgs}); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "55006" {
			return false, fmt.Errorf("%w: %s", ErrSlotActive, pgErr.Message)
		}
		if errors.As(err, &pgErr) && pgErr.Code == "42704" {
			return false, Fatal(fmt.Errorf("slot %q: %w", s.cfg.Slot, ErrSlotDropped))
		}
		if errors.As(err, &pgErr) && pgErr.Code == "55000" {
			// A synchronised slot on a standby: usable only after promotion.
			return false, fmt.Errorf("%w: %s", ErrWaitingPromotion, pgErr.Message)
		}
		return false, fmt.Errorf("start replication: %w", err)
	}
	// Read the slot only now that this instance holds it: a previous holder
	// may have confirmed more just before it let go, and confirming less
	// would move the slot backwards.
	info, ok, err := LookupSlot(setupCtx, conn, s.cfg.Slot)
	if err != nil {
		return false, err
	}
	if !ok {
		return false, Fatal(fmt.Errorf("slot %q: %w", s.cfg.Slot, ErrSlotDropped))
	}
	conn.Close(context.Background())
	cancelSetup()
	s.stats.slotFailover.Store(info.Failover)
	if s.stats.State() == StateWaiting {
		s.log.Info("promoted: the server is a primary now", "slot", s.cfg.Slot)
	}
	if s.stats.State() == StateStandby {
		s.log.Info("takeover: this instance now holds the slot", "slot", s.cfg.Slot)
	}
	s.stats.state.Store(int32(StateStreaming))
	s.stats.confirmed.Store(uint64(info.Confirmed))
	s.log.Info("streaming", "slot", s.cfg.Slot, "publication", s.cfg.Publication, "from_lsn", info.Confirmed.String())
	started := time.Now()

	tr := NewTracker(info.Confirmed, s.cfg.MaxInFlightEvents, s.cfg.MaxInFlightBytes)
	s.stats.tracker.Store(tr)
	defer func() { progressed = tr.Confirmed() > info.Confirmed || time.Since(started) >= progressAfter }()
	sessCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sess, err := s.newSession(sessCtx, tr)
	if err != nil {
		return false, fmt.Errorf("%w: %w", errSession, err)
	}
	defer sess.Close()

	r := reader{s: s, conn: rconn, tr: tr, sess: sess, dec: decoder.NewDecoder(decoder.Config{Tables: s.cfg.Tables, Extra: s.cfg.ExtraColumns, MessagePrefix: s.cfg.MessagePrefix, OtherTables: true}), readTimeout: readTimeout}
	// Wake a blocked read when shutdown starts, and when Kafka's
	// acknowledgements moved the confirmed LSN, so that it is reported
	// within minStatusGap instead of at the next status tick.
	stopWake := context.AfterFunc(ctx, func() { rconn.Conn().SetReadDeadline(time.Now()) })
	wakeCtx, stopWaker := context.WithCancel(context.Background())
	wakerDone := make(chan struct{})
	go func() {
		defer close(wakerDone)
		wakeOnProgress(wakeCtx, tr, rconn)
	}()
	err = r.loop(ctx)
	stopWaker()
	<-wakerDone
	stopWake()
	if ctx.Err() != nil || IsFatal(err) {
		r.drain()
	}
	return false, err
}

// drain lets Kafka acknowledge what is in flight, within DrainTimeout,
// keeping PostgreSQL informed, then sends the final status update with the
// final contiguous prefix.
func (r *reader) drain() {
	deadline := time.Now().Add(r.s.cfg.DrainTimeout)
	for {
		step := min(time.Until(deadline), r.s.cfg.StatusInterval)
		dctx, cancel := context.WithTimeout(context.Background(), step)
		err := r.sess.Drain(dctx)
		cancel()
		if err == nil {
			break
		}
		if !time.Now().Before(deadline) || r.sess.Err() != nil {
			r.s.log.Warn("drain incomplete; unacknowledged events will be sent again after restart", "err", err.Error())
			break
		}
		if serr := r.sendStatus(false); serr != nil {
			r.s.log.Warn("status update during drain failed", "err", serr.Error())
			return
		}
	}
	if err := r.sendStatus(false); err != nil {
		r.s.log.Warn("final status update failed", "err", err.Error())
		return
	}
	// End the copy cleanly: the server answers CopyDone only after it has
	// processed the status update before it, so the slot holds the final LSN
	// when the relay exits.
	r.conn.Conn().SetReadDeadline(time.Now().Add(endCopyTimeout))
	if _, err := pglogrepl.SendStandbyCopyDone(context.Background(), r.conn); err != nil {
		r.s.log.Debug("ending the replication copy", "err", err.Error())
	}
}

// endCopyTimeout bounds the CopyDone handshake at shutdown.
const endCopyTimeout = 5 * time.Second

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
	if s.cfg.Inspect != nil {
		in, err := s.cfg.Inspect(setupCtx, conn)
		if err != nil {
			return fail(err)
		}
		s.cfg.Inspect = nil // once
		s.cfg.ExtraColumns, s.cfg.MessagePrefix = in.ExtraColumns, in.MessagePrefix
	}
	// The guard decides from the slot as found, before anything is created.
	verdict := VerdictStream
	if *createSlot {
		verdict = VerdictCreate
	}
	var gin GuardInput
	if s.cfg.Guard != nil {
		found, exists, err := LookupSlot(setupCtx, conn, s.cfg.Slot)
		if err != nil {
			return fail(err)
		}
		gin = GuardInput{Server: server, Slot: s.cfg.Slot, Info: found, Exists: exists, First: *createSlot,
			History: func(ctx context.Context) ([]TimelineSwitch, error) {
				return TimelineHistory(ctx, rconn, server.Timeline)
			}}
		if verdict, err = s.cfg.Guard.Check(setupCtx, gin); err != nil {
			return fail(err)
		}
		if verdict == VerdictCreate && !*createSlot {
			return fail(Fatal(fmt.Errorf("slot %q: %w", s.cfg.Slot, ErrSlotDropped)))
		}
	}
	// Extra tables are refused at start only: one ALTERed in while the
	// relay runs is dead-lettered row by row (handleWAL), and a reconnect
	// must not turn that into an exit.
	created, err := EnsurePublication(setupCtx, conn, s.cfg.Publication, s.tableNames(), PublicationOptions{AllowExtraTables: s.cfg.AllowExtraTables || !*createSlot, Logger: s.log})
	if err != nil {
		return fail(err)
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
	if errors.Is(err, ErrSlotLost) && (verdict == VerdictRecreate || s.cfg.Guard == nil && s.cfg.RecreateLostSlot) {
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
	if s.cfg.Guard != nil && (created || lost != nil) {
		if err := s.cfg.Guard.SlotCreated(setupCtx, gin, info, lost); err != nil {
			return fail(err)
		}
	}
	// From now on a missing slot means events may have been lost (dropped,
	// or a failover to a server without it): never create one again.
	*createSlot = false
	if created {
		s.log.Info("slot created: first start", "slot", s.cfg.Slot, "plugin", "pgoutput", "failover", failover, "confirmed_lsn", info.Confirmed.String())
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
	// Read the stream in large chunks: while draining, the socket holds
	// many messages, and pgproto3's own 8 KB reads would cost a read system
	// call per one or two 4 KB rows.
	cfg.BuildFrontend = func(r io.Reader, w io.Writer) *pgproto3.Frontend {
		return pgproto3.NewFrontend(bufio.NewReaderSize(r, streamReadBuffer), w)
	}
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, connectError("connect for replication", err)
	}
	return conn, nil
}

// streamReadBuffer is the read buffer of the replication connection.
const streamReadBuffer = 256 << 10

// reader owns the replication connection for one session.
type reader struct {
	s    *Stream
	conn *pgconn.PgConn
	tr   *Tracker
	sess Session
	dec  *decoder.Decoder

	readTimeout time.Duration

	msg        decoder.Message
	tx         Tx
	inTx       bool
	nextStatus time.Time
	lastSent   time.Time
	sentLSN    LSN
	lastRecv   time.Time
	deadline   time.Time
}

func (r *reader) loop(ctx context.Context) error {
	now := time.Now()
	r.lastRecv = now
	r.nextStatus = now
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		select {
		case <-r.sess.Done():
			return fmt.Errorf("%w: %w", errSession, r.sess.Err())
		default:
		}
		now = time.Now()
		if !now.Before(r.nextStatus) {
			if err := r.sendStatus(true); err != nil {
				return err
			}
		} else if now.Sub(r.lastSent) >= minStatusGap && r.tr.Confirmed() > r.sentLSN {
			// Confirm progress promptly: less to replay after a crash.
			if err := r.sendStatus(false); err != nil {
				return err
			}
		}
		deadline := r.lastRecv.Add(r.readTimeout)
		if r.nextStatus.Before(deadline) {
			deadline = r.nextStatus
		}
		if r.tr.Confirmed() > r.sentLSN {
			if due := r.lastSent.Add(minStatusGap); due.Before(deadline) {
				deadline = due
			}
		}
		if !deadline.Equal(r.deadline) {
			if err := r.conn.Conn().SetReadDeadline(deadline); err != nil {
				return fmt.Errorf("set read deadline: %w", err)
			}
			r.deadline = deadline
		}
		msg, err := r.conn.ReceiveMessage(context.Background())
		if err != nil {
			if pgconn.Timeout(err) {
				if time.Since(r.lastRecv) >= r.readTimeout {
					return errStreamSilent
				}
				r.deadline = time.Time{} // a waker may have moved it
				continue
			}
			return fmt.Errorf("receive: %w", err)
		}
		r.lastRecv = time.Now()
		r.s.stats.lastMessage.Store(r.lastRecv.UnixNano())
		switch m := msg.(type) {
		case *pgproto3.CopyData:
			if err := r.handleCopyData(ctx, m.Data); err != nil {
				return err
			}
		case *pgproto3.ErrorResponse:
			pgErr := pgconn.ErrorResponseToPgError(m)
			if pgErr.Code == "42704" {
				// Something the stream needs does not exist (e.g. the
				// publication, as of the WAL being decoded: it was created
				// after the slot, or dropped). Retrying cannot help.
				return Fatal(fmt.Errorf("stream: %w", pgErr))
			}
			// 55000 (e.g. the slot was invalidated) is not fatal here: the
			// reconnect looks the slot up and halts on a lost slot, or
			// recreates it under --recreate-lost-slot.
			return fmt.Errorf("stream: %w", pgErr)
		case *pgproto3.CopyDone:
			return errors.New("stream: server ended the copy")
		}
	}
}

func (r *reader) handleCopyData(ctx context.Context, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	switch data[0] {
	case pglogrepl.PrimaryKeepaliveMessageByteID:
		ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(data[1:])
		if err != nil {
			return fmt.Errorf("parse keepalive: %w", err)
		}
		r.s.stats.lastKeepalive.Store(r.lastRecv.UnixNano())
		r.noteWALEnd(LSN(ka.ServerWALEnd))
		if !r.inTx {
			r.tr.AdvanceIdle(LSN(ka.ServerWALEnd))
		}
		if ka.ReplyRequested {
			return r.sendStatus(false)
		}
	case pglogrepl.XLogDataByteID:
		xld, err := pglogrepl.ParseXLogData(data[1:])
		if err != nil {
			return fmt.Errorf("parse XLogData: %w", err)
		}
		r.noteWALEnd(LSN(xld.ServerWALEnd))
		return r.handleWAL(ctx, xld.WALData)
	}
	return nil
}

func (r *reader) noteWALEnd(end LSN) {
	if uint64(end) > r.s.stats.serverWALEnd.Load() {
		r.s.stats.serverWALEnd.Store(uint64(end))
	}
}

func (r *reader) handleWAL(ctx context.Context, wal []byte) error {
	m := &r.msg
	if err := r.dec.Decode(wal, m); err != nil {
		return Fatal(fmt.Errorf("decode pgoutput: %w", err))
	}
	switch m.Kind {
	case decoder.KindBegin:
		r.inTx = true
		r.tx = Tx{Xid: m.Xid, FinalLSN: LSN(m.FinalLSN), CommitTime: m.CommitTime}
	case decoder.KindCommit:
		r.inTx = false
		r.tr.Commit(LSN(m.EndLSN), m.CommitTime)
	case decoder.KindOtherRow:
		if r.s.cfg.AllowExtraTables {
			r.s.skipRow(m.Row.Other.Table)
			return nil
		}
		fallthrough // a dead letter: see skipRow
	case decoder.KindRow:
		r.s.stats.rowsRead.Add(1)
		size := RowSize(&m.Row)
		seq, ok := r.tr.Reserve(size, r.lastRecv)
		if !ok {
			r.s.stats.backpressure.Store(true)
			defer r.s.stats.backpressure.Store(false)
		}
		for !ok {
			var err error
			if seq, ok, err = r.tr.WaitRoom(ctx, size, r.lastRecv, r.statusTimer(), r.sess.Done()); err != nil {
				if errors.Is(err, ErrStopped) {
					return fmt.Errorf("%w: %w", errSession, r.sess.Err())
				}
				return err
			}
			if !ok {
				// Backpressure: keep PostgreSQL informed while Kafka catches up.
				if err := r.sendStatus(true); err != nil {
					return err
				}
			}
		}
		if err := r.sess.Row(ctx, seq, size, &r.tx, &m.Row); err != nil {
			if IsFatal(err) {
				return err
			}
			return fmt.Errorf("%w: %w", errSession, err)
		}
		// Time spent waiting on Kafka or the registry is not server silence.
		r.lastRecv = time.Now()
	}
	return nil
}

// minStatusGap spaces status updates sent because the confirmed LSN moved.
const minStatusGap = 100 * time.Millisecond

// wakeOnProgress interrupts the reader's blocked read (through the read
// deadline) when acknowledgements move the confirmed LSN, at most once per
// minStatusGap. Only the reader writes to the connection; this goroutine
// only moves its read deadline, which is safe from another goroutine.
func wakeOnProgress(ctx context.Context, tr *Tracker, conn *pgconn.PgConn) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-tr.Progress():
		}
		conn.Conn().SetReadDeadline(time.Now())
		t := time.NewTimer(minStatusGap)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// statusTimer fires when the next status update is due.
func (r *reader) statusTimer() <-chan time.Time {
	return time.After(time.Until(r.nextStatus))
}

// sendStatus confirms the tracker's LSN as written, flushed and applied.
func (r *reader) sendStatus(replyRequested bool) error {
	lsn := r.tr.Confirmed()
	now := time.Now()
	if replyRequested {
		r.nextStatus = now.Add(r.s.cfg.StatusInterval)
	}
	r.lastSent = now
	if lsn == 0 {
		return nil
	}
	r.sentLSN = lsn
	err := pglogrepl.SendStandbyStatusUpdate(context.Background(), r.conn, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: pglogrepl.LSN(lsn),
		WALFlushPosition: pglogrepl.LSN(lsn),
		WALApplyPosition: pglogrepl.LSN(lsn),
		ClientTime:       now,
		ReplyRequested:   replyRequested,
	})
	if err != nil {
		return fmt.Errorf("send status update: %w", err)
	}
	r.s.stats.confirmed.Store(uint64(lsn))
	r.s.stats.lastStatus.Store(now.UnixNano())
	if end, ct := r.tr.ConfirmedCommit(); !ct.IsZero() {
		r.s.stats.confCommitLSN.Store(uint64(end))
		r.s.stats.confCommitNs.Store(ct.UnixNano())
	}
	return nil
}

// tableNames lists the outbox tables' names.
func (s *Stream) tableNames() []string {
	names := make([]string, len(s.cfg.Tables))
	for i, t := range s.cfg.Tables {
		names[i] = t.Name
	}
	return names
}

// MessagesMinMajor is the first PostgreSQL major whose pgoutput sends
// logical decoding messages.
const MessagesMinMajor = 14

// SetInspect sets Config.Inspect; call it before Run.
func (s *Stream) SetInspect(f func(ctx context.Context, conn *pgx.Conn) (Inspected, error)) {
	s.cfg.Inspect = f
}

// SetSessionFunc sets how sessions are made; call it before Run.
func (s *Stream) SetSessionFunc(f NewSessionFunc) { s.newSession = f }
