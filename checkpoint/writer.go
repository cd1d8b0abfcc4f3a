package checkpoint

import (
	"context"
	"fmt"
	"time"

	"github.com/cdc-relay/cdc-relay/replication"
)

// This file: writing checkpoints (Run, Checkpoint, the records written
// inside Kafka transactions) and SkipBelow, the exactly-once comparison.

func (g *Guard) record(server replication.Server, lsn replication.LSN, commitLSN replication.LSN, commit time.Time) *Record {
	g.mu.Lock()
	id, own := g.id, g.own
	g.mu.Unlock()
	r := &Record{Kind: KindCheckpoint, RelayID: id, LSN: lsn.String(), Timeline: server.Timeline, SystemID: server.SystemID, Database: server.Database,
		Slot: g.cfg.Slot, Publication: g.cfg.Publication, Tables: g.cfg.Tables, Version: g.cfg.Version, WrittenAt: time.Now().UTC(), Format: FormatFollows}
	switch {
	case !commit.IsZero():
		c := commit.UTC()
		r.LastCommitTime, r.LastCommitLSN = &c, commitLSN.String()
	case own != nil && own.SystemID == server.SystemID && own.Position() <= lsn:
		r.LastCommitTime, r.LastCommitLSN = own.LastCommitTime, own.LastCommitLSN
	}
	g.mu.Lock()
	if own != nil && own.InitialReplay != nil && own.SystemID == server.SystemID && g.cfg.InitialReplay && !g.replayDone {
		r.InitialReplay = own.InitialReplay
	}
	g.mu.Unlock()
	return r
}

// write writes a checkpoint at lsn and remembers it.
func (g *Guard) write(ctx context.Context, server replication.Server, lsn, commitLSN replication.LSN, commit time.Time) error {
	return g.writeRecord(ctx, g.record(server, lsn, commitLSN, commit), lsn)
}

// writeRecord writes r, a checkpoint at lsn, and remembers it.
func (g *Guard) writeRecord(ctx context.Context, r *Record, lsn replication.LSN) error {
	if err := g.cfg.Store.Write(ctx, r); err != nil {
		err = fmt.Errorf("%w: %w", replication.ErrCheckpointUnavailable, err)
		g.mu.Lock()
		if g.writeErr == nil {
			g.writeErrSince = time.Now()
		}
		g.writeErr = err
		g.mu.Unlock()
		return err
	}
	g.mu.Lock()
	g.own, g.written, g.writeErr = r, lsn, nil
	g.mu.Unlock()
	return nil
}

// WriteHealth is the error of the last checkpoint write and since when the
// writes fail; nil once one succeeded. While they fail the slot holds its
// WAL: nothing is confirmed past the last durable checkpoint.
func (g *Guard) WriteHealth() (err error, since time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.writeErr, g.writeErrSince
}

// SkipBelow reads the checkpoint topic again (read_committed) and returns
// the LSN up to which every transaction is in Kafka already, for
// exactly-once delivery: the relay has just fenced every older instance
// with its transactional id, so what it reads now is final. It is 0 (skip
// nothing) without a checkpoint, or with one of another system identifier
// (a pg_upgrade: LSNs of the two are not compared). A checkpoint on another
// timeline counts only when it lies at or before the fork; beyond it, its
// LSNs name other transactions, and the start-up rules apply (a
// *GapError, exit 3).
//
// It is also where an exactly-once relay compares the slot (confirmed at
// slotConfirmed, read once this instance held it) with the checkpoint: only
// after the fence has every older instance's last commit settled, so a
// checkpoint read before it could be older than the slot (see Holding).
func (g *Guard) SkipBelow(ctx context.Context, in replication.GuardInput, slotConfirmed replication.LSN) (replication.LSN, error) {
	server := in.Server
	if err := g.load(ctx, server, true); err != nil {
		return 0, err
	}
	if err := g.checkAhead(ctx, in, slotConfirmed); err != nil {
		return 0, err
	}
	g.mu.Lock()
	own, hist, histTLI, histRead := g.own, g.hist, g.histTLI, g.histRead
	g.mu.Unlock()
	if own == nil || own.Kind != KindCheckpoint || own.SystemID != server.SystemID {
		return 0, nil
	}
	if own.Timeline == 0 || own.Timeline == server.Timeline {
		return own.Position(), nil
	}
	if !histRead || histTLI != server.Timeline {
		// The checkpoint moved to another timeline since this connection
		// was checked: decide again on a new connection.
		return 0, fmt.Errorf("%w: the checkpoint under relay id %s is on timeline %d, the server on %d, and was not checked against its history on this connection",
			replication.ErrCheckpointUnavailable, own.RelayID, own.Timeline, server.Timeline)
	}
	if fork, beyond := forkedBefore(hist, own); beyond {
		return 0, replication.Fatal(&GapError{Broker: g.broker(), Slot: g.cfg.Slot, Checkpoint: own, Fork: &fork, Timeline: server.Timeline, SystemID: server.SystemID})
	}
	return own.Position(), nil
}

