package publisher

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
)

// Config configures a Publisher. Zero values take the defaults on each field.
type Config struct {
	// Brokers is the bootstrap list (host:port). Required.
	Brokers []string
	// Compression of record batches: none (default), gzip, snappy, lz4 or
	// zstd. (Java: compression.type)
	Compression string
	// BatchBytes caps the bytes of one partition's record batch; default
	// 1 MiB, which must not exceed the broker's message.max.bytes. A
	// topic whose max.message.bytes is smaller gets batches of at most
	// that. (Java: batch.size)
	BatchBytes int
	// MaxRecordBytes caps one record (key + value + headers); larger records
	// are invalid events. Default 1,000,000, under Kafka's 1,048,588 default
	// message.max.bytes. A topic whose max.message.bytes is smaller lowers
	// it for that topic: a record over it is handed to Reject before it is
	// produced. (Java: max.request.size)
	MaxRecordBytes int
	// Linger is how long records that trickle in wait for company before
	// they are produced; default 0: send at once. At-least-once, the
	// session holds them (hold.go) and they go when company comes after
	// half of it; exactly-once, it is kgo's per-partition linger. Records
	// that arrive while a request to the partition's broker is in flight
	// wait for it and go together in the next one. (Java: linger.ms)
	Linger time.Duration
	// Gathered, when set, reports whether the records now come in batches
	// their source gathered for the linger already
	// (replication.Stats.Gathering): an at-least-once session then hands
	// them to kgo once none is queued instead of holding them (hold.go).
	Gathered func() bool
	// RequestTimeout bounds one produce request; default 30 s.
	// (Java: request.timeout.ms)
	RequestTimeout time.Duration
	// MetadataMaxAge is how long topic metadata (partition counts) is used
	// before it is read again, so partitions added to a topic are used;
	// default 5 min, as the Java producer's. It is no flag: tests shorten
	// it. (Java: metadata.max.age.ms)
	MetadataMaxAge time.Duration
	// TLS, when set, connects to the brokers over TLS.
	TLS *tls.Config
	// Dial, when set, dials the brokers instead of kgo's dialer, TLS
	// included (kafkasec.Client.Dial: raw socket reads and writes).
	Dial func(ctx context.Context, network, host string) (net.Conn, error)
	// SASL, when set, authenticates each connection.
	SASL sasl.Mechanism
	// Reject, when set, is called with a single record that cannot be
	// written: larger than its topic's max.message.bytes (found before
	// producing), or refused by the broker for its size or its timestamp
	// (outside the topic's message.timestamp.before/after.max.ms). It
	// returns the record to publish in its place — a dead letter, keeping
	// Seq and Reserved — or an error that stops the session (a FatalError to
	// halt). Default: the refusal is a terminal error.
	Reject func(r *Record, err error) (*Record, error)
	// Observer receives figures for metrics; default none.
	Observer Observer
	// Logger; default slog.Default().
	Logger *slog.Logger

	// ExactlyOnce makes the publisher transactional (--delivery
	// exactly-once): each session's records go out in Kafka transactions
	// that end at the boundaries the session is given.
	ExactlyOnce bool
	// TransactionalID is the Kafka transactional id; with ExactlyOnce it
	// may be left empty here and set with SetTransactionalID before the
	// first Fence, once the relay id is known.
	TransactionalID string
	// TransactionTimeout is the producer's transaction.timeout.ms; default
	// 60 s. A Kafka transaction still open after it halts the relay.
	TransactionTimeout time.Duration
	// TxnInterval is the longest a Kafka transaction stays open under load
	// before it commits at the next boundary; default 100 ms.
	TxnInterval time.Duration
	// TxnMaxEvents commits a Kafka transaction at the next boundary once
	// it holds this many records; default 10,000.
	TxnMaxEvents int
	// Checkpoint makes the record written at the end of each Kafka
	// transaction: the checkpoint at end, the end LSN of the last
	// PostgreSQL transaction in it, or for a checkpoint-only transaction an
	// idle position past the last one, which ended at commitEnd and
	// committed at commitTime. Required with TransactionalID.
	Checkpoint func(end, commitEnd uint64, commitTime time.Time) (*Record, error)
}

