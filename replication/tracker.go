package replication

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Tracker is the acknowledgement rule. The stream gives every outbox row a
// sequence number (Reserve) and records each transaction's commit end LSN
// after its last row (Commit). The publisher acknowledges a contiguous prefix
// of sequence numbers (Ack). Confirmed returns the end LSN of the newest
// transaction whose rows, and the rows of every transaction before it, are
// all acknowledged — never a row's LSN.
//
// Tracker also bounds what is in flight, in events and in bytes: Reserve
// fails when either bound is reached, and Room signals when Ack frees space.
// It keeps, per in-flight event, when the event was read, in a ring indexed
// by sequence number: the oldest unacknowledged event is always the one after
// the acknowledged prefix, so OldestInFlight is one lookup, and Reserve adds
// one store to the per-event path (no allocation once the ring has grown to
// the peak in-flight count, at most maxEvents rounded up to a power of two).
//
// Under exactly-once delivery (RequireCommit) an acknowledgement only frees
// room: a transaction is confirmed once its rows are also in a committed
// Kafka transaction (Committed), so that a transaction larger than the
// in-flight bound streams through without deadlocking.
//
// With a checkpoint (RequireCheckpoint) the slot follows it: Ready is the
// acknowledged prefix, a checkpoint is written at it (Unwritten), and only
// once that write is durable (Checkpointed) does Confirmed move there. The
// slot's confirmed_flush_lsn therefore never passes the relay's checkpoint,
// which is how a slot made or moved by hand is told from one the relay
// advanced.
//
// All methods are safe for concurrent use; the stream calls Reserve, Commit
// and AdvanceIdle, the publisher calls Ack and Committed, and the checkpoint
// writer Unwritten and Checkpointed.
type Tracker struct {
	maxEvents int
	maxBytes  int64
	// needCommit is set under exactly-once: committed bounds what
	// confirms, besides acked.
	needCommit bool
	committed  uint64
	// needCkpt is set with a checkpoint: durable bounds what confirms.
	needCkpt bool

	mu      sync.Mutex
	events  int   // reserved and not yet acknowledged
	bytes   int64 // likewise
	last    uint64
	acked   uint64
	commits []commit // commits not yet confirmed, oldest first
	head    int
	// ready is the end of the acknowledged prefix: what may be confirmed
	// once a checkpoint covers it.
	ready     LSN
	readyTime time.Time // commit time of the newest transaction in the prefix
	// readyCommit is the end LSN of that transaction
	readyCommit LSN
	// durable is the LSN the newest durable checkpoint covers, with its
	// newest transaction (only with needCkpt).
	durable       LSN
	durableCommit LSN
	durableTime   time.Time
	room          chan struct{}
	progress      chan struct{}
	pending       chan struct{}
	retired       atomic.Bool // its connection ended (Retire)
	// base is the monotonic origin of reads; reads[seq&(len(reads)-1)]
	// holds when in-flight event seq was read, in nanoseconds since base.
	base  time.Time
	reads []int64
}

// initialReads is the ring's first size; it doubles as the in-flight
// window grows past it.
const initialReads = 256

type commit struct {
	lastSeq uint64
	end     LSN
	time    time.Time
}

// NewTracker returns a tracker that starts from the slot's confirmed LSN and
// lets at most maxEvents events and maxBytes bytes be in flight.
func NewTracker(confirmed LSN, maxEvents int, maxBytes int64) *Tracker {
	if maxEvents <= 0 {
		maxEvents = 1
	}
	if maxBytes <= 0 {
		maxBytes = 1
	}
	return &Tracker{
		maxEvents: maxEvents,
		maxBytes:  maxBytes,
		ready:     confirmed,
		durable:   confirmed,
		room:      make(chan struct{}, 1),
		progress:  make(chan struct{}, 1),
		pending:   make(chan struct{}, 1),
		base:      time.Now(),
		reads:     make([]int64, initialReads),
	}
}

// Reserve takes room for one event of size bytes, read from the slot at
// read (a time.Now() reading the caller already has: its monotonic part is
// what counts), and returns its sequence number. It returns ok=false when
// the in-flight bound is reached; a single event larger than the byte bound
// is admitted when nothing else is in flight.
func (t *Tracker) Reserve(size int, read time.Time) (seq uint64, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.events > 0 && (t.events >= t.maxEvents || t.bytes+int64(size) > t.maxBytes) {
		return 0, false
	}
	t.events++
	t.bytes += int64(size)
	t.last++
	if t.last-t.acked > uint64(len(t.reads)) {
		t.growReads()
	}
	t.reads[t.last&uint64(len(t.reads)-1)] = int64(read.Sub(t.base))
	return t.last, true
}

