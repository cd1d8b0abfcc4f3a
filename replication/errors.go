package replication

import (
	"errors"
	"fmt"
)

// ErrSlotLost means the slot's wal_status is "lost": PostgreSQL removed WAL the
// slot still needed, so events may have been lost. The relay stops; it never
// recreates the slot silently.
var ErrSlotLost = errors.New("replication slot lost: PostgreSQL removed WAL it still needed, events may have been lost")

// ErrSlotDropped means the slot disappeared while the relay was running.
var ErrSlotDropped = errors.New("replication slot was dropped while the relay was running: events may have been lost")

// ErrSlotActive means another process streams from the slot (SQLSTATE 55006);
// this instance is a standby and keeps retrying.
var ErrSlotActive = errors.New("replication slot is active in another process")

// SlotError describes a slot that exists but cannot be used.
type SlotError struct {
	Slot   string
	Reason string
	Fix    string
}

func (e *SlotError) Error() string {
	return fmt.Sprintf("replication slot %q: %s; fix: %s", e.Slot, e.Reason, e.Fix)
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
