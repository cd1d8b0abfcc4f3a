package replication

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/cdc-relay/cdc-relay/decoder"
)

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
	bounded    Bounded // sess, when it wants transaction boundaries
	skipBelow  LSN     // transactions whose commit ends at or below it are skipped
	skipTx     bool    // the current transaction is skipped
	skipped    int     // transactions skipped, for the log
	nextStatus time.Time
	lastSent   time.Time
	sentLSN    LSN
	lastRecv   time.Time
	waited     bool // a row waited for in-flight room: read the clock again
	rc         *readCounter
	deadline   time.Time
	// While the stream is far behind (a backlog), or comes at a steady
	// rate, the socket wakes the reader only once enough bytes are queued;
	// see lowat.go.
	sendTime time.Time // the walsender's clock when it sent the last XLogData
	behind   bool      // the transaction being read was behind: a backlog
	gather   gatherer  // the steady rate's wake-up size
	lowat    int       // SO_RCVLOWAT as last set; 0 and 1 are the default
	lowatEnd time.Time // the read deadline lowat mode set, if it is the nearest
	noLowat  bool      // setting SO_RCVLOWAT failed: read as without it
	handed   uint64    // seq of the newest row handed to the session
	boundary uint64    // seq of the newest row before a transaction boundary
}

func (r *reader) loop(ctx context.Context) error {
	now := time.Now()
	r.lastRecv = now
	r.nextStatus = now
	handled := false
	// The clock is read after every message that needed the socket (it
	// may have waited), after a wait for in-flight room, and at least
	// every clockEvery messages; a message taken from the read buffer
	// keeps the last reading.
	rc, _ := r.conn.CustomData()[readCounterKey].(*readCounter)
	r.rc = rc
	var reads uint64
	stale := clockEvery
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		select {
		case <-r.sess.Done():
			return fmt.Errorf("%w: %w", errSession, r.sess.Err())
		default:
		}
		if rc == nil || stale >= clockEvery || r.waited {
			now, stale, r.waited = time.Now(), 0, false
		}
		stale++
		if handled {
			// Time spent handling the last message (waiting on Kafka or
			// the registry) is not server silence.
			r.lastRecv, handled = now, false
		}
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
		r.lowatEnd = time.Time{}
		if end := r.lowatWaitEnd(now); !end.IsZero() && end.Before(deadline) {
			deadline, r.lowatEnd = end, end
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
				t := time.Now()
				if t.Sub(r.lastRecv) >= r.readTimeout {
					return errStreamSilent
				}
				if !r.lowatEnd.IsZero() && !t.Before(r.lowatEnd) {
					r.lowatExpired()
				}
				r.deadline = time.Time{} // a waker may have moved it
				stale = clockEvery
				continue
			}
			return fmt.Errorf("receive: %w", err)
		}
		if rc == nil || rc.n.Load() != reads {
			if rc != nil {
				reads = rc.n.Load()
			}
			now, stale = time.Now(), 0
			if r.s.cfg.Gather > 0 {
				r.gather.read(now, r.s.cfg.Gather)
				r.setLowat()
			}
		}
		r.lastRecv = now
		r.s.stats.lastMessage.Store(r.lastRecv.UnixNano())
		switch m := msg.(type) {
		case *pgproto3.CopyData:
			r.gather.bytes += len(m.Data) + copyDataOverhead
			if err := r.handleCopyData(ctx, m.Data); err != nil {
				return err
			}
			handled = true
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
		r.sendTime = xld.ServerTime
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
		// FinalLSN is where the commit record starts: below the end of
		// every transaction committed before this one ends, so below the
		// checkpoint exactly when this one is at or below it.
		r.skipTx = r.tx.FinalLSN < r.skipBelow
		r.setBehind(r.sendTime.Sub(m.CommitTime) > lowatBehind)
	case decoder.KindCommit:
		r.inTx = false
		r.gather.commits++
		r.tr.Commit(LSN(m.EndLSN), m.CommitTime)
		if r.skipTx {
			r.skipTx = false
			r.skipped++
			return nil
		}
		if r.bounded != nil {
			r.boundary = r.tr.LastSeq()
			r.bounded.Boundary(r.boundary, LSN(m.EndLSN), m.CommitTime)
		}
	case decoder.KindOtherRow:
		if r.skipTx {
			return nil
		}
		if r.s.cfg.AllowExtraTables {
			r.s.skipRow(m.Row.Other.Table)
			return nil
		}
		fallthrough // a dead letter: see skipRow
	case decoder.KindRow:
		if r.skipTx || !r.inTx && m.Row.Message && LSN(m.Row.LSN) < r.skipBelow {
			return nil // already in Kafka (exactly-once)
		}
		r.s.stats.rowsRead.Add(1)
		size := RowSize(&m.Row)
		seq, ok := r.tr.Reserve(size, r.lastRecv)
		if !ok {
			r.waited = true
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
		r.handed = seq
	}
	return nil
}

