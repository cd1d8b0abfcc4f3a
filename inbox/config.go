package inbox

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
)

// DB begins the transaction each event is processed in. A *pgxpool.Pool
// satisfies it; it must be safe for concurrent use by Workers goroutines.
type DB interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Handler applies one event's business effect inside tx, the transaction
// that also holds the event's processed_messages mark. It must not commit
// or roll back tx. A returned error rolls back the effect and the mark; the
// event is tried again (with backoff) up to MaxAttempts times, then goes to
// the dead-letter topic.
type Handler[T any] func(ctx context.Context, tx pgx.Tx, ev *Event[T]) error

// Config configures a Consumer. Consumer, Brokers, Topics, RegistryURL,
// DB, Handler and MaxAttempts are required.
type Config[T any] struct {
	// Consumer names this consumer: the consumer column of
	// processed_messages (each consumer deduplicates on its own) and the
	// Kafka consumer group unless GroupID is set. Required.
	Consumer string
	// GroupID is the Kafka consumer group; default Consumer.
	GroupID string
	// Brokers is the Kafka bootstrap list. Required.
	Brokers []string
	// Topics are read from their committed offsets (from the start when the
	// group has none). Required.
	Topics []string
	// RegistryURL is the Confluent-compatible schema registry the writer
	// schemas are fetched from by id (cached). Required.
	RegistryURL string
	// DB begins the per-event transactions. Required.
	DB DB
	// Handler applies an event. Required.
	Handler Handler[T]
	// MaxAttempts is how often a failing event is tried before it goes to
	// the dead-letter topic; at least 1. Required.
	MaxAttempts int
	// Workers process events concurrently; an aggregate (the record key)
	// always goes to the same worker, hash(key) % Workers, so its events
	// are applied in order. Default 4.
	Workers int
	// QueueSize bounds the events waiting per worker; default 256.
	QueueSize int
	// DLQTopic receives events that cannot be processed, with an `error`
	// header. Default Consumer + ".dlq".
	DLQTopic string
	// Table is the processed_messages table (docs/inbox.sql), optionally
	// schema-qualified. Default "processed_messages".
	Table string
	// RetryMin and RetryMax bound the backoff between attempts; defaults
	// 100 ms and 5 s.
	RetryMin, RetryMax time.Duration
	// CommitInterval is the shortest time between two offset commits (a
	// commit covers every partition that moved). Default 100 ms.
	CommitInterval time.Duration
	// SessionTimeout is the Kafka group session timeout: how long a dead
	// member keeps its partitions. Default 10 s (the broker's minimum is
	// group.min.session.timeout.ms, 6 s by default).
	SessionTimeout time.Duration
	// Retention, when positive, makes Run delete this consumer's marks
	// older than Retention every CleanupInterval, CleanupBatch rows per
	// DELETE. It must exceed the longest redelivery (topic retention,
	// replays). Default 0: no cleanup in Run (call Cleanup yourself).
	Retention time.Duration
	// CleanupInterval defaults to 1 minute; CleanupBatch to 1000 rows.
	CleanupInterval time.Duration
	CleanupBatch    int
	// OnDuplicate, when set, is called after an event whose mark was
	// already there was skipped (its offset is then committed as done).
	OnDuplicate func(ev *Event[T])
	// Logger receives the consumer's logs; default slog.Default().
	Logger *slog.Logger
}

func (c *Config[T]) validate() error {
	switch {
	case c.Consumer == "":
		return &ConfigError{"Consumer", "empty: name the consumer (it scopes deduplication and is the default group id)"}
	case c.Handler == nil:
		return &ConfigError{"Handler", "nil: give the function that applies an event"}
	case c.MaxAttempts < 1:
		return &ConfigError{"MaxAttempts", "must be at least 1 (attempts before the dead-letter topic)"}
	case len(c.Brokers) == 0:
		return &ConfigError{"Brokers", "empty: give the Kafka bootstrap brokers"}
	case len(c.Topics) == 0:
		return &ConfigError{"Topics", "empty: give the topics to read"}
	case c.RegistryURL == "":
		return &ConfigError{"RegistryURL", "empty: give the schema registry URL"}
	case c.DB == nil:
		return &ConfigError{"DB", "nil: give a *pgxpool.Pool (or any DB)"}
	case c.Workers < 0:
		return &ConfigError{"Workers", "negative"}
	}
	if c.GroupID == "" {
		c.GroupID = c.Consumer
	}
	if c.Workers == 0 {
		c.Workers = 4
	}
	if c.QueueSize <= 0 {
		c.QueueSize = 256
	}
	if c.DLQTopic == "" {
		c.DLQTopic = c.Consumer + ".dlq"
	}
	if c.Table == "" {
		c.Table = "processed_messages"
	}
	if c.RetryMin <= 0 {
		c.RetryMin = 100 * time.Millisecond
	}
	if c.RetryMax <= 0 {
		c.RetryMax = 5 * time.Second
	}
	if c.CommitInterval <= 0 {
		c.CommitInterval = 100 * time.Millisecond
	}
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = 10 * time.Second
	}
	if c.CleanupInterval <= 0 {
		c.CleanupInterval = time.Minute
	}
	if c.CleanupBatch <= 0 {
		c.CleanupBatch = 1000
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}
