package replication

import (
	"context"
	"time"

	"github.com/cdc-relay/cdc-relay/decoder"
)

// Tx describes the transaction a row belongs to.
type Tx struct {
	Xid        uint32
	FinalLSN   LSN
	CommitTime time.Time
}

// Session consumes the rows of one replication connection. A new session is
// made after every (re)connect, so nothing in flight survives a reconnect:
// the stream restarts from the confirmed LSN instead.
type Session interface {
	// Row hands over one outbox row, in stream order. seq identifies it to
	// Tracker.Ack and size is what Tracker reserved for it. The row aliases
	// the receive buffer: copy what you keep. Row must not block for long; a
	// FatalError halts the relay, any other error reconnects.
	Row(ctx context.Context, seq uint64, size int, tx *Tx, row *decoder.Row) error
	// Drain waits until every row handed over has been acknowledged through
	// the tracker, or ctx is done.
	Drain(ctx context.Context) error
	// Close stops the session and drops whatever is still in flight.
	Close()
	// Done is closed when the session stopped by itself (a terminal error,
	// returned by Err); the stream then reconnects.
	Done() <-chan struct{}
	// Err is the error that stopped the session, nil while it runs.
	Err() error
}

// Bounded is a Session that is told where each PostgreSQL transaction ends
// (exactly-once delivery: a Kafka transaction ends only there). The reader
// calls Boundary after Tracker.Commit, with the sequence number of the
// transaction's last row (or of the row before it, for one without rows).
type Bounded interface {
	Boundary(lastSeq uint64, end LSN, commitTime time.Time)
}

// SlotLosing is a Session told, before Close, that its replication
// connection failed: the slot, the leader lock, may be another instance's
// by now, so the session must not act on what only the lock holder may
// (exactly-once: abort the open Kafka transaction).
type SlotLosing interface {
	SlotLost()
}

// Stopping is a Session told, before Close, that the relay is stopping
// (shutdown or a halt), not reconnecting: Close need not wait long for the
// broker to give up what it still holds, since the process ends next.
type Stopping interface {
	Stopping()
}

// Skipping is a Session that has read, once it held the slot, what is
// already in Kafka: every transaction whose commit ends at or below
// SkipBelow is skipped, because the slot may send it again (exactly-once
// delivery). 0 skips nothing.
type Skipping interface {
	SkipBelow() LSN
}

// NewSessionFunc makes the session for one connection; acknowledgements go to tr.
type NewSessionFunc func(ctx context.Context, tr *Tracker) (Session, error)

// RowSize is the in-flight size charged for a row.
func RowSize(r *decoder.Row) int {
	n := 64 + len(r.ID) + len(r.AggregateType) + len(r.AggregateID) + len(r.EventType) + len(r.Payload) + len(r.Headers)
	for _, v := range r.Extra {
		n += len(v)
	}
	if r.Other != nil { // a row of another table
		for _, v := range r.Other.Values {
			n += len(v)
		}
	}
	return n
}