// clockEvery bounds how many messages the reader handles on one clock
// reading.
const clockEvery = 64

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

// drain lets Kafka acknowledge what is in flight, within DrainTimeout,
// keeping PostgreSQL informed, then sends the final status update with the
// final contiguous prefix.
func (r *reader) drain() {
	if r.s.cfg.ExactlyOnce && r.handed > r.boundary {
		// Rows of a PostgreSQL transaction that does not end before the
		// stop (a halt on one of its rows, a shutdown in the middle of it)
		// are in the open Kafka transaction, which may end only where that
		// PostgreSQL transaction ends: nothing more can commit, and
		// waiting for DrainTimeout would not change that. The transaction
		// is aborted, and read again from the checkpoint after the restart.
		r.s.log.Info("exactly-once: the open Kafka transaction holds part of a PostgreSQL transaction that has not ended, so it is aborted, not drained; "+
			"it is read again after the restart", "xid", r.tx.Xid, "confirmed_lsn", r.tr.Confirmed().String())
	} else {
		r.drainSession(time.Now().Add(r.s.cfg.DrainTimeout))
	}
	if g, server := r.s.deps.Guard, r.s.stats.Server(); g != nil && server != nil {
		// The final checkpoint first: the final confirm may go only as
		// far as a durable checkpoint covers.
		ctx, cancel := context.WithTimeout(context.Background(), finalCheckpointTimeout)
		if err := g.Checkpoint(ctx, *server, r.tr); err != nil {
			r.s.log.Warn("final checkpoint not written: the slot stays at the last checkpoint, and what came after it is read again at the next start (duplicates, which consumers drop by id)",
				"confirmed_lsn", r.tr.Confirmed().String(), "acknowledged_lsn", r.tr.Ready().String(), "err", err.Error())
		}
		cancel()
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

// drainSession waits until the session has had everything acknowledged
// (and, exactly-once, committed) or deadline passes, keeping PostgreSQL
// informed.
func (r *reader) drainSession(deadline time.Time) {
	for {
		step := min(time.Until(deadline), r.s.cfg.StatusInterval)
		dctx, cancel := context.WithTimeout(context.Background(), step)
		err := r.sess.Drain(dctx)
		cancel()
		if err == nil {
			return
		}
		if !time.Now().Before(deadline) || r.sess.Err() != nil {
			r.s.log.Warn("drain incomplete; unacknowledged events will be sent again after restart", "err", err.Error())
			return
		}
		if serr := r.sendStatus(false); serr != nil {
			r.s.log.Warn("status update during drain failed", "err", serr.Error())
			return
		}
	}
}

// finalCheckpointTimeout bounds the final checkpoint write at shutdown.
const finalCheckpointTimeout = 10 * time.Second

// endCopyTimeout bounds the CopyDone handshake at shutdown.
const endCopyTimeout = 5 * time.Second
