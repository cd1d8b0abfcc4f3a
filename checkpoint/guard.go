package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/cdc-relay/cdc-relay/replication"
)

// Config configures a Guard.
type Config struct {
	Store Backend
	// RelayID is --relay-id; "" means DefaultRelayID, known after the first
	// connection.
	RelayID     string
	Slot        string
	Publication string
	Tables      []string
	Version     string
	// RecreateInvalidated is --recreate-lost-slot: an invalidated slot is
	// dropped and created again, and the gap recorded, instead of a halt.
	RecreateInvalidated bool
	// ReadOnly creates nothing: a missing topic reads as empty (check).
	ReadOnly bool
	// InitialReplay is --initial-replay: the first checkpoint, written at
	// the slot's creation, carries a pending initial replay (Record.InitialReplay),
	// carried on until ReplayDone.
	InitialReplay bool
	// ExactlyOnce is --delivery exactly-once: the checkpoint is written
	// inside the Kafka transactions (TxnRecord), the slot is compared with
	// it in SkipBelow, after the fence, and Run and Checkpoint write
	// nothing.
	ExactlyOnce bool
	// Interval is the least time between two checkpoint writes while only
	// idle positions move (no transaction confirmed since the last); default 1 s.
	Interval time.Duration
	// BusyInterval is the least time between two checkpoint writes while
	// transactions are confirmed; default 100 ms. Every confirm waits for
	// a checkpoint, so it bounds how far the slot trails the acknowledgements.
	BusyInterval time.Duration
	Logger       *slog.Logger
}

// Guard is the relay's checkpoint: it decides on every connection what may
// be done with the slot (replication.Guard), and Run writes the confirmed
// LSN to the checkpoint topic.
type Guard struct {
	cfg Config
	log *slog.Logger

	// wmu serializes the writes of checkpoints, so that a later one never
	// lands in Kafka before an earlier, smaller one (the newest record of a
	// key is the checkpoint): Run's and the stream's final one race
	// otherwise. It is a channel so that a write waiting for the one
	// before it gives up when its context ends: with Kafka down, that one
	// can wait its whole bound, and the final checkpoint at shutdown must
	// not wait longer than its own.
	wmu chan struct{}

	mu     sync.Mutex
	loaded bool
	id     string
	own    *Record // the newest checkpoint under id, read or written
	// ownOpen: the last Load found a record under id in a transaction still
	// open, which may yet commit a checkpoint newer than own; ownOpenRec is
	// the newest checkpoint in it (nil when none).
	ownOpen    bool
	ownOpenRec *Record
	others     []*Record
	// renamed are checkpoints of this system, database and slot under
	// another relay id than an explicit --relay-id.
	renamed []*Record
	// writeErr is the error of the last checkpoint write, nil after one
	// succeeded; writeErrSince is when the writes began to fail.
	writeErr      error
	writeErrSince time.Time
	written       replication.LSN // the LSN of own when this process wrote or read it
	// hist is the server's timeline history as Decide last read it (only
	// when the checkpoint's timeline was not the server's), for SkipBelow.
	hist     []replication.TimelineSwitch
	histTLI  uint32
	histRead bool
	// replayDone is set while ReplayDone writes, and after it wrote: the
	// pending initial replay is no longer carried on.
	replayDone bool
}

var _ replication.Guard = (*Guard)(nil)

// NewGuard returns a guard; nothing is read before the first Check.
func NewGuard(cfg Config) *Guard {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.BusyInterval <= 0 {
		cfg.BusyInterval = 100 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Guard{cfg: cfg, log: cfg.Logger, wmu: make(chan struct{}, 1)}
}

// Close closes the checkpoint store's Kafka client; the guard is not used
// after it.
func (g *Guard) Close() {
	if g.cfg.Store != nil {
		g.cfg.Store.Close()
	}
}

// Backend is the store the guard reads and writes.
func (g *Guard) Backend() Backend { return g.cfg.Store }

// RelayID is the relay id in use ("" before the first Check without
// --relay-id).
func (g *Guard) RelayID() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.id
}

// Load makes sure the checkpoint topic exists and is compacted, and reads
// it, once per process. A *PolicyError is a configuration error; any other
// error wraps replication.ErrCheckpointUnavailable.
func (g *Guard) Load(ctx context.Context, server replication.Server) error {
	return g.load(ctx, server, false)
}

