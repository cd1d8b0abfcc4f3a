package replication

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
)

// InitialReplayGuard is implemented by a Guard that remembers a pending
// initial replay (--initial-replay) in its checkpoint: set when the slot
// was created, cleared once every row created before the slot existed was
// published. A replay that crashed, or whose instance was taken over, is
// therefore run again by whichever instance holds the slot next.
type InitialReplayGuard interface {
	// PendingReplay reads the checkpoint again and reports whether an
	// initial replay is pending, and up to which instant (the database
	// clock read right after the slot's creation).
	PendingReplay(ctx context.Context, server Server) (until time.Time, pending bool, err error)
	// ReplayDone writes the checkpoint without the pending marker, at the
	// slot's position (info, read while holding the slot) or the
	// checkpoint's, whichever is further.
	ReplayDone(ctx context.Context, server Server, info SlotInfo) error
}

// replayStatusInterval is how often the stream sends a status update while
// it holds the slot and replays: the walsender ends a connection that sent
// nothing for wal_sender_timeout (60 s by default, often lowered to 10 s).
const replayStatusInterval = 3 * time.Second

// initialReplay runs a pending initial replay while this instance holds the
// slot (START_REPLICATION succeeded) and before anything is read from it:
// the walsender's messages wait in the socket (TCP backpressure pauses
// it), and status updates at the slot's confirmed LSN keep the connection
// alive. Nothing else writes to rconn meanwhile. Once the replay completed,
// the checkpoint without the marker is written; a failure leaves the
// marker, and the next connection replays again.
func (s *Stream) initialReplay(ctx context.Context, rconn *pgconn.PgConn, server Server, info SlotInfo) error {
	ig, ok := s.deps.Guard.(InitialReplayGuard)
	if !ok || s.deps.Guard == nil {
		return nil
	}
	pctx, cancel := context.WithTimeout(ctx, setupTimeout)
	until, pending, err := ig.PendingReplay(pctx, server)
	cancel()
	if err != nil || !pending {
		return err
	}
	if s.deps.InitialReplay == nil {
		s.log.Warn("the checkpoint holds a pending initial replay, but --initial-replay is not set: the rows created before the slot existed may not all be in "+s.cfg.Broker+"; "+
			"publish them with (and run's other settings): "+ReplayCommand(s.tableNames(), until), "slot", s.cfg.Slot, "until", until.Format(time.RFC3339Nano))
		return nil
	}
	s.log.Info("initial replay: publishing the rows created before the slot existed, then streaming (--initial-replay)",
		"slot", s.cfg.Slot, "tables", s.tableNames(), "until", until.Format(time.RFC3339Nano), "slot_confirmed_lsn", info.Confirmed.String())
	started := time.Now()
	statusErr := make(chan error, 1)
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(replayStatusInterval)
		defer t.Stop()
		for {
			select {
			case <-stop:
				statusErr <- nil
				return
			case <-t.C:
			}
			pos := pglogrepl.LSN(info.Confirmed)
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := pglogrepl.SendStandbyStatusUpdate(wctx, rconn, pglogrepl.StandbyStatusUpdate{
				WALWritePosition: pos, WALFlushPosition: pos, WALApplyPosition: pos, ClientTime: time.Now()})
			cancel()
			if err != nil {
				statusErr <- fmt.Errorf("initial replay: send status update: %w", err)
				return
			}
		}
	}()
	err = s.deps.InitialReplay(ctx, until)
	close(stop)
	serr := <-statusErr
	if err != nil {
		return err
	}
	if serr != nil {
		// The slot may have been released meanwhile: replay again.
		return serr
	}
	wctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	if err := ig.ReplayDone(wctx, server, info); err != nil {
		return err
	}
	s.log.Info("initial replay complete: streaming", "slot", s.cfg.Slot, "until", until.Format(time.RFC3339Nano), "took", time.Since(started).Round(time.Millisecond).String())
	return nil
}
