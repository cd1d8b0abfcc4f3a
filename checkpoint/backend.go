package checkpoint

import "context"

// Backend is where checkpoints live: what a broker must give the Guard to
// hold the relay's memory outside the slot. Store (a compacted Kafka topic)
// is the first; a second broker brings its own. Every method says "unknown"
// with an error: a Backend that cannot be read is never taken as empty.
type Backend interface {
	// Topic names the place, for messages and logs (a Kafka topic, or the
	// second broker's equivalent).
	Topic() string
	// Ensure makes the place when it is missing and create is true, and
	// checks that an existing one keeps every key's newest record for ever
	// (compaction on Kafka). exists is false only when it is missing and
	// create is false.
	Ensure(ctx context.Context, create bool) (exists bool, err error)
	// Load reads every record to the end, newest per key; a tombstone
	// removes its key. A record in a transaction still open at the end is
	// not taken, and its key is in State.Open (a broker without
	// transactions leaves it empty).
	Load(ctx context.Context) (*State, error)
	// Write appends rec under its key and returns once it is durable.
	Write(ctx context.Context, rec *Record) error
	// Close releases the connections; a Backend used after Close opens
	// them again.
	Close()
	// Broker names the broker, for the operator's texts (GapError).
	Broker() Broker
}

var _ Backend = (*Store)(nil)
