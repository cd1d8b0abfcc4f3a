package checkpoint

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/cdc-relay/cdc-relay/replication"
)

// This file: whether a slot is ahead of the checkpoint (Holding, Ahead),
// which the timeline history decides.

// Holding implements replication.Guard: with the slot held, nobody else
// can move it, so a slot ahead of the checkpoint read now was made or moved
// outside the relay (see checkAhead). Under exactly-once SkipBelow decides
// instead, after the fence.
func (g *Guard) Holding(ctx context.Context, in replication.GuardInput, info replication.SlotInfo) error {
	if g.cfg.ExactlyOnce {
		return nil
	}
	if err := g.load(ctx, in.Server, true); err != nil {
		return err
	}
	return g.checkAhead(ctx, in, info.Confirmed)
}

// Ahead is checkAhead for a slot this process does not hold (slot recreate,
// check): read the slot first, then call it, as the checkpoint only grows.
func (g *Guard) Ahead(ctx context.Context, in replication.GuardInput) error {
	if err := g.load(ctx, in.Server, true); err != nil {
		return err
	}
	return g.checkAhead(ctx, in, in.Info.Confirmed)
}

// checkAhead returns a fatal *GapError when the slot's confirmed LSN is
// past the relay's own checkpoint of format FormatFollows on this server's
// timeline history. The relay confirms nothing a durable checkpoint does not
// cover, so the slot was created again by hand, moved with
// pg_replication_slot_advance, or made on a promoted primary after a
// failover without failover slots: the rows between were never read.
//
// A Kafka transaction still open with a record under the relay's own key
// could hide its newest checkpoint (an exactly-once relay killed between
// its commit and the commit marker): the topic is read again until that
// transaction is decided, and until then the answer is unknown (retried),
// never a gap. Other relays' open transactions on a shared topic change
// nothing here, so they are not waited for. One that stays open is
// described by openTxnError.
func (g *Guard) checkAhead(ctx context.Context, in replication.GuardInput, slotConfirmed replication.LSN) error {
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		g.mu.Lock()
		own, open, openRec := g.own, g.ownOpen, g.ownOpenRec
		g.mu.Unlock()
		if own == nil || own.Kind != KindCheckpoint || own.Format < FormatFollows || own.SystemID != in.Server.SystemID || slotConfirmed <= own.Position() {
			return nil
		}
		if own.Timeline != 0 && own.Timeline != in.Server.Timeline {
			hist, err := g.history(ctx, in)
			if err != nil {
				return err
			}
			if fork, beyond := forkedBefore(hist, own); beyond {
				return replication.Fatal(&GapError{Broker: g.broker(), Slot: in.Slot, Checkpoint: own, Fork: &fork, Timeline: in.Server.Timeline, SystemID: in.Server.SystemID})
			}
		}
		if !open {
			return replication.Fatal(&GapError{Broker: g.broker(), Slot: in.Slot, Checkpoint: own, Ahead: slotConfirmed, Timeline: in.Server.Timeline, SystemID: in.Server.SystemID})
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return g.unknown(fmt.Errorf("%s: %w", g.openTxnError(own.RelayID, openRec, slotConfirmed), ctx.Err()))
		case <-t.C:
		}
		if err := g.load(ctx, in.Server, true); err != nil {
			return err
		}
	}
}

// openTxnError says what to do about the relay's own Kafka transaction
// that stayed open, holding the checkpoint rec. The relay confirms a slot
// position under exactly-once only after Kafka acknowledged the commit of
// the transaction that holds it, so a slot confirmed to rec or past it
// means Kafka acknowledged this commit and left its markers unwritten:
// aborting it would drop events the slot no longer holds. Otherwise
// aborting loses nothing, as the relay sends them again.
func (g *Guard) openTxnError(relayID string, rec *Record, slotConfirmed replication.LSN) error {
	topic := g.cfg.Store.Topic()
	if rec != nil && rec.Position() <= slotConfirmed {
		return fmt.Errorf("checkpoint topic %s: the Kafka transaction that holds relay id %s's checkpoint at %s is still open, but the slot was confirmed to %s, which the relay does only after Kafka acknowledged that transaction's commit: Kafka left a committed transaction hanging, without its commit markers (kafka-transactions.sh find-hanging lists it). Do not abort it: its events are no longer in the slot, and an abort drops them (the relay then stops with exit code 3). A broker that coordinates the transactional id and still holds the commit as pending (kafka-transactions.sh describe: PrepareCommit) writes its markers again when it restarts; the relay waits until the transaction is decided",
			topic, relayID, rec.LSN, slotConfirmed)
	}
	return fmt.Errorf("checkpoint topic %s: a Kafka transaction with a record under relay id %s is still open; it ends by its transaction timeout, and one open longer was left hanging by Kafka (kafka-transactions.sh find-hanging lists it). The slot was not confirmed into it, so aborting it (kafka-transactions.sh abort) loses nothing: the relay sends its events again", topic, relayID)
}

// history is the server's timeline history: as Decide read it on this
// connection, else read now through in.History.
func (g *Guard) history(ctx context.Context, in replication.GuardInput) ([]replication.TimelineSwitch, error) {
	g.mu.Lock()
	hist, tli, read := g.hist, g.histTLI, g.histRead
	g.mu.Unlock()
	if read && tli == in.Server.Timeline {
		return hist, nil
	}
	if in.History == nil {
		return nil, fmt.Errorf("%w: the server's timeline history was not read on this connection", replication.ErrCheckpointUnavailable)
	}
	hist, err := in.History(ctx)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	g.hist, g.histTLI, g.histRead = hist, in.Server.Timeline, true
	g.mu.Unlock()
	return hist, nil
}

// forkedBefore finds where the checkpoint's timeline ended in the server's
// history, and whether the checkpoint lies beyond it. A timeline that is not
// in the history at all (a restore from another line) counts as beyond, at
// its start.
func forkedBefore(hist []replication.TimelineSwitch, own *Record) (replication.TimelineSwitch, bool) {
	for _, h := range hist {
		if h.TLI == own.Timeline {
			// Only a published transaction beyond the switch point is on
			// the lost timeline: an idle position past it published nothing.
			return h, own.PublishedUpTo() > h.Switch
		}
	}
	return replication.TimelineSwitch{TLI: own.Timeline}, true
}

func invalidation(i replication.SlotInfo) string {
	var parts []string
	if i.WALStatus == "lost" {
		parts = append(parts, "wal_status lost: PostgreSQL removed WAL it still needed, e.g. past max_slot_wal_keep_size")
	}
	if i.Conflicting {
		parts = append(parts, "conflicting with recovery")
	}
	if i.InvalidationReason != "" {
		parts = append(parts, "invalidation_reason "+i.InvalidationReason)
	}
	return strings.Join(parts, "; ")
}
