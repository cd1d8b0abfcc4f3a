package checkpoint

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/cdc-relay/cdc-relay/replication"
)

// The kinds of record in the checkpoint topic.
const (
	// KindCheckpoint is the relay's position, keyed by the relay id; the
	// topic's compaction keeps the newest.
	KindCheckpoint = "checkpoint"
	// KindGap is a gap an operator accepted (slot recreate --accept-gap, or
	// --recreate-lost-slot), keyed by the relay id and the new slot's LSN, so
	// that compaction keeps every one.
	KindGap = "gap"
)

// FormatFollows is the format of a checkpoint whose relay confirms to
// PostgreSQL only what a durable checkpoint covers: the slot never passes
// it, so a slot found ahead of it was made or moved outside the relay.
// Records without a format (releases before it) may trail the slot by any
// idle period, and are trusted as they are.
const FormatFollows = 2

// Record is the JSON value of a record in the checkpoint topic.
type Record struct {
	Kind    string `json:"kind"`
	RelayID string `json:"relay_id"`
	// Format is FormatFollows, or 0 in a record of a release before it.
	Format int `json:"format,omitempty"`
	// LSN is the LSN last confirmed to PostgreSQL (a commit end LSN, or an
	// idle position), as PostgreSQL writes it.
	LSN      string `json:"confirmed_lsn"`
	Timeline uint32 `json:"timeline"`
	// LastCommitTime is the server's commit timestamp of the newest
	// confirmed transaction (from its Commit message); nil when none was
	// confirmed yet.
	LastCommitTime *time.Time `json:"last_commit_time,omitempty"`
	// LastCommitLSN is that transaction's commit end LSN: LSN may be further
	// on, at an idle position past which nothing was published.
	LastCommitLSN string    `json:"last_commit_lsn,omitempty"`
	SystemID      string    `json:"system_identifier"`
	Database      string    `json:"database"`
	Slot          string    `json:"slot"`
	Publication   string    `json:"publication"`
	Tables        []string  `json:"tables"`
	Version       string    `json:"version"`
	WrittenAt     time.Time `json:"written_at"`

	// Gap is set on a KindGap record.
	Gap *Gap `json:"gap,omitempty"`

	// InitialReplay, when set, is a pending initial replay (--initial-replay):
	// the rows created before the slot existed are not all published yet.
	// Optional: records without it (every record of a relay without
	// --initial-replay, and of releases before it) have none pending.
	InitialReplay *InitialReplay `json:"initial_replay,omitempty"`
}

// InitialReplay is a pending initial replay: the outbox rows created before
// Until, the database clock read right after the slot's creation, are to be
// published through the replay path before the relay streams.
type InitialReplay struct {
	Until time.Time `json:"until"`
}

// Gap is an accepted gap: events committed after FromLSN (last commit at
// FromCommitTime) and before the new slot's start ToLSN were never read from
// the slot, and may be missing from Kafka unless replayed.
type Gap struct {
	FromLSN        string     `json:"from_lsn"`
	FromCommitTime *time.Time `json:"from_commit_time,omitempty"`
	ToLSN          string     `json:"to_lsn"`
	AcceptedAt     time.Time  `json:"accepted_at"`
	AcceptedBy     string     `json:"accepted_by"`
	Reason         string     `json:"reason"`
	// Via is how it was accepted: "slot recreate" or "--recreate-lost-slot".
	Via string `json:"via"`
}

// Position parses LSN.
func (r *Record) Position() replication.LSN {
	l, err := replication.ParseLSN(r.LSN)
	if err != nil {
		return 0
	}
	return l
}

// PublishedUpTo is the end of the newest transaction the checkpoint covers:
// LastCommitLSN, or LSN when that is not known.
func (r *Record) PublishedUpTo() replication.LSN {
	if r.LastCommitLSN != "" {
		if l, err := replication.ParseLSN(r.LastCommitLSN); err == nil {
			return l
		}
	}
	return r.Position()
}

// Key is the record's Kafka key.
func (r *Record) Key() string {
	if r.Kind == KindGap && r.Gap != nil {
		return r.RelayID + "#gap@" + r.Gap.ToLSN
	}
	return r.RelayID
}

func (r *Record) marshal() ([]byte, error) { return json.Marshal(r) }

// Marshal is the record's JSON value, as a Backend stores it.
func (r *Record) Marshal() ([]byte, error) { return r.marshal() }

// ParseRecord reads a record's JSON value; a value that is not a
// checkpoint record is an error (a Backend skips it).
func ParseRecord(b []byte) (*Record, error) {
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("checkpoint record: %w", err)
	}
	if r.Kind == "" || r.RelayID == "" {
		return nil, fmt.Errorf("checkpoint record: no kind or relay_id")
	}
	return &r, nil
}

// DefaultRelayID is the relay id when --relay-id is not set:
// <system identifier>/<database>/<slot>, unique across clusters that share
// one Kafka and unchanged by a failover or a host change.
func DefaultRelayID(s replication.Server, slot string) string {
	return s.SystemID + "/" + s.Database + "/" + slot
}

// State is what the checkpoint topic holds: the newest record of each key.
type State struct {
	Checkpoints map[string]*Record // by relay id
	Gaps        []*Record
	// Open holds the keys with a record in a transaction that was still
	// open when the read ended (a Kafka transaction of an exactly-once
	// relay), each with the newest of those records (nil when none is a
	// checkpoint record): it may yet commit.
	Open map[string]*Record
}

// NewState is the State of the newest record of each key.
func NewState(byKey map[string]*Record) *State {
	st := &State{Checkpoints: map[string]*Record{}}
	for _, r := range byKey {
		switch r.Kind {
		case KindCheckpoint:
			st.Checkpoints[r.RelayID] = r
		case KindGap:
			st.Gaps = append(st.Gaps, r)
		}
	}
	return st
}

// SameSlotElsewhere lists the checkpoints of the same database and slot
// under another system identifier than s's.
func (st *State) SameSlotElsewhere(s replication.Server, slot string) []*Record {
	var out []*Record
	for _, r := range st.Checkpoints {
		if r.Database == s.Database && r.Slot == slot && r.SystemID != s.SystemID {
			out = append(out, r)
		}
	}
	return out
}
