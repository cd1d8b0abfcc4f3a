package replication

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
)

// Server is what IDENTIFY_SYSTEM says of the server a connection reached.
type Server struct {
	// SystemID is the cluster's system identifier: the same on a primary
	// and its physical standbys, new after initdb or pg_upgrade.
	SystemID string
	// Timeline is the server's current timeline; a promotion or a
	// point-in-time restore starts a new one.
	Timeline uint32
	// Database is the database the connection is attached to.
	Database string
	// XLogPos is the server's current WAL flush position.
	XLogPos LSN
}

// TimelineSwitch is one line of a timeline history file: timeline TLI
// ended at Switch, where its successor forked off.
type TimelineSwitch struct {
	TLI    uint32
	Switch LSN
}

// Verdict is what a Guard allows the stream to do with the slot it found.
type Verdict int

// The verdicts.
const (
	// VerdictStream streams from the slot as it is; a missing slot halts.
	VerdictStream Verdict = iota
	// VerdictCreate creates the missing slot: a first start.
	VerdictCreate
	// VerdictRecreate drops the invalidated slot and creates it anew: the
	// operator has consented to the gap (--recreate-lost-slot).
	VerdictRecreate
)

// GuardInput is what a Guard decides from.
type GuardInput struct {
	Server Server
	// Slot is the slot's name; Info its row, when Exists.
	Slot   string
	Info   SlotInfo
	Exists bool
	// First is true until this process has streamed from the slot once;
	// after that a missing slot can never be a first start.
	First bool
	// Created is the database clock read right after the stream created
	// the slot (first start; zero otherwise), for SlotCreated.
	Created time.Time
	// History reads the server's timeline history (TIMELINE_HISTORY) of
	// its current timeline: the switch points of every ancestor.
	History func(ctx context.Context) ([]TimelineSwitch, error)
}

// Guard decides, on every connection, before anything is created and
// before the slot is streamed from, what the stream may do with the slot:
// package checkpoint implements it from the relay's own memory in Kafka,
// so that a lost slot is never mistaken for a first start. An error marked
// Fatal halts the stream; any other is retried (a memory that cannot be
// read is unknown, not absent).
type Guard interface {
	Check(ctx context.Context, in GuardInput) (Verdict, error)
	// SlotCreated is called after the stream created the slot (VerdictCreate)
	// or recreated it (VerdictRecreate; old is the invalidated slot's row).
	SlotCreated(ctx context.Context, in GuardInput, info SlotInfo, old *SlotInfo) error
	// Holding is called once this instance holds the slot (after
	// START_REPLICATION), with the slot's row read then, which no other
	// instance can move any more: the guard decides whether the slot is
	// where the relay left it. Every tracker then confirms only what a
	// checkpoint covers (Tracker.RequireCheckpoint).
	Holding(ctx context.Context, in GuardInput, info SlotInfo) error
	// Checkpoint writes a checkpoint at tr's acknowledged prefix now, if
	// none covers it yet: the stream calls it before its final status
	// update, so that the final confirm follows the final checkpoint.
	Checkpoint(ctx context.Context, server Server, tr *Tracker) error
}

// KnownTablesGuard is implemented by a Guard that remembers the tables of
// the relay's last checkpoint: a configured table that is not among them
// joined later, and its rows from before it joined were never decoded.
type KnownTablesGuard interface {
	// KnownTables are the tables ("schema.table" or as configured) of the
	// relay's own last checkpoint on server; false when there is none.
	KnownTables(server Server) ([]string, bool)
}

// ErrCheckpointUnavailable marks a failure to read or write the relay's
// checkpoint: retried like any Kafka outage.
var ErrCheckpointUnavailable = errors.New("checkpoint unavailable")

// Invalidated reports whether PostgreSQL invalidated the slot: its WAL was
// removed (wal_status lost) or, on a standby, it conflicted with recovery.
func (i SlotInfo) Invalidated() bool {
	return i.WALStatus == "lost" || i.Conflicting || i.InvalidationReason != ""
}

// Identify runs IDENTIFY_SYSTEM on a replication connection.
func Identify(ctx context.Context, rconn *pgconn.PgConn) (Server, error) {
	sys, err := pglogrepl.IdentifySystem(ctx, rconn)
	if err != nil {
		return Server{}, fmt.Errorf("identify system: %w", err)
	}
	return Server{SystemID: sys.SystemID, Timeline: uint32(sys.Timeline), Database: sys.DBName, XLogPos: LSN(sys.XLogPos)}, nil
}

// TimelineHistory reads the history of timeline tli (TIMELINE_HISTORY):
// nothing for timeline 1, which has no ancestors.
func TimelineHistory(ctx context.Context, rconn *pgconn.PgConn, tli uint32) ([]TimelineSwitch, error) {
	if tli <= 1 {
		return nil, nil
	}
	res, err := pglogrepl.TimelineHistory(ctx, rconn, int32(tli))
	if err != nil {
		return nil, fmt.Errorf("timeline history of %d: %w", tli, err)
	}
	return ParseTimelineHistory(res.Content)
}

// ParseTimelineHistory parses a timeline history file: lines of
// "parentTLI<TAB>switchpoint<TAB>reason"; blank lines and # comments are
// skipped.
func ParseTimelineHistory(content []byte) ([]TimelineSwitch, error) {
	var out []TimelineSwitch
	sc := bufio.NewScanner(strings.NewReader(string(content)))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			return nil, fmt.Errorf("timeline history: bad line %q", line)
		}
		tli, err := strconv.ParseUint(f[0], 10, 32)
		if err != nil {
			return nil, fmt.Errorf("timeline history: bad timeline in %q", line)
		}
		lsn, err := ParseLSN(f[1])
		if err != nil {
			return nil, fmt.Errorf("timeline history: bad switch point in %q", line)
		}
		out = append(out, TimelineSwitch{TLI: uint32(tli), Switch: lsn})
	}
	return out, sc.Err()
}
