package checkpoint

import (
	"fmt"
	"strings"
	"time"

	"github.com/cdc-relay/cdc-relay/replication"
)

// ReplayMargin is how far before the last confirmed commit the suggested
// replay starts: created_at defaults to now(), a transaction's start, so a
// transaction open when the gap began has an earlier created_at.
const ReplayMargin = 15 * time.Minute

// Broker names, in the operator's texts, the broker the events go to and
// where the checkpoint lives: Kafka and its checkpoint topic, or RabbitMQ
// and its checkpoint streams. The zero value is Kafka.
type Broker string

// The brokers a Backend names (Backend.Broker).
const (
	Kafka    Broker = "Kafka"
	RabbitMQ Broker = "RabbitMQ"
)

// String is the broker's name, "Kafka" for the zero value.
func (b Broker) String() string {
	if b == RabbitMQ {
		return string(RabbitMQ)
	}
	return string(Kafka)
}

// Checkpoints names where the checkpoint lives: "the checkpoint topic",
// or under RabbitMQ "the checkpoint streams".
func (b Broker) Checkpoints() string {
	if b == RabbitMQ {
		return "the checkpoint streams"
	}
	return "the checkpoint topic"
}

// LogKey is the log key that names where the checkpoint lives:
// "checkpoint_topic", or under RabbitMQ "checkpoint_stream" (the streams'
// prefix, --rabbitmq-checkpoint-stream).
func (b Broker) LogKey() string {
	if b == RabbitMQ {
		return "checkpoint_stream"
	}
	return "checkpoint_topic"
}

// GapError means events may be missing from Kafka: the slot is gone or
// invalidated while the relay has a history, or Kafka holds events of a
// timeline the server no longer has. The relay creates nothing and exits 3;
// the operator decides (slot recreate --accept-gap, then replay).
type GapError struct {
	// Broker is where the events went, for the text; zero: Kafka.
	Broker Broker
	Slot   string
	// What happened, e.g. "does not exist" or "was invalidated (wal_status lost)".
	What string
	// Checkpoint is the relay's last checkpoint, when it has one.
	Checkpoint *Record
	// Other is a checkpoint of the same database and slot under another
	// system identifier (a pg_upgrade before 17, or another cluster).
	Other    *Record
	SystemID string
	// Fork is set when the checkpoint lies beyond the point where the
	// server's timeline forked off the checkpoint's.
	Fork *replication.TimelineSwitch
	// Timeline is the server's timeline.
	Timeline uint32
	// Ahead is the slot's confirmed LSN when the slot exists but is past
	// the checkpoint: it was made or moved outside the relay.
	Ahead replication.LSN
}

