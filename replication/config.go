package replication

import (
	"log/slog"
	"time"

	"github.com/cdc-relay/cdc-relay/decoder"
)

// Config configures a Stream. Zero durations and bounds take the defaults
// given on each field.
type Config struct {
	// URL is the libpq URL or DSN; the stream adds replication=database.
	URL string
	// Slot is the logical slot (pgoutput), created when missing. Default "cdc_relay".
	Slot string
	// Publication is created FOR TABLE Table WITH (publish = 'insert') when missing. Default "cdc_relay".
	Publication string
	// Table is the outbox table, "schema.table". Default "public.outbox".
	Table string
	// Columns names the outbox columns. Default decoder.DefaultColumns().
	Columns decoder.Columns
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
	// lost. Default false: a lost slot halts the relay.
	RecreateLostSlot bool
	// SlotFailover says whether the slot is a failover slot: created with
	// FAILOVER, or turned into one with ALTER_REPLICATION_SLOT. Default
	// FailoverAuto (on for PostgreSQL 17+).
	SlotFailover FailoverMode
	// Logger receives lifecycle lines. Default slog.Default().
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Slot == "" {
		c.Slot = "cdc_relay"
	}
	if c.Publication == "" {
		c.Publication = "cdc_relay"
	}
	if c.Table == "" {
		c.Table = "public.outbox"
	}
	if c.Columns == (decoder.Columns{}) {
		c.Columns = decoder.DefaultColumns()
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
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}