// growReads doubles the ring of read times, keeping the in-flight events'
// entries (t.mu held).
func (t *Tracker) growReads() {
	reads := make([]int64, 2*len(t.reads))
	oldMask, newMask := uint64(len(t.reads)-1), uint64(len(reads)-1)
	for seq := t.acked + 1; seq < t.last; seq++ {
		reads[seq&newMask] = t.reads[seq&oldMask]
	}
	t.reads = reads
}

// OldestInFlight is how long ago the oldest event reserved and not yet
// acknowledged was read; 0 when nothing is in flight.
func (t *Tracker) OldestInFlight(now time.Time) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.acked >= t.last {
		return 0
	}
	read := t.reads[(t.acked+1)&uint64(len(t.reads)-1)]
	if age := now.Sub(t.base) - time.Duration(read); age > 0 {
		return age
	}
	return 0
}

// Room is signalled after an Ack frees space.
func (t *Tracker) Room() <-chan struct{} { return t.room }

// WaitRoom reserves like Reserve (read is still when the event was read:
// its wait for room counts towards its age), blocking until there is room, tick fires
// (ok=false, nil error: the caller has periodic work to do) or ctx is done.
//
// stop ends the wait with ErrStopped: the consumer of the events is gone and
// no room will come.
func (t *Tracker) WaitRoom(ctx context.Context, size int, read time.Time, tick <-chan time.Time, stop <-chan struct{}) (seq uint64, ok bool, err error) {
	for {
		if seq, ok := t.Reserve(size, read); ok {
			return seq, true, nil
		}
		select {
		case <-ctx.Done():
			return 0, false, ctx.Err()
		case <-stop:
			return 0, false, ErrStopped
		case <-tick:
			return 0, false, nil
		case <-t.room:
		}
	}
}

// ErrStopped is returned by WaitRoom when the stop channel closes.
var ErrStopped = errors.New("stopped while waiting for in-flight room")

// Commit records that the transaction whose rows were reserved last ends at
// end. Transactions without rows are fine: they confirm once everything
// before them is acknowledged.
func (t *Tracker) Commit(end LSN, commitTime time.Time) {
	t.mu.Lock()
	t.commits = append(t.commits, commit{lastSeq: t.last, end: end, time: commitTime})
	before := t.confirmedLocked()
	moved := t.advance()
	t.mu.Unlock()
	t.signal(before, moved)
}

// Ack acknowledges every event with a sequence number up to upTo, and frees
// the events and bytes they held. Acks must be contiguous: the caller
// acknowledges in sequence order.
func (t *Tracker) Ack(upTo uint64, events int, bytes int64) {
	t.mu.Lock()
	if upTo > t.acked {
		t.acked = upTo
	}
	t.events -= events
	t.bytes -= bytes
	before := t.confirmedLocked()
	moved := t.advance()
	t.mu.Unlock()
	select {
	case t.room <- struct{}{}:
	default:
	}
	t.signal(before, moved)
}

// signal tells the checkpoint writer that the prefix moved, and the stream
// that the confirmed LSN did (it was before, t.mu released).
func (t *Tracker) signal(before LSN, moved bool) {
	if !moved {
		return
	}
	select {
	case t.pending <- struct{}{}:
	default:
	}
	if t.Confirmed() > before {
		select {
		case t.progress <- struct{}{}:
		default:
		}
	}
}

// RequireCommit makes confirmation wait for Committed as well as Ack; call
// it before the tracker is used.
func (t *Tracker) RequireCommit() {
	t.mu.Lock()
	t.needCommit = true
	t.mu.Unlock()
}

// Committed records that every event up to upTo is in a committed Kafka
// transaction (publisher.TxnAcker).
func (t *Tracker) Committed(upTo uint64) {
	t.mu.Lock()
	if upTo > t.committed {
		t.committed = upTo
	}
	before := t.confirmedLocked()
	moved := t.advance()
	t.mu.Unlock()
	t.signal(before, moved)
}

// RequireCheckpoint makes confirmation wait for Checkpointed as well; call
// it before the tracker is used.
func (t *Tracker) RequireCheckpoint() {
	t.mu.Lock()
	t.needCkpt = true
	t.mu.Unlock()
}

// Pending is signalled when the acknowledged prefix moved: a checkpoint may
// be due (Unwritten).
func (t *Tracker) Pending() <-chan struct{} { return t.pending }

// Retire says that the tracker's connection has ended: nothing moves its
// prefix any more, and the next connection has a tracker of its own. It
// signals Pending once more, so that a checkpoint writer waiting on it
// wakes up, writes what is left and polls for the next tracker.
func (t *Tracker) Retire() {
	t.retired.Store(true)
	select {
	case t.pending <- struct{}{}:
	default:
	}
}