// Observer receives the publisher's figures.
type Observer interface {
	// Produced is called once per record batch the broker acknowledged.
	Produced(topic string, records, bytes int)
	// ProduceLatency is called once per produce request answered, with the
	// time from writing it to reading the answer.
	ProduceLatency(time.Duration)
	// ProduceError is called for each failed request or record, with a
	// short kind.
	ProduceError(kind string)
	// Stages is called for each acknowledged record with Record.Read set:
	// from reading its row to handing it to the client, and from there to
	// the broker's acknowledgement.
	Stages(readToProduce, produceToAck time.Duration)
	// TxnCommitted is called for each Kafka transaction committed, with
	// the records in it (the checkpoint record included), the time from
	// its first record to the commit decision (open), from the decision
	// to EndTxn returning (commit: waiting for the last acks, then
	// EndTxn), and how long its first record waited for the coordinator
	// to complete the commit before it (await).
	TxnCommitted(records int, open, commit, await time.Duration)
	// TxnAborted is called for each Kafka transaction this instance
	// aborted itself.
	TxnAborted()
}

type nopObserver struct{}

func (nopObserver) Produced(string, int, int)                                     {}
func (nopObserver) ProduceLatency(time.Duration)                                  {}
func (nopObserver) ProduceError(string)                                           {}
func (nopObserver) Stages(time.Duration, time.Duration)                           {}
func (nopObserver) TxnCommitted(int, time.Duration, time.Duration, time.Duration) {}
func (nopObserver) TxnAborted()                                                   {}

// Publisher owns the Kafka client and what it knows of the topics.
// Sessions share it, one at a time.
type Publisher struct {
	cfg  Config
	opts []kgo.Opt
	log  *slog.Logger
	obs  Observer

	// cl is the Kafka client, made with clTxnID; a transactional client
	// fenced by another instance, or made before the transactional id was
	// known, is replaced at the next session (clMu held).
	clMu    sync.Mutex
	cl      *kgo.Client
	clTxnID string
	txnID   string
	fenced  bool

	limitsMu sync.Mutex
	limits   map[string]topicLimit

	// refused holds the records the broker refused, alone or in a batch
	// (Session.produce), by refusalKey.
	refusedMu sync.Mutex
	refused   map[uint64]refusal
	refusedN  atomic.Int32 // len(refused), read without the lock

	// born is the monotonic origin of failingSince: nanoseconds since born
	// of the first failed request after the last successful produce
	// request, 0 while none failed since. lastErr is the newest failure.
	born         time.Time
	failingSince atomic.Int64
	lastErr      atomic.Pointer[string]
	failures     atomic.Int64 // since the last successful produce
	pending      atomic.Pointer[Session]

	// describeTxnOff is set when the broker cannot answer
	// DescribeTransactions (Session.awaitCompleted).
	describeTxnOff atomic.Bool
	completedWait  time.Duration // completedWait; tests lengthen it
}

// Health is what the publisher knows of Kafka's state, for readiness.
type Health struct {
	// FailingSince is when the first request failed after the last
	// successful produce request (a monotonic reading); zero while the
	// newest produce request succeeded, or none failed. It spans sessions.
	FailingSince time.Time
	// LastError is the newest failure's message ("" when FailingSince is
	// zero).
	LastError string
}

// Health returns the publisher's view of Kafka. Safe for concurrent use.
func (p *Publisher) Health() Health {
	ns := p.failingSince.Load()
	if ns == 0 {
		return Health{}
	}
	h := Health{FailingSince: p.born.Add(time.Duration(ns))}
	if e := p.lastErr.Load(); e != nil {
		h.LastError = *e
	}
	return h
}

