package inbox

import (
	"context"
	"database/sql"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/internal/kafkasec"
)

// DB begins the transaction each event (or batch) is processed in. A
// *pgxpool.Pool satisfies it; it must be safe for concurrent use by Workers
// goroutines.
type DB interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// Handler applies one event's business effect inside tx, the transaction
// that also holds the event's processed_messages mark. It must not commit
// or roll back tx. A returned error rolls back the effect and the mark; the
// event is tried again (with backoff) up to MaxAttempts times, then goes to
// the dead-letter topic. A transient error (see Transient) is retried
// without counting toward MaxAttempts.
type Handler[T any] func(ctx context.Context, tx pgx.Tx, ev *Event[T]) error

// SQLHandler is Handler for database/sql: tx is a *sql.Tx of Config.SQLDB.
type SQLHandler[T any] func(ctx context.Context, tx *sql.Tx, ev *Event[T]) error

// Key formats of Config.KeyFormat: the relay's --key-format.
const (
	KeyString     = "string"      // the aggregate id's text (the default)
	KeyJSON       = "json"        // a JSON string literal, or a number for an integer column
	KeyJSONSchema = "json-schema" // {"schema":...,"payload":...}
	KeyAvro       = "avro"        // 0x00, a 4-byte schema id, an Avro string
)

// SASL mechanisms of Config.SASLMechanism: the relay's
// --kafka-sasl-mechanism.
const (
	SASLNone        = kafkasec.None        // no SASL (the default)
	SASLPlain       = kafkasec.Plain       // PLAIN: the password as it is; use TLS
	SASLScramSHA256 = kafkasec.ScramSHA256 // SCRAM-SHA-256
	SASLScramSHA512 = kafkasec.ScramSHA512 // SCRAM-SHA-512
)