// Retired reports whether Retire was called.
func (t *Tracker) Retired() bool { return t.retired.Load() }

// Unwritten returns the acknowledged prefix (Ready) with its newest
// transaction's end and commit time, and ok=false when a durable checkpoint
// covers it already.
func (t *Tracker) Unwritten() (pos, commitEnd LSN, commitTime time.Time, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ready, t.readyCommit, t.readyTime, t.ready > t.durable
}

// Checkpointed records that a checkpoint at pos (newest transaction ending
// at commitEnd, committed at commitTime) is durable: Confirmed may move up
// to it.
func (t *Tracker) Checkpointed(pos, commitEnd LSN, commitTime time.Time) {
	t.mu.Lock()
	before := t.confirmedLocked()
	if pos > t.durable {
		t.durable = pos
		if !commitTime.IsZero() {
			t.durableCommit, t.durableTime = commitEnd, commitTime
		}
	}
	after := t.confirmedLocked()
	t.mu.Unlock()
	if after > before {
		select {
		case t.progress <- struct{}{}:
		default:
		}
	}
}

// LastSeq is the sequence number of the newest reserved event (0 before
// the first).
func (t *Tracker) LastSeq() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last
}

// Progress is signalled after an Ack moved the confirmed LSN, so the stream
// can report it without waiting for its next status tick.
func (t *Tracker) Progress() <-chan struct{} { return t.progress }

// advance moves the prefix over the transactions now acknowledged, and
// reports whether it moved (t.mu held).
func (t *Tracker) advance() (moved bool) {
	done := t.acked
	if t.needCommit && t.committed < done {
		done = t.committed
	}
	for t.head < len(t.commits) && t.commits[t.head].lastSeq <= done {
		c := t.commits[t.head]
		if c.end > t.ready {
			t.ready = c.end
			t.readyTime, t.readyCommit = c.time, c.end
			moved = true
		}
		t.head++
	}
	if t.head == len(t.commits) {
		t.commits, t.head = t.commits[:0], 0
	} else if t.head > 1024 && t.head*2 > len(t.commits) {
		n := copy(t.commits, t.commits[t.head:])
		t.commits, t.head = t.commits[:n], 0
	}
	return moved
}

// confirmedLocked is Confirmed with t.mu held.
func (t *Tracker) confirmedLocked() LSN {
	if t.needCkpt && t.durable < t.ready {
		return t.durable
	}
	return t.ready
}

// AdvanceIdle moves the confirmed LSN to walEnd, taken from a keepalive, when
// nothing is in flight. The stream calls it only outside a transaction, so a
// busy database with an idle outbox does not pile up WAL.
func (t *Tracker) AdvanceIdle(walEnd LSN) bool {
	t.mu.Lock()
	if t.acked != t.last || t.head != len(t.commits) || walEnd <= t.ready {
		t.mu.Unlock()
		return false
	}
	before := t.confirmedLocked()
	t.ready = walEnd
	t.mu.Unlock()
	t.signal(before, true)
	return true
}

// Confirmed returns the LSN that is safe to confirm to PostgreSQL: the
// acknowledged prefix, and with a checkpoint no further than it covers.
func (t *Tracker) Confirmed() LSN {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.confirmedLocked()
}

// ReadyCommit is the end LSN and commit time of the newest transaction in
// the acknowledged prefix (zero before the first).
func (t *Tracker) ReadyCommit() (LSN, time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.readyCommit, t.readyTime
}

// Ready is the end of the acknowledged prefix, which Confirmed reaches once
// a checkpoint covers it.
func (t *Tracker) Ready() LSN {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ready
}

// Idle reports whether every reserved event is acknowledged and every commit confirmed.
func (t *Tracker) Idle() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.acked == t.last && t.head == len(t.commits)
}

// ConfirmedCommitTime is the commit time of the newest confirmed transaction
// (zero before the first).
func (t *Tracker) ConfirmedCommitTime() time.Time {
	_, ct := t.ConfirmedCommit()
	return ct
}

// ConfirmedCommit is the end LSN and commit time of the newest confirmed
// transaction (zero before the first); Confirmed may be further on, at an
// idle position.
func (t *Tracker) ConfirmedCommit() (LSN, time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.needCkpt && t.durable < t.ready {
		return t.durableCommit, t.durableTime
	}
	return t.readyCommit, t.readyTime
}

// InFlight returns the events and bytes reserved and not yet acknowledged.
func (t *Tracker) InFlight() (events int, bytes int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.events, t.bytes
}
