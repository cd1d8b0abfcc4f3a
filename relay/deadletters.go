package relay

import (
	"time"

	"sync"

	"github.com/cdc-relay/cdc-relay/replication"
)

// deadLetters counts the relay's dead letters in
// cdc_relay_dlq_events_total{reason}. At least once, a dead letter is
// counted when it is handed to the publisher. Exactly once, it is counted
// when the Kafka transaction that holds it has committed: a transaction
// that aborts (a record the broker refused, a Kafka failure) is read again
// from the checkpoint with its dead letters, and counting them on the way
// in would count each once per attempt, though a read_committed consumer
// sees it once.
type deadLetters struct {
	count       func(reason string) // adds one to the metric
	exactlyOnce bool

	mu      sync.Mutex
	pending []pendingLetter // exactly-once: handed over, not yet committed
}

// pendingLetter is a dead letter of the open Kafka transaction.
type pendingLetter struct {
	seq    uint64
	reason string
}

// add counts the dead letter of seq, or under exactly-once keeps it until
// its transaction commits.
func (d *deadLetters) add(seq uint64, reason string) {
	if !d.exactlyOnce {
		d.count(reason)
		return
	}
	d.mu.Lock()
	d.pending = append(d.pending, pendingLetter{seq, reason})
	d.mu.Unlock()
}

// begin starts a session: the dead letters an earlier session kept were
// in a Kafka transaction that never committed, and the new session reads
// them again.
func (d *deadLetters) begin() {
	d.mu.Lock()
	d.pending = d.pending[:0]
	d.mu.Unlock()
}

// committed counts the kept dead letters up to seq upTo, whose Kafka
// transaction has committed.
func (d *deadLetters) committed(upTo uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	kept := d.pending[:0]
	for _, l := range d.pending {
		if l.seq <= upTo {
			d.count(l.reason)
		} else {
			kept = append(kept, l)
		}
	}
	d.pending = kept
}

// commitAcker is the acker of an exactly-once session: the connection's
// tracker, which also learns from it which dead letters were committed.
type commitAcker struct {
	*replication.Tracker
	dead *deadLetters
}

// Committed counts the transaction's dead letters, then lets the tracker
// confirm it: once PostgreSQL is confirmed past a dead letter, it counts.
func (a commitAcker) Committed(upTo uint64) {
	a.dead.committed(upTo)
	a.Tracker.Committed(upTo)
}

// Checkpointed lets the tracker confirm up to end: a committed Kafka
// transaction holds the checkpoint at end (publisher.Checkpointer).
func (a commitAcker) Checkpointed(end, commitEnd uint64, commitTime time.Time) {
	a.Tracker.Checkpointed(replication.LSN(end), replication.LSN(commitEnd), commitTime)
}

// Unwritten is the tracker's acknowledged prefix when no committed
// checkpoint covers it yet (publisher.Checkpointer).
func (a commitAcker) Unwritten() (end, commitEnd uint64, commitTime time.Time, ok bool) {
	pos, cend, ct, ok := a.Tracker.Unwritten()
	return uint64(pos), uint64(cend), ct, ok
}