// noteFailure records a failed request for Health and logs it,
// rate-limited: the first three failures after a success, then every 20th.
func (p *Publisher) noteFailure(err error) {
	msg := err.Error()
	p.lastErr.Store(&msg)
	p.failingSince.CompareAndSwap(0, max(int64(time.Since(p.born)), 1))
	n := p.failures.Add(1)
	if n <= 3 || n%20 == 0 {
		args := []any{"err", msg}
		if s := p.pending.Load(); s != nil {
			if topics := s.pendingTopics(); len(topics) > 0 {
				args = append(args, "topics", topics)
			}
		}
		p.log.Warn("kafka error, retrying", append(args, "consecutive_errors", n)...)
	}
}

// noteSuccess records a successful produce request for Health.
func (p *Publisher) noteSuccess() {
	if p.failingSince.Load() != 0 {
		p.failingSince.Store(0)
		if n := p.failures.Swap(0); n > 3 {
			p.log.Info("kafka recovered", "consecutive_errors", n)
		}
	}
}

// New returns a publisher; it connects when first used.
func New(cfg Config) (*Publisher, error) {
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("--kafka-brokers is empty: set host:port[,host:port]")
	}
	if cfg.BatchBytes <= 0 {
		cfg.BatchBytes = 1 << 20
	}
	if cfg.MaxRecordBytes <= 0 {
		cfg.MaxRecordBytes = 1000000
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 30 * time.Second
	}
	if cfg.MetadataMaxAge <= 0 {
		cfg.MetadataMaxAge = DefaultMetadataMaxAge
	}
	if cfg.TransactionTimeout <= 0 {
		cfg.TransactionTimeout = time.Minute
	}
	if cfg.TxnInterval <= 0 {
		cfg.TxnInterval = 100 * time.Millisecond
	}
	if cfg.TxnMaxEvents <= 0 {
		cfg.TxnMaxEvents = 10000
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	if cfg.ExactlyOnce && cfg.Checkpoint == nil {
		return nil, errors.New("publisher: a transactional publisher needs Config.Checkpoint")
	}
	p := &Publisher{cfg: cfg, log: cfg.Logger, obs: cfg.Observer, limits: map[string]topicLimit{}, refused: map[uint64]refusal{}, born: time.Now(), txnID: cfg.TransactionalID, completedWait: completedWait}
	comp, err := compressor(cfg.Compression)
	if err != nil {
		return nil, err
	}
	p.opts = []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID("cdc-relay"),
		kgo.DialTimeout(10 * time.Second),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.BasicConsistentPartitioner(func(string) func(*kgo.Record, int) int { return partition })),
		kgo.ProducerLinger(kgoLinger(cfg)),
		kgo.ProduceRequestTimeout(cfg.RequestTimeout),
		kgo.ProducerBatchMaxBytesFn(p.batchMaxBytes),
		kgo.MetadataMaxAge(cfg.MetadataMaxAge),
		kgo.MetadataMinAge(min(time.Second, cfg.MetadataMaxAge)),
		kgo.AllowAutoTopicCreation(),
		kgo.UnknownTopicRetries(-1),
		// The tracker bounds what is in flight, in events and bytes.
		kgo.MaxBufferedRecords(1 << 24),
		kgo.WithHooks(hooks{p}),
		kgo.WithLogger(kgoLogger{p.log}),
	}
	if comp != nil {
		p.opts = append(p.opts, kgo.WithCompressor(comp))
	} else {
		p.opts = append(p.opts, kgo.ProducerBatchCompression(kgo.NoCompression())) // kgo's default is snappy
	}
	if cfg.Dial != nil {
		p.opts = append(p.opts, kgo.Dialer(cfg.Dial))
	} else if cfg.TLS != nil {
		p.opts = append(p.opts, kgo.DialTLSConfig(cfg.TLS.Clone()))
	}
	if cfg.SASL != nil {
		p.opts = append(p.opts, kgo.SASL(cfg.SASL))
	}
	if _, err := p.client(); err != nil {
		return nil, err
	}
	return p, nil
}