// load reads the topic when it has not been read yet, or again when force
// is set: before a missing slot is taken for a first start, what another
// instance (an active relay this one stood by for) wrote since counts.
func (g *Guard) load(ctx context.Context, server replication.Server, force bool) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.loaded && !force {
		return nil
	}
	exists, err := g.cfg.Store.Ensure(ctx, !g.cfg.ReadOnly)
	if err != nil {
		var pe *PolicyError
		if errors.As(err, &pe) {
			return err
		}
		return g.unknown(err)
	}
	st := &State{Checkpoints: map[string]*Record{}}
	if exists {
		if st, err = g.cfg.Store.Load(ctx); err != nil {
			return g.unknown(err)
		}
	}
	g.id = g.cfg.RelayID
	if g.id == "" {
		g.id = DefaultRelayID(server, g.cfg.Slot)
		g.others = st.SameSlotElsewhere(server, g.cfg.Slot)
		slices.SortFunc(g.others, func(a, b *Record) int { return b.WrittenAt.Compare(a.WrittenAt) })
	} else {
		g.renamed = g.renamed[:0]
		for id, r := range st.Checkpoints {
			if id != g.id && r.SystemID == server.SystemID && r.Database == server.Database && r.Slot == g.cfg.Slot {
				g.renamed = append(g.renamed, r)
			}
		}
		slices.SortFunc(g.renamed, func(a, b *Record) int { return b.WrittenAt.Compare(a.WrittenAt) })
	}
	g.ownOpenRec, g.ownOpen = st.Open[g.id]
	if r := st.Checkpoints[g.id]; r != nil && (g.own == nil || r.Position() > g.own.Position()) {
		g.own = r
		g.written = r.Position()
	}
	g.loaded = true
	return nil
}

// unknown is err as a checkpoint that is unknown, not absent, waiting for
// the store's broker.
func (g *Guard) unknown(err error) error {
	return fmt.Errorf("%w: %w (the checkpoint is unknown, not absent: the relay waits for %s and creates nothing meanwhile)", replication.ErrCheckpointUnavailable, err, g.broker())
}

// broker is the store's broker, for the texts; Kafka without a store.
func (g *Guard) broker() Broker {
	if g.cfg.Store == nil {
		return Kafka
	}
	return g.cfg.Store.Broker()
}

// Check implements replication.Guard.
func (g *Guard) Check(ctx context.Context, in replication.GuardInput) (replication.Verdict, error) {
	v, warns, err := g.Decide(ctx, in)
	for _, w := range warns {
		g.log.Warn(w, "slot", in.Slot, "relay_id", g.RelayID())
	}
	if v == replication.VerdictCreate && err == nil {
		g.log.Info("first start: no slot and no checkpoint for it; creating the slot", "slot", in.Slot, "relay_id", g.RelayID(), g.broker().LogKey(), g.cfg.Store.Topic())
	}
	return v, err
}

