package replication

import (
	"errors"
	"fmt"
)

// ErrSlotLost means the slot's wal_status is "lost": PostgreSQL removed WAL the
// slot still needed, so events may have been lost. The relay stops; it never
// recreates the slot silently.
var ErrSlotLost = errors.New("replication slot lost: PostgreSQL removed WAL it still needed, events may have been lost")

// ErrSlotDropped means the slot is missing after the relay had found or
// created it: it was dropped, or PostgreSQL failed over to a server that has
// no synchronised copy. The relay stops; it never creates a new slot then,
// as that slot would start after events nobody published.
var ErrSlotDropped = errors.New("replication slot does not exist: events may have been lost (it was dropped while the relay was running, " +
	"or PostgreSQL failed over to a server without a synchronised copy of it: on PostgreSQL 17+ use a failover slot, --slot-failover auto or true, " +
	"and a standby with sync_replication_slots = on)")

// ErrWaitingPromotion means the server the relay reached is a standby (in
// recovery), or its synchronised slot cannot be used before a promotion
// (SQLSTATE 55000). The relay waits and retries; it never creates a slot there.
var ErrWaitingPromotion = errors.New("standby: waiting for promotion")

// ServerTooOldError is a setting that needs a newer PostgreSQL than the
// server's. It is a configuration error: the relay exits with code 2.
type ServerTooOldError struct {
	Feature string // e.g. "failover slots"
	Setting string // the flag, without dashes
	Value   string // its value
	Server  string // server_version
	Need    int    // the first major that has the feature
}

func (e *ServerTooOldError) Error() string {
	return fmt.Sprintf("--%s %s: %s need PostgreSQL %d or later, the server is PostgreSQL %s: upgrade, or set --%s auto",
		e.Setting, e.Value, e.Feature, e.Need, e.Server, e.Setting)
}

// ErrFenced means another relay with the same transactional id took over
// (exactly-once delivery: Kafka answered PRODUCER_FENCED or
// INVALID_PRODUCER_EPOCH). The session wraps it into its error; the stream
// reconnects with cause "fenced" and, as the slot is held by the relay that
// fenced this one, becomes a standby.
var ErrFenced = errors.New("fenced")

// ErrSlotActive means another process streams from the slot (SQLSTATE 55006);
// this instance is a standby and keeps retrying.
var ErrSlotActive = errors.New("replication slot is active in another process")

// UnrecoverableError is an error no retry can fix: PostgreSQL refused the
// credentials (SQLSTATE 28P01, 28000), the role lacks a privilege (42501),
// the database or role does not exist (3D000, 28000), or wal_level is below
// logical. Stream.Run returns it at once, having logged one ERROR line with
// the cause and the fix; the relay exits 1 without --halt-linger, so that a
// supervisor's restart policy shows the crash loop. It is reported only for
// a server's own answer (never for a network failure, a timeout or a
// standby), see Unrecoverable.
type UnrecoverableError struct {
	Cause string // what is wrong, e.g. the server's message and SQLSTATE
	Fix   string // what the operator does about it
	Err   error  // the error behind it; nil for the wal_level check
}

func (e *UnrecoverableError) Error() string { return e.Cause + ": " + e.Fix }
func (e *UnrecoverableError) Unwrap() error { return e.Err }

// SlotError describes a slot that exists but cannot be used.
type SlotError struct {
	Slot   string
	Reason string
	Fix    string
}

func (e *SlotError) Error() string {
	return fmt.Sprintf("replication slot %q: %s; fix: %s", e.Slot, e.Reason, e.Fix)
}

// OtherPluginFix is the fix for a slot of another output plugin (a
// Debezium decoderbufs or a wal2json slot), the procedure of
// docs/MIGRATING.md section B: the relay's own slot is created while the old
// reader still runs, so every transaction is in one slot or the other. A
// slot created after the old reader stopped would start after events it
// never published.
func OtherPluginFix(slot string) string {
	return "set --slot to a new name so the relay creates its own pgoutput slot, and do it BEFORE the old reader stops; " +
		"wait until the old slot's confirmed_flush_lsn has passed the new slot's start (the relay logs it: \"slot created ... confirmed_lsn\"), " +
		"then stop the old reader and drop its slot (SELECT pg_drop_replication_slot('" + slot + "')); " +
		"stopping it first leaves a gap (docs/MIGRATING.md, section B)"
}

// FatalError wraps an error after which retrying cannot help: the relay stops
// and reports it. Halts on invalid events and lost slots are fatal.
type FatalError struct{ Err error }

func (e *FatalError) Error() string { return e.Err.Error() }
func (e *FatalError) Unwrap() error { return e.Err }

// Fatal marks err as fatal (nil stays nil).
func Fatal(err error) error {
	if err == nil {
		return nil
	}
	return &FatalError{Err: err}
}

// IsFatal reports whether err, or an error it wraps, is fatal.
func IsFatal(err error) bool {
	var f *FatalError
	return errors.As(err, &f)
}