// Config configures a Consumer. Consumer, Brokers, Topics, RegistryURL and
// either DB and Handler (pgx) or SQLDB and SQLHandler (database/sql) are
// required.
type Config[T any] struct {
	// Consumer names this consumer: the consumer column of
	// processed_messages (each consumer deduplicates on its own) and the
	// Kafka consumer group unless GroupID is set. Required.
	Consumer string
	// GroupID is the Kafka consumer group; default Consumer.
	GroupID string
	// Brokers is the Kafka bootstrap list. Required.
	Brokers []string
	// TLS turns on TLS to the brokers (the relay's --kafka-tls), verified
	// against TLSCAFile or, when it is "", the system roots; TLS 1.2 at
	// least. Default false: plain text. Java client: security.protocol SSL
	// or SASL_SSL.
	TLS bool
	// TLSCAFile is a PEM bundle of the CAs that sign the brokers'
	// certificates (--kafka-tls-ca-file); needs TLS. Default "": the system
	// roots. Java client: ssl.truststore.location.
	TLSCAFile string
	// TLSCertFile and TLSKeyFile are a PEM client certificate and its key,
	// for brokers that want mutual TLS (--kafka-tls-cert-file,
	// --kafka-tls-key-file); both or neither, and they need TLS. Default
	// "": no client certificate. Java client: ssl.keystore.location.
	TLSCertFile, TLSKeyFile string
	// SASLMechanism authenticates to the brokers (--kafka-sasl-mechanism):
	// SASLNone (the default, also ""), SASLPlain, SASLScramSHA256 or
	// SASLScramSHA512. Use TLS with SASLPlain, which sends the password as
	// it is. Java client: sasl.mechanism.
	SASLMechanism string
	// SASLUsername and SASLPassword are the SASL credentials
	// (--kafka-sasl-username, --kafka-sasl-password); required with a
	// mechanism other than none. SCRAM needs both to pass SASLprep. The
	// password is never logged. Java client: sasl.jaas.config.
	SASLUsername, SASLPassword string
	// Topics are read from their committed offsets (from the start when the
	// group has none). Required.
	Topics []string
	// RegistryURL is the Confluent-compatible schema registry the writer
	// schemas are fetched from by id (cached), http(s)://host:port[/path];
	// credentials in it (https://user:pass@host) are sent as HTTP basic
	// auth and never logged. Required.
	RegistryURL string
	// DB begins the per-event transactions (pgx). DB and Handler, or
	// SQLDB and SQLHandler, are required.
	DB DB
	// Handler applies an event in a pgx.Tx of DB.
	Handler Handler[T]
	// SQLDB begins the per-event transactions with database/sql (any
	// PostgreSQL driver), for SQLHandler.
	SQLDB *sql.DB
	// SQLHandler applies an event in a *sql.Tx of SQLDB.
	SQLHandler SQLHandler[T]
	// TxOptions apply to every event's (or batch's) transaction, e.g.
	// pgx.TxOptions{IsoLevel: pgx.Serializable}. A read-only AccessMode is
	// refused by New: the mark is an INSERT. With SQLDB, IsoLevel maps to
	// sql.TxOptions.Isolation and DeferrableMode is not available. Default:
	// the server's defaults (read committed).
	TxOptions pgx.TxOptions
	// KeyFormat is how the relay wrote the record key (its --key-format):
	// KeyString (default), KeyJSON, KeyJSONSchema or KeyAvro. Event.AggregateID
	// is the decoded aggregate id; Event.Key keeps the raw bytes. It is not
	// guessed: a string key "42" and a JSON key 42 look alike. A key that
	// does not decode goes to the dead-letter topic (ReasonBadKey).
	KeyFormat string
	// MaxAttempts is how often a failing event is tried before it goes to
	// the dead-letter topic. Transient errors do not count. Default 5.
	MaxAttempts int
	// TransientTimeout bounds how long one event's transient errors
	// (serialization failures, deadlocks, Transient) are retried without
	// counting: after it, the next failure counts as an attempt, so a
	// deterministic "transient" error cannot hold a key forever. Lost
	// connections (the database is down) are waited out without bound.
	// Default 10 minutes.
	TransientTimeout time.Duration
	// BatchSize runs up to BatchSize events of one worker (those already
	// queued) in one database transaction: for each its mark, and its
	// handler only if the mark is new; the batch's offsets are done at
	// commit. Any failure rolls the batch back and its events are retried
	// one by one, so a poison event holds no other back. Default 1; try
	// 100 when the database round trips are the bottleneck.
	BatchSize int
	// ReadUncommitted makes the reader see records of open and aborted
	// Kafka transactions (isolation level read_uncommitted). Default false:
	// read_committed, so an aborted transaction's records never reach the
	// handler.
	ReadUncommitted bool
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
	if c.Consumer == "" {
		return &ConfigError{"Consumer", "empty: name the consumer (it scopes deduplication and is the default group id)"}
	}
	if err := c.validateProcessing(); err != nil {
		return err
	}
	switch {
	case c.MaxAttempts < 0:
		return &ConfigError{"MaxAttempts", "negative: give the attempts before the dead-letter topic (default 5)"}
	case c.KeyFormat != "" && c.KeyFormat != KeyString && c.KeyFormat != KeyJSON && c.KeyFormat != KeyJSONSchema && c.KeyFormat != KeyAvro:
		return &ConfigError{"KeyFormat", "\"" + c.KeyFormat + "\": want string, json, json-schema or avro (the relay's --key-format)"}
	case len(c.Brokers) == 0:
		return &ConfigError{"Brokers", "empty: give the Kafka bootstrap brokers"}
	case len(c.Topics) == 0:
		return &ConfigError{"Topics", "empty: give the topics to read"}
	case c.RegistryURL == "":
		return &ConfigError{"RegistryURL", "empty: give the schema registry URL"}
	}
	if err := c.validateSecurity(); err != nil {
		return err
	}
	c.processingDefaults()
	if c.KeyFormat == "" {
		c.KeyFormat = KeyString
	}
	if c.GroupID == "" {
		c.GroupID = c.Consumer
	}
	if c.DLQTopic == "" {
		c.DLQTopic = c.Consumer + ".dlq"
	}
	if c.CommitInterval <= 0 {
		c.CommitInterval = 100 * time.Millisecond
	}
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = 10 * time.Second
	}
	return nil
}