func (e *GapError) Error() string {
	var b strings.Builder
	broker, place := e.Broker.String(), e.Broker.Checkpoints()
	switch {
	case e.Ahead != 0 && e.Checkpoint != nil:
		fmt.Fprintf(&b, "replication slot %q is at %s, ahead of the relay's checkpoint (relay id %s) at %s%s: "+
			"the relay confirms to PostgreSQL only what its checkpoint covers, so the slot was made or moved outside the relay "+
			"(created again by hand, moved with pg_replication_slot_advance, made on a promoted primary after a failover without failover slots, or advanced by another consumer such as Debezium); "+
			"events committed between %s and %s were never read from it and may be missing from %s. The relay streams nothing until an operator accepts it. To go on: "+
			"1. cdc-relay slot recreate --accept-gap --reason TEXT (same settings) keeps the slot and records the gap; "+
			"2. %s publishes the missing events again from the outbox table (consumers deduplicate on id)",
			e.Slot, e.Ahead, e.Checkpoint.RelayID, e.Checkpoint.LSN, commitText(e.Checkpoint), e.Checkpoint.LSN, e.Ahead, broker, replayCommand(e.Checkpoint))
		return b.String()
	case e.Fork != nil:
		holds := "Kafka holds"
		if e.Broker == RabbitMQ {
			holds = "RabbitMQ has delivered"
		}
		fmt.Fprintf(&b, "the server's timeline %d forked off timeline %d at %s, but the relay's checkpoint (relay id %s) is at %s on timeline %d%s: "+
			"%s events of a timeline this database no longer has (an asynchronous standby was promoted, or the database was restored to a point in time); "+
			"events committed after %s on the old timeline are not in this database, and consumers may have acted on them",
			e.Timeline, e.Fork.TLI, e.Fork.Switch, e.Checkpoint.RelayID, e.Checkpoint.LSN, e.Checkpoint.Timeline, commitText(e.Checkpoint), holds, e.Fork.Switch)
		fmt.Fprintf(&b, "; the relay streams nothing until an operator accepts it: check what consumers did with those events, then run cdc-relay slot recreate --accept-gap --reason TEXT (same settings), which keeps the slot and records the fork in %s", place)
		return b.String()
	case e.Other != nil && e.Checkpoint == nil:
		holds := place + " holds"
		if e.Broker == RabbitMQ {
			holds = place + " hold"
		}
		fmt.Fprintf(&b, "replication slot %q %s, and this server (system identifier %s) has no checkpoint, but %s one for the same database and slot under system identifier %s (relay id %s, confirmed %s%s): "+
			"this is a cluster made by pg_upgrade from before PostgreSQL 17, which drops slots (events committed after that time may be missing from %s), or another cluster under the same names; "+
			"if it is another cluster, set --relay-id to a name of its own; if it is the upgraded cluster, run cdc-relay slot recreate --accept-gap --reason TEXT, then %s",
			e.Slot, e.What, e.SystemID, holds, e.Other.SystemID, e.Other.RelayID, e.Other.LSN, commitText(e.Other), broker, replayCommand(e.Other))
		return b.String()
	case e.Checkpoint != nil:
		fmt.Fprintf(&b, "replication slot %q %s, but the relay's checkpoint (relay id %s) says it confirmed %s%s: "+
			"events committed after that time may be missing from %s (the slot was dropped, lost in a failover to a standby without a synchronised copy, or invalidated by max_slot_wal_keep_size); "+
			"the relay creates no slot by itself. To go on: 1. cdc-relay slot recreate --accept-gap --reason TEXT (same settings) creates the slot and records the gap; "+
			"2. %s publishes the missing events again from the outbox table (consumers deduplicate on id)",
			e.Slot, e.What, e.Checkpoint.RelayID, e.Checkpoint.LSN, commitText(e.Checkpoint), broker, replayCommand(e.Checkpoint))
		return b.String()
	}
	fmt.Fprintf(&b, "replication slot %q %s: events may have been lost, and the relay has no checkpoint to say since when; "+
		"the relay creates no slot by itself: run cdc-relay slot recreate --accept-gap --reason TEXT (same settings), then cdc-relay replay --since TIME for the events since the slot last worked",
		e.Slot, e.What)
	return b.String()
}

func commitText(r *Record) string {
	if r.LastCommitTime == nil {
		return fmt.Sprintf(" (no commit confirmed yet; checkpoint written at %s)", r.WrittenAt.UTC().Format(time.RFC3339))
	}
	return ", last commit at " + r.LastCommitTime.UTC().Format(time.RFC3339Nano)
}

// ReplaySince is the --since to suggest for a replay after r: its last
// commit time (or when it was written) less ReplayMargin.
func ReplaySince(r *Record) time.Time {
	t := r.WrittenAt
	if r.LastCommitTime != nil {
		t = *r.LastCommitTime
	}
	return t.Add(-ReplayMargin).UTC().Truncate(time.Second)
}

func replayCommand(r *Record) string {
	return fmt.Sprintf("cdc-relay replay --since %s (%s before the last confirmed commit: transactions open when the gap began have an earlier created_at)",
		ReplaySince(r).Format(time.RFC3339), ReplayMargin)
}

// MismatchError is a checkpoint that does not belong to the configured slot
// and database: the one under the relay id names another slot or database,
// or an explicit --relay-id has none while the slot's checkpoint is under
// another id. Comparing the slot with it, or with none, would hide a gap.
// It is a configuration error (exit 2).
type MismatchError struct {
	RelayID string
	// Checkpoint is the record under RelayID that names another slot or
	// database; Renamed the slot's checkpoint under another relay id.
	Checkpoint *Record
	Renamed    *Record
	Slot       string
	Database   string
}

func (e *MismatchError) Error() string {
	if e.Renamed != nil {
		return fmt.Sprintf("--relay-id %s has no checkpoint, but slot %q of database %s has one under relay id %s (confirmed %s, written at %s): "+
			"set --relay-id %s (a changed relay id would start a history with no past, and a gap before it would go unnoticed)",
			e.RelayID, e.Slot, e.Database, e.Renamed.RelayID, e.Renamed.LSN, e.Renamed.WrittenAt.UTC().Format(time.RFC3339), e.Renamed.RelayID)
	}
	return fmt.Sprintf("--relay-id %s: its checkpoint is of slot %q in database %s, but the relay is configured for slot %q in database %s: "+
		"set --relay-id to this relay's own id (or leave it unset for <system identifier>/<database>/<slot>), or correct --slot or --pg-url",
		e.RelayID, e.Checkpoint.Slot, e.Checkpoint.Database, e.Slot, e.Database)
}