// Decide is Check without logging: the verdict, the warnings to give, and a
// fatal error (a *GapError, a *PolicyError) or a retriable one.
func (g *Guard) Decide(ctx context.Context, in replication.GuardInput) (replication.Verdict, []string, error) {
	if err := g.Load(ctx, in.Server); err != nil {
		var pe *PolicyError
		if errors.As(err, &pe) {
			return 0, nil, replication.Fatal(err)
		}
		return 0, nil, err
	}
	g.mu.Lock()
	own, others, renamed := g.own, g.others, g.renamed
	g.mu.Unlock()
	if err := g.mismatch(in, own, renamed); err != nil {
		return 0, nil, replication.Fatal(err)
	}

	if (!in.Exists || in.Info.Invalidated()) && in.First && own == nil && len(others) == 0 && g.cfg.Store != nil {
		// About to take this for a first start: read the topic again, as
		// another instance may have streamed and checkpointed since.
		if err := g.load(ctx, in.Server, true); err != nil {
			return 0, nil, err
		}
		g.mu.Lock()
		own, others = g.own, g.others
		g.mu.Unlock()
	}
	if !in.Exists || in.Info.Invalidated() {
		what := "does not exist"
		if in.Exists {
			what = "was invalidated (" + invalidation(in.Info) + ")"
			if g.cfg.RecreateInvalidated {
				return replication.VerdictRecreate, nil, nil
			}
		}
		gap := &GapError{Broker: g.broker(), Slot: in.Slot, What: what, Checkpoint: own, SystemID: in.Server.SystemID, Timeline: in.Server.Timeline}
		switch {
		case own != nil, in.Exists:
			return 0, nil, replication.Fatal(gap)
		case len(others) > 0:
			gap.Other = others[0]
			return 0, nil, replication.Fatal(gap)
		case !in.First:
			return 0, nil, replication.Fatal(gap)
		}
		return replication.VerdictCreate, nil, nil
	}

	var warns []string
	if own == nil && len(others) > 0 {
		o := others[0]
		warns = append(warns, fmt.Sprintf("adopting the checkpoint of the same database and slot under another system identifier: %s (relay id %s, confirmed %s) is now %s (relay id %s); "+
			"this is a pg_upgrade from PostgreSQL 17 or later, which keeps slots. If it is another cluster under the same names, stop and set --relay-id",
			o.SystemID, o.RelayID, o.LSN, in.Server.SystemID, g.RelayID()))
		return replication.VerdictStream, warns, nil
	}
	if own == nil {
		return replication.VerdictStream, nil, nil
	}
	if own.SystemID != in.Server.SystemID {
		warns = append(warns, fmt.Sprintf("the checkpoint under relay id %s was written by system identifier %s, the server is %s (a pg_upgrade that kept the slot): streaming from the slot, LSNs of the two are not compared",
			own.RelayID, own.SystemID, in.Server.SystemID))
		return replication.VerdictStream, warns, nil
	}
	if own.Timeline != 0 && own.Timeline != in.Server.Timeline {
		hist, err := in.History(ctx)
		if err != nil {
			return 0, nil, err
		}
		g.mu.Lock()
		g.hist, g.histTLI, g.histRead = hist, in.Server.Timeline, true
		g.mu.Unlock()
		if fork, beyond := forkedBefore(hist, own); beyond {
			return 0, nil, replication.Fatal(&GapError{Broker: g.broker(), Slot: in.Slot, Checkpoint: own, Fork: &fork, Timeline: in.Server.Timeline, SystemID: in.Server.SystemID})
		}
	}
	if pos := own.Position(); in.Info.Confirmed < pos {
		switch {
		case g.cfg.ExactlyOnce:
			warns = append(warns, fmt.Sprintf("the slot (confirmed %s) is behind the checkpoint (%s): the transactions between them are in Kafka already and are skipped, not published again", in.Info.Confirmed, own.LSN))
		case own.Timeline == in.Server.Timeline || own.Timeline == 0:
			warns = append(warns, fmt.Sprintf("the slot is behind the checkpoint: events between %s and %s are published again (duplicates, which consumers drop by id)", in.Info.Confirmed, own.LSN))
		default:
			warns = append(warns, fmt.Sprintf("the slot (timeline %d, confirmed %s) is behind the checkpoint (timeline %d, %s), which lies before the fork: events since %s are published again (duplicates)",
				in.Server.Timeline, in.Info.Confirmed, own.Timeline, own.LSN, in.Info.Confirmed))
		}
	}
	return replication.VerdictStream, warns, nil
}

// mismatch is a *MismatchError when the checkpoint under the relay id is
// another slot's or database's, or when an explicit --relay-id finds none
// while this slot's checkpoint is under another id: comparing the slot with
// the wrong checkpoint, or with none, would hide a gap.
func (g *Guard) mismatch(in replication.GuardInput, own *Record, renamed []*Record) error {
	switch {
	case own != nil && own.Kind == KindCheckpoint && (own.Slot != g.cfg.Slot || own.Database != in.Server.Database):
		return &MismatchError{RelayID: own.RelayID, Checkpoint: own, Slot: g.cfg.Slot, Database: in.Server.Database}
	case own == nil && in.Exists && len(renamed) > 0:
		return &MismatchError{RelayID: g.RelayID(), Renamed: renamed[0], Slot: g.cfg.Slot, Database: in.Server.Database}
	}
	return nil
}

// SlotCreated implements replication.Guard: it writes the first checkpoint
// at the new slot's start, and for a recreated slot first the gap.
func (g *Guard) SlotCreated(ctx context.Context, in replication.GuardInput, info replication.SlotInfo, old *replication.SlotInfo) error {
	if err := g.lockWrites(ctx); err != nil {
		return err
	}
	defer g.unlockWrites()
	if old != nil {
		gap, err := g.accept(ctx, in.Server, old.Confirmed, info.Confirmed, "--recreate-lost-slot", "standing consent: --recreate-lost-slot is set")
		if err != nil {
			return err
		}
		b := g.broker()
		g.log.Error("gap accepted under --recreate-lost-slot and recorded in "+b.Checkpoints()+": events committed after the old slot's position may be missing from "+b.String()+"; "+
			"publish them with cdc-relay replay (docs/OPERATIONS.md). cdc-relay slot recreate --accept-gap is the recommended way: it asks each time",
			"slot", in.Slot, "from_lsn", gap.Gap.FromLSN, "to_lsn", gap.Gap.ToLSN, g.broker().LogKey(), g.cfg.Store.Topic(), "key", gap.Key())
	}
	if old == nil && g.cfg.InitialReplay && !in.Created.IsZero() {
		r := g.record(in.Server, info.Confirmed, 0, time.Time{})
		r.InitialReplay = &InitialReplay{Until: in.Created.UTC()}
		return g.writeRecord(ctx, r, info.Confirmed)
	}
	return g.write(ctx, in.Server, info.Confirmed, 0, time.Time{})
}