// TxnRecord is the checkpoint at end, as the record written inside a Kafka
// transaction: topic, key and JSON value. end is the end LSN of the last
// PostgreSQL transaction of the Kafka transaction, or an idle position past
// the last one (a checkpoint-only transaction), whose end and commit time
// are commitEnd and commit.
func (g *Guard) TxnRecord(server replication.Server, end, commitEnd replication.LSN, commit time.Time) (topic string, key, value []byte, err error) {
	r := g.record(server, end, commitEnd, commit)
	value, err = r.marshal()
	if err != nil {
		return "", nil, nil, err
	}
	return g.cfg.Store.Topic(), []byte(r.Key()), value, nil
}

// Run writes a checkpoint at the acknowledged prefix of the stream's
// current tracker whenever it moved past the last one (Tracker.Unwritten),
// until ctx ends: at most once per BusyInterval while transactions are
// confirmed, once per Interval while only idle positions move. Each
// durable write lets the tracker confirm up to it. Failed writes are logged
// once per distinct error and retried; meanwhile nothing more is confirmed
// and the slot holds its WAL. Under exactly-once it writes nothing: the
// Kafka transactions carry the checkpoint.
func (g *Guard) Run(ctx context.Context, stats *replication.Stats) {
	if g.cfg.ExactlyOnce {
		return
	}
	// The tracker's Pending wakes the writer when there is something to
	// write. The ticker is waited on only while there is something to poll
	// for: no tracker yet, a retired one (the next connection's is to come)
	// or a failed write to retry; so an idle relay is not woken every
	// Interval for nothing.
	tick := time.NewTicker(g.cfg.Interval)
	defer tick.Stop()
	var lastErr string
	var last time.Time             // the last write attempt
	var lastCommit replication.LSN // the commit end the last write covered
	for {
		var pending <-chan struct{}
		var poll <-chan time.Time
		tr := stats.Tracker()
		if tr != nil {
			pending = tr.Pending()
		}
		if tr == nil || tr.Retired() || lastErr != "" {
			poll = tick.C
		}
		select {
		case <-ctx.Done():
			return
		case <-pending:
		case <-poll:
		}
		if tr == nil {
			tr = stats.Tracker()
		}
		server := stats.Server()
		if tr == nil || server == nil {
			continue
		}
		_, commitEnd, _, ok := tr.Unwritten()
		if !ok {
			continue
		}
		gap := g.cfg.Interval
		if commitEnd > lastCommit {
			gap = g.cfg.BusyInterval
		}
		if wait := time.Until(last.Add(gap)); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		last = time.Now()
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		covered, err := g.flush(wctx, *server, tr)
		cancel()
		if err == nil && covered > lastCommit {
			lastCommit = covered
		}
		switch {
		case err != nil && err.Error() != lastErr && ctx.Err() == nil:
			g.log.Warn("checkpoint not written; retrying. Nothing is confirmed to PostgreSQL past the last checkpoint meanwhile, so the slot holds WAL",
				g.broker().LogKey(), g.cfg.Store.Topic(), "err", err.Error())
			lastErr = err.Error()
		case err == nil && lastErr != "":
			g.log.Info("checkpoint written again", g.broker().LogKey(), g.cfg.Store.Topic())
			lastErr = ""
		}
	}
}

// Checkpoint implements replication.Guard: the final checkpoint, before
// the stream's final status update. Under exactly-once it writes nothing.
func (g *Guard) Checkpoint(ctx context.Context, server replication.Server, tr *replication.Tracker) error {
	if g.cfg.ExactlyOnce {
		return nil
	}
	_, err := g.flush(ctx, server, tr)
	return err
}

// flush writes a checkpoint at tr's acknowledged prefix when it is past the
// last one this process knows durable, and tells tr what is durable. It
// returns the commit end the checkpoint covers.
func (g *Guard) flush(ctx context.Context, server replication.Server, tr *replication.Tracker) (replication.LSN, error) {
	if err := g.lockWrites(ctx); err != nil {
		return 0, err
	}
	defer g.unlockWrites()
	g.mu.Lock()
	loaded, written, own := g.loaded, g.written, g.own
	g.mu.Unlock()
	pos, commitEnd, commit, ok := tr.Unwritten()
	if !loaded || !ok {
		return commitEnd, nil
	}
	if pos <= written && own != nil && own.SystemID == server.SystemID {
		// A checkpoint at or past it is durable already (written before
		// a reconnect, or by the instance this one took over from).
		tr.Checkpointed(pos, commitEnd, commit)
		return commitEnd, nil
	}
	if err := g.write(ctx, server, pos, commitEnd, commit); err != nil {
		return 0, err
	}
	tr.Checkpointed(pos, commitEnd, commit)
	return commitEnd, nil
}
