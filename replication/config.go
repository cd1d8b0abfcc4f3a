package replication

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/decoder"
)

// Config configures a Stream. Zero durations and bounds take the defaults
// given on each field.
type Config struct {
	// URL is the libpq URL or DSN; the stream adds replication=database.
	URL string
	// Slot is the logical slot (pgoutput), created when missing. Default "cdc_relay".
	Slot string
	// Publication is created FOR TABLE with the Tables, WITH (publish =
	// 'insert', publish_via_partition_root = true), when missing. Default
	// "cdc_relay".
	Publication string
	// Tables are the outbox tables ("schema.table") and their column names.
	// nil means public.outbox with decoder.DefaultColumns(); an empty,
	// non-nil slice means none: a table-less outbox of logical messages
	// (Inspected.MessagePrefix).
	Tables []decoder.Table
	// StatusInterval is how often a standby status update (with a reply
	// request) is sent. Default 1 s; PostgreSQL needs one within wal_sender_timeout.
	StatusInterval time.Duration
	// ReadTimeout is how long the stream may stay silent before it is treated
	// as dead and reconnected. Default 60 s; raised to the server's
	// wal_sender_timeout/2 + 5 s when that is longer.
	ReadTimeout time.Duration
	// DrainTimeout bounds how long shutdown waits for Kafka to acknowledge
	// what is in flight before the final status update. Default 30 s.
	DrainTimeout time.Duration
	// MaxInFlightEvents bounds events handed to the session and not yet
	// acknowledged. Default 50000.
	MaxInFlightEvents int
	// MaxInFlightBytes bounds their bytes. Default 64 MiB.
	MaxInFlightBytes int64
	// RecreateLostSlot drops and recreates a slot whose wal_status is "lost"
	// instead of halting, logging at ERROR level that events may have been
	// lost. Default false: a lost slot halts the relay. Deps.Guard, when
	// set, decides instead.
	RecreateLostSlot bool
	// SlotFailover says whether the slot is a failover slot: created with
	// FAILOVER, or turned into one with ALTER_REPLICATION_SLOT. Default
	// FailoverAuto (on for PostgreSQL 17+).
	SlotFailover FailoverMode
	// AllowExtraTables accepts a publication that publishes other tables
	// than Tables (FOR ALL TABLES, TABLES IN SCHEMA, or more tables listed):
	// their rows are skipped and reported to Deps.OnSkippedRow. Default false:
	// such a publication halts the stream at start with a
	// *PublicationError, and a row of another table that arrives anyway
	// (the publication was altered while the relay ran) is handed to the
	// session like an outbox row, with decoder.Row.Other set, for its dead
	// letter.
	AllowExtraTables bool
	// ExactlyOnce (--delivery exactly-once) confirms a transaction only
	// once its rows are in a committed Kafka transaction
	// (Tracker.RequireCommit); the session then also gets transaction
	// boundaries (Bounded) and says what to skip (Skipping).
	ExactlyOnce bool
	// IsConfigError, when set, tells a fatal error that is a configuration
	// error (the caller exits 2) from a halt: it is logged as a
	// configuration error, not as "halt". Default nil: every fatal error
	// is a halt.
	IsConfigError func(error) bool
	// Broker names the broker the sessions publish to, in the operator's
	// texts ("RabbitMQ"); in lower case it is the reconnect cause of a
	// session's failure (Stats.Reconnects). Default "Kafka".
	Broker string
	// Gather is how long, at a steady rate, a read of the stream waits for
	// company: the socket wakes the reader once the transactions that come
	// within a Gather of the first are queued (at the rate measured), or
	// after two Gathers, so that one wake-up takes several transactions
	// (lowat.go). Default 0: each read wakes on the first bytes. The relay
	// sets its Kafka linger.
	Gather time.Duration
	// Logger receives lifecycle lines. Default slog.Default().
	Logger *slog.Logger
}

// Deps are a Stream's collaborators, handed to NewStream; none is set
// later.
type Deps struct {
	// Inspect is called once, on the first connection that gets as far (a
	// normal connection, before the publication and slot are looked at): it
	// reads what it needs from the catalog and returns how to stream, the
	// sessions' factory included, which the stream keeps for its life. An
	// error marked Fatal halts the stream; any other retries with the next
	// connection. Required.
	Inspect func(ctx context.Context, conn *pgx.Conn) (Inspected, error)
	// Guard, when set, decides on every connection whether the slot found
	// may be streamed, created or recreated (see Guard); it replaces
	// Config.RecreateLostSlot's own decision. Default none: the slot is
	// created on the first connection when missing.
	Guard Guard
	// OnSkippedRow, when set, is called on the reader goroutine for each
	// row skipped under Config.AllowExtraTables, with its "schema.table".
	// Default none.
	OnSkippedRow func(table string)
	// InitialReplay, when set (--initial-replay), publishes through the
	// replay path the outbox rows created before until. The stream calls it
	// while it holds the slot and before it reads from it, when the Guard
	// (an InitialReplayGuard) says an initial replay is pending. An error
	// marked Fatal halts the stream; any other retries with the next
	// connection, which replays again. Default none: the stream never reads
	// the tables, and on a first start it warns when they seem to hold rows.
	InitialReplay func(ctx context.Context, until time.Time) error
	// Stats receives the stream's live figures, so that what reads them
	// (metrics, health) can be made before the stream. Default a new Stats;
	// Stream.Stats returns it either way.
	Stats *Stats
}

// Inspected is what Deps.Inspect found: how the stream decodes, and how it
// makes the session of each connection.
type Inspected struct {
	// ExtraColumns are further columns whose text each row carries in
	// decoder.Row.Extra (header columns, a timestamp column). Default none.
	ExtraColumns []string
	// MessagePrefix, when set, makes logical decoding messages with this
	// prefix outbox events; the server must be PostgreSQL 14+
	// (MessagesMinMajor). Default "": no messages.
	MessagePrefix string
	// NewSession makes the session of each connection, from what Inspect
	// found (the relay builds its row → record step from the catalog).
	// Required.
	NewSession NewSessionFunc
}

func (c *Config) setDefaults() {
	if c.Slot == "" {
		c.Slot = "cdc_relay"
	}
	if c.Publication == "" {
		c.Publication = "cdc_relay"
	}
	if c.Tables == nil {
		c.Tables = []decoder.Table{{Name: "public.outbox", Columns: decoder.DefaultColumns()}}
	}
	if c.StatusInterval <= 0 {
		c.StatusInterval = time.Second
	}
	if c.ReadTimeout <= 0 {
		c.ReadTimeout = 60 * time.Second
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 30 * time.Second
	}
	if c.MaxInFlightEvents <= 0 {
		c.MaxInFlightEvents = 50000
	}
	if c.MaxInFlightBytes <= 0 {
		c.MaxInFlightBytes = 64 << 20
	}
	if c.SlotFailover == "" {
		c.SlotFailover = FailoverAuto
	}
	if c.Broker == "" {
		c.Broker = "Kafka"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}