var (
	_ replication.InitialReplayGuard = (*Guard)(nil)
	_ replication.KnownTablesGuard   = (*Guard)(nil)
)

// KnownTables implements replication.KnownTablesGuard: the tables of the
// relay's own checkpoint on this system.
func (g *Guard) KnownTables(server replication.Server) ([]string, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	own := g.own
	if own == nil || own.Kind != KindCheckpoint || own.SystemID != server.SystemID {
		return nil, false
	}
	return own.Tables, true
}

// PendingReplay implements replication.InitialReplayGuard: the checkpoint
// read again holds a pending initial replay.
func (g *Guard) PendingReplay(ctx context.Context, server replication.Server) (time.Time, bool, error) {
	if err := g.load(ctx, server, true); err != nil {
		return time.Time{}, false, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	own := g.own
	if own == nil || own.Kind != KindCheckpoint || own.InitialReplay == nil || own.SystemID != server.SystemID {
		return time.Time{}, false, nil
	}
	g.replayDone = false
	return own.InitialReplay.Until, true, nil
}

// ReplayDone implements replication.InitialReplayGuard: it writes the
// checkpoint without the pending initial replay.
func (g *Guard) ReplayDone(ctx context.Context, server replication.Server, info replication.SlotInfo) error {
	if err := g.lockWrites(ctx); err != nil {
		return err
	}
	defer g.unlockWrites()
	g.mu.Lock()
	own := g.own
	g.replayDone = true
	g.mu.Unlock()
	pos := info.Confirmed
	if own != nil && own.SystemID == server.SystemID && own.Position() > pos {
		pos = own.Position()
	}
	if err := g.write(ctx, server, pos, 0, time.Time{}); err != nil {
		g.mu.Lock()
		g.replayDone = false
		g.mu.Unlock()
		return err
	}
	return nil
}

// Last is the checkpoint the relay goes on from: its own, else the newest
// of the same database and slot under another system identifier; nil for
// none.
func (g *Guard) Last() *Record {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.own != nil {
		return g.own
	}
	if len(g.others) > 0 {
		return g.others[0]
	}
	return nil
}

// Accept records an accepted gap, from the last checkpoint (or fromLSN
// without one) to toLSN, the new slot's start, and then a checkpoint at
// toLSN, which starts the new history. It returns the gap record.
func (g *Guard) Accept(ctx context.Context, server replication.Server, fromLSN, toLSN replication.LSN, via, reason string) (*Record, error) {
	if err := g.lockWrites(ctx); err != nil {
		return nil, err
	}
	defer g.unlockWrites()
	return g.accept(ctx, server, fromLSN, toLSN, via, reason)
}

// accept is Accept with g.wmu held.
func (g *Guard) accept(ctx context.Context, server replication.Server, fromLSN, toLSN replication.LSN, via, reason string) (*Record, error) {
	gap := g.GapRecord(server, g.Last(), fromLSN, toLSN, via, reason)
	if err := g.cfg.Store.Write(ctx, gap); err != nil {
		return nil, fmt.Errorf("%w: record the accepted gap: %w", replication.ErrCheckpointUnavailable, err)
	}
	g.mu.Lock()
	g.own, g.others, g.written = nil, nil, 0
	g.mu.Unlock()
	if err := g.write(ctx, server, toLSN, 0, time.Time{}); err != nil {
		return nil, err
	}
	return gap, nil
}

// GapRecord is the record of an accepted gap from the last checkpoint (or,
// without one, fromLSN) to the new slot's start.
func (g *Guard) GapRecord(server replication.Server, from *Record, fromLSN, toLSN replication.LSN, via, reason string) *Record {
	r := g.record(server, toLSN, 0, time.Time{})
	r.Kind = KindGap
	r.Gap = &Gap{FromLSN: fromLSN.String(), ToLSN: toLSN.String(), AcceptedAt: r.WrittenAt, AcceptedBy: whoami(), Reason: reason, Via: via}
	if from != nil {
		r.Gap.FromLSN = from.LSN
		r.Gap.FromCommitTime = from.LastCommitTime
	}
	return r
}

// lockWrites takes wmu, or gives up when ctx ends first.
func (g *Guard) lockWrites(ctx context.Context) error {
	select {
	case g.wmu <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for the checkpoint write before this one: %w", ctx.Err())
	}
}

// unlockWrites releases wmu.
func (g *Guard) unlockWrites() { <-g.wmu }