// validateProcessing checks the settings of the processing core, which
// the Kafka and RabbitMQ consumers share: the handler and its database,
// the transaction options, batches and workers.
func (c *Config[T]) validateProcessing() error {
	switch {
	case c.Handler == nil && c.SQLHandler == nil:
		return &ConfigError{"Handler", "nil: give the function that applies an event (or SQLHandler with SQLDB)"}
	case c.Handler != nil && c.SQLHandler != nil:
		return &ConfigError{"SQLHandler", "set together with Handler: give one, Handler with DB or SQLHandler with SQLDB"}
	case c.Handler != nil && c.DB == nil:
		return &ConfigError{"DB", "nil: give a *pgxpool.Pool (or any DB)"}
	case c.SQLHandler != nil && c.SQLDB == nil:
		return &ConfigError{"SQLDB", "nil: give the *sql.DB SQLHandler's transactions come from"}
	case c.TxOptions.AccessMode == pgx.ReadOnly:
		return &ConfigError{"TxOptions", "AccessMode read only: the mark is an INSERT, use read write (the default)"}
	case c.BatchSize < 0:
		return &ConfigError{"BatchSize", "negative: give the events per transaction (default 1)"}
	case c.Workers < 0:
		return &ConfigError{"Workers", "negative"}
	}
	return nil
}

// processingDefaults fills in the defaults of the processing core's
// settings.
func (c *Config[T]) processingDefaults() {
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 5
	}
	if c.BatchSize == 0 {
		c.BatchSize = 1
	}
	if c.TransientTimeout <= 0 {
		c.TransientTimeout = 10 * time.Minute
	}
	if c.Workers == 0 {
		c.Workers = 4
	}
	if c.QueueSize <= 0 {
		c.QueueSize = 256
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
	if c.CleanupInterval <= 0 {
		c.CleanupInterval = time.Minute
	}
	if c.CleanupBatch <= 0 {
		c.CleanupBatch = 1000
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// validateSecurity checks the TLS and SASL settings as the relay checks
// its --kafka-tls and --kafka-sasl-* flags.
func (c *Config[T]) validateSecurity() error {
	for _, f := range []struct{ field, path string }{{"TLSCAFile", c.TLSCAFile}, {"TLSCertFile", c.TLSCertFile}, {"TLSKeyFile", c.TLSKeyFile}} {
		if f.path == "" {
			continue
		}
		if !c.TLS {
			return &ConfigError{f.field, "is set but TLS is false: set TLS true"}
		}
		if _, err := os.Stat(f.path); err != nil {
			return &ConfigError{f.field, err.Error()}
		}
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return &ConfigError{"TLSCertFile", "a client certificate needs both TLSCertFile and TLSKeyFile"}
	}
	if c.TLS {
		if _, err := kafkasec.TLSConfig(c.TLSCAFile, "", ""); err != nil {
			return &ConfigError{"TLSCAFile", err.Error()}
		}
		if _, err := kafkasec.TLSConfig("", c.TLSCertFile, c.TLSKeyFile); err != nil {
			return &ConfigError{"TLSCertFile", err.Error()}
		}
	}
	switch c.SASLMechanism {
	case "", SASLNone:
	case SASLPlain, SASLScramSHA256, SASLScramSHA512:
		if c.SASLUsername == "" {
			return &ConfigError{"SASLUsername", "empty: required with SASLMechanism " + c.SASLMechanism}
		}
		if c.SASLPassword == "" {
			return &ConfigError{"SASLPassword", "empty: required with SASLMechanism " + c.SASLMechanism}
		}
		if c.SASLMechanism != SASLPlain {
			if err := kafkasec.CheckSCRAM(c.SASLUsername, c.SASLPassword); err != nil {
				return &ConfigError{"SASLUsername", err.Error()}
			}
		}
	default:
		return &ConfigError{"SASLMechanism", strconv.Quote(c.SASLMechanism) + " is not none, plain, scram-sha-256 or scram-sha-512"}
	}
	return nil
}

// security builds the kgo options of the TLS and SASL settings.
func (c *Config[T]) security() ([]kgo.Opt, error) {
	cl, err := kafkasec.Settings{TLS: c.TLS, CAFile: c.TLSCAFile, CertFile: c.TLSCertFile, KeyFile: c.TLSKeyFile,
		Mechanism: c.SASLMechanism, Username: c.SASLUsername, Password: c.SASLPassword}.Build()
	if err != nil {
		return nil, &ConfigError{"TLS", err.Error()}
	}
	return cl.Opts, nil
}