// kgoLinger is kgo's linger: an at-least-once session lingers itself
// (hold.go).
func kgoLinger(cfg Config) time.Duration {
	if cfg.ExactlyOnce {
		return cfg.Linger
	}
	return 0
}

// DefaultMetadataMaxAge is Config.MetadataMaxAge's default, the Java
// producer's metadata.max.age.ms.
const DefaultMetadataMaxAge = 5 * time.Minute

// MaxRecordBytes is the largest record the publisher accepts.
func (p *Publisher) MaxRecordBytes() int { return p.cfg.MaxRecordBytes }

// Transactional reports whether the publisher writes in Kafka transactions.
func (p *Publisher) Transactional() bool { return p.cfg.ExactlyOnce }

// client returns the Kafka client: a new one when there is none yet, the
// last was fenced, or the transactional id changed.
func (p *Publisher) client() (*kgo.Client, error) {
	p.clMu.Lock()
	defer p.clMu.Unlock()
	if p.cl != nil && !p.fenced && p.clTxnID == p.txnID {
		return p.cl, nil
	}
	opts := p.opts
	if p.cfg.ExactlyOnce && p.txnID != "" {
		opts = append(slices.Clip(opts), kgo.TransactionalID(p.txnID), kgo.TransactionTimeout(p.cfg.TransactionTimeout))
		opts = append(opts, transactionPacing(p.describeTxnOff.Load())...)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	if p.cl != nil {
		p.cl.Close()
	}
	p.cl, p.clTxnID, p.fenced = cl, p.txnID, false
	return cl, nil
}

// Close closes the Kafka client.
func (p *Publisher) Close() {
	p.clMu.Lock()
	defer p.clMu.Unlock()
	p.cl.Close()
}

// Ping asks a broker for metadata, to check it is reachable.
func (p *Publisher) Ping(ctx context.Context) error {
	cl, err := p.client()
	if err != nil {
		return err
	}
	return cl.Ping(ctx)
}

// partition places a record as the Java client does: murmur2 of its key,
// or of its id header when it has no key.
func partition(r *kgo.Record, n int) int {
	key := r.Key
	if len(key) == 0 {
		for _, h := range r.Headers {
			if h.Key == "id" {
				key = h.Value
				break
			}
		}
	}
	return Partition(key, n)
}

// hooks feed Health, the Observer and the retry log from kgo's events.
type hooks struct{ p *Publisher }

var (
	_ kgo.HookBrokerConnect       = hooks{}
	_ kgo.HookBrokerE2E           = hooks{}
	_ kgo.HookProduceBatchWritten = hooks{}
)

func (h hooks) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err != nil {
		h.p.obs.ProduceError(errorKind(err))
		h.p.noteFailure(fmt.Errorf("connect to broker %s:%d: %w", meta.Host, meta.Port, err))
	}
}

func (h hooks) OnBrokerE2E(meta kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	if key != int16(kmsg.Produce) {
		return
	}
	if err := e2e.Err(); err != nil {
		h.p.obs.ProduceError(errorKind(err))
		h.p.noteFailure(fmt.Errorf("produce to broker %s:%d: %w", meta.Host, meta.Port, err))
		return
	}
	h.p.obs.ProduceLatency(e2e.DurationE2E())
}

func (h hooks) OnProduceBatchWritten(_ kgo.BrokerMetadata, topic string, _ int32, m kgo.ProduceBatchMetrics) {
	h.p.noteSuccess()
	h.p.obs.Produced(topic, m.NumRecords, m.UncompressedBytes)
}

// kgoLogger passes kgo's warnings and errors on at DEBUG: the publisher
// logs what the operator needs itself (noteFailure), and kgo's own lines
// repeat at every retry.
type kgoLogger struct{ log *slog.Logger }

func (l kgoLogger) Level() kgo.LogLevel {
	if l.log.Enabled(context.Background(), slog.LevelDebug) {
		return kgo.LogLevelWarn
	}
	return kgo.LogLevelNone
}

func (l kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	l.log.Debug("kafka client: "+msg, append([]any{"kgo_level", level.String()}, keyvals...)...)
}
