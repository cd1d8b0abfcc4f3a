package publisher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	metadataAPI "github.com/segmentio/kafka-go/protocol/metadata"
)

// Config configures a Publisher. Zero values take the defaults on each field.
type Config struct {
	// Brokers is the bootstrap list (host:port). Required.
	Brokers []string
	// Compression of record batches; default none. (Java: compression.type)
	Compression kafka.Compression
	// BatchBytes caps the bytes of one partition's request; default 1 MiB,
	// which must not exceed the broker's message.max.bytes. (Java: batch.size)
	BatchBytes int
	// MaxRecordBytes caps one record (key + value + headers); larger records
	// are invalid events. Default 1,000,000, under Kafka's 1,048,588 default
	// message.max.bytes. (Java: max.request.size)
	MaxRecordBytes int
	// Linger is how long a request waits for more records after the first
	// one arrived while no request was in flight; default 0: send at once.
	// Records that arrive while a request is in flight always wait for it
	// and go together in the next one. A small linger makes requests
	// larger, and so fewer, when events trickle in one at a time, which
	// saves broker CPU at the cost of up to Linger of latency.
	// (Java: linger.ms)
	Linger time.Duration
	// RequestTimeout bounds one produce or metadata request; default 30 s.
	// (Java: request.timeout.ms)
	RequestTimeout time.Duration
	// MetadataMaxAge is how long a topic's partition count is used before
	// the next batch for the topic reads it again, so partitions added to
	// a topic are used; default 5 min, as the Java producer's. An error
	// meaning the partition or its leader moved drops the count at once.
	// The count is read through the kafka-go transport, whose own cache is
	// at most its MetadataTTL (5 s by default here) old. It is no flag:
	// tests shorten it. (Java: metadata.max.age.ms)
	MetadataMaxAge time.Duration
	// Transport overrides the kafka-go transport (TLS, SASL); default a
	// transport with a 10 s dial timeout.
	Transport *kafka.Transport
	// Reject, when set, is called with a single record the broker refused:
	// as too large (its topic's max.message.bytes is below MaxRecordBytes),
	// or for its timestamp (outside the topic's
	// message.timestamp.before/after.max.ms). It
	// returns the record to publish in its place — a dead letter, keeping
	// Seq and Reserved — or an error that stops the session (a FatalError to
	// halt). Default: the refusal is a terminal error.
	Reject func(r *Record, err error) (*Record, error)
	// Observer receives figures for metrics; default none.
	Observer Observer
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// Observer receives the publisher's figures.
type Observer interface {
	// Produced is called once per successful partition request.
	Produced(topic string, records, bytes int, latency time.Duration)
	// ProduceError is called for each failed attempt, with a short kind.
	ProduceError(kind string)
}

type nopObserver struct{}

func (nopObserver) Produced(string, int, int, time.Duration) {}
func (nopObserver) ProduceError(string)                      {}

// Publisher owns the Kafka client and the topic metadata cache. Sessions
// share it.
type Publisher struct {
	cfg       Config
	client    *kafka.Client
	transport *kafka.Transport
	addr      net.Addr
	log       *slog.Logger
	obs       Observer

	mu         sync.RWMutex
	partitions map[string]topicMeta

	// born is the monotonic origin of failingSince: nanoseconds since born
	// of the first failed request after the last successful produce
	// request, 0 while none failed since. lastErr is the newest failure.
	born         time.Time
	failingSince atomic.Int64
	lastErr      atomic.Pointer[string]
}

// Health is what the publisher knows of Kafka's state, for readiness.
type Health struct {
	// FailingSince is when the first produce or metadata request failed
	// after the last successful produce request (a monotonic reading);
	// zero while the newest produce request succeeded, or none failed.
	// It spans sessions: a terminal error that restarts the session does
	// not reset it, only a successful produce request does.
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

// noteFailure records a failed request for Health.
func (p *Publisher) noteFailure(err error) {
	msg := err.Error()
	p.lastErr.Store(&msg)
	p.failingSince.CompareAndSwap(0, max(int64(time.Since(p.born)), 1))
}

// noteSuccess records a successful produce request for Health: one atomic
// load per request while Kafka is healthy.
func (p *Publisher) noteSuccess() {
	if p.failingSince.Load() != 0 {
		p.failingSince.Store(0)
	}
}

// New returns a publisher; it does not connect until used.
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
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	tr := cfg.Transport
	if tr == nil {
		tr = &kafka.Transport{DialTimeout: 10 * time.Second, ClientID: "cdc-relay", MetadataTTL: 5 * time.Second}
	}
	addr := kafka.TCP(cfg.Brokers...)
	return &Publisher{
		cfg:        cfg,
		transport:  tr,
		addr:       addr,
		client:     &kafka.Client{Addr: addr, Transport: tr, Timeout: cfg.RequestTimeout},
		log:        cfg.Logger,
		obs:        cfg.Observer,
		partitions: make(map[string]topicMeta),
		born:       time.Now(),
	}, nil
}

// MaxRecordBytes is the largest record the publisher accepts.
func (p *Publisher) MaxRecordBytes() int { return p.cfg.MaxRecordBytes }

// Close releases idle connections.
func (p *Publisher) Close() { p.transport.CloseIdleConnections() }

// Ping asks a broker for metadata, to check it is reachable.
func (p *Publisher) Ping(ctx context.Context) error {
	_, err := p.client.Metadata(ctx, &kafka.MetadataRequest{})
	return err
}

// DefaultMetadataMaxAge is Config.MetadataMaxAge's default, the Java
// producer's metadata.max.age.ms.
const DefaultMetadataMaxAge = 5 * time.Minute

// metadataRetry is how long a cached partition count is used after a
// refresh of it failed, before the next try.
const metadataRetry = time.Second

// topicMeta is a topic's cached partition count.
type topicMeta struct {
	n         int
	refreshAt int64 // monotonic nanoseconds since born (now) when n is to be read again
}

// now is the monotonic clock topicMeta.refreshAt is read on.
func (p *Publisher) now() int64 { return int64(time.Since(p.born)) }

// partitionCount asks the brokers for the topic's partition count (creating
// the topic through broker auto-creation when it is missing) and caches it
// for MetadataMaxAge; Session.partitions reads the cache first.
func (p *Publisher) partitionCount(ctx context.Context, topic string) (int, error) {
	rctx, cancel := context.WithTimeout(ctx, p.cfg.RequestTimeout)
	defer cancel()
	res, err := p.transport.RoundTrip(rctx, p.addr, &metadataAPI.Request{TopicNames: []string{topic}, AllowAutoTopicCreation: true})
	if err != nil {
		return 0, fmt.Errorf("metadata for %s: %w", topic, err)
	}
	for _, t := range res.(*metadataAPI.Response).Topics {
		if t.Name != topic {
			continue
		}
		if t.ErrorCode != 0 {
			kerr := kafka.Error(t.ErrorCode)
			if kerr == kafka.UnknownTopicOrPartition {
				return 0, &retriable{fmt.Errorf("topic %s does not exist yet (if broker auto-creation is off, create it): %w", topic, kerr)}
			}
			return 0, fmt.Errorf("metadata for %s: %w", topic, kerr)
		}
		if len(t.Partitions) == 0 {
			return 0, &retriable{fmt.Errorf("topic %s has no partitions yet", topic)}
		}
		for _, part := range t.Partitions {
			if part.ErrorCode != 0 || part.LeaderID < 0 {
				return 0, &retriable{fmt.Errorf("topic %s partition %d has no leader yet", topic, part.PartitionIndex)}
			}
		}
		p.setPartitions(topic, len(t.Partitions))
		return len(t.Partitions), nil
	}
	return 0, &retriable{fmt.Errorf("metadata for %s: topic missing from the response", topic)}
}

// setPartitions caches n as topic's partition count for MetadataMaxAge,
// logging a change: keys then move to other partitions.
func (p *Publisher) setPartitions(topic string, n int) {
	p.mu.Lock()
	old, ok := p.partitions[topic]
	p.partitions[topic] = topicMeta{n: n, refreshAt: p.now() + int64(p.cfg.MetadataMaxAge)}
	p.mu.Unlock()
	if ok && old.n != n {
		p.log.Warn("topic partition count changed; keys move to other partitions from the next batch on",
			"topic", topic, "partitions_before", old.n, "partitions", n)
	}
}

// refreshPartitions reads a cached count that is due again: one metadata
// request, and on its failure the cached count for metadataRetry more.
// Publishing goes on meanwhile; a produce error that means the partition
// moved drops the count, and the next batch waits for metadata.
func (p *Publisher) refreshPartitions(ctx context.Context, topic string, cached int) int {
	n, err := p.partitionCount(ctx, topic)
	if err == nil {
		return n
	}
	p.mu.Lock()
	if m, ok := p.partitions[topic]; ok && m.n == cached {
		m.refreshAt = p.now() + int64(min(metadataRetry, p.cfg.MetadataMaxAge))
		p.partitions[topic] = m
	}
	p.mu.Unlock()
	if ctx.Err() == nil {
		p.log.Warn("refresh topic partition count failed; using the cached one", "topic", topic, "partitions", cached, "err", err.Error())
	}
	return cached
}

func (p *Publisher) forgetTopic(topic string) {
	p.mu.Lock()
	delete(p.partitions, topic)
	p.mu.Unlock()
}

// retriable marks an error worth retrying.
type retriable struct{ err error }

func (r *retriable) Error() string { return r.err.Error() }
func (r *retriable) Unwrap() error { return r.err }

// isRetriable reports whether a produce or metadata error may succeed later.
func isRetriable(err error) bool {
	var r *retriable
	if errors.As(err, &r) {
		return true
	}
	var kerr kafka.Error
	if errors.As(err, &kerr) {
		return kerr.Temporary() || kerr == kafka.NotLeaderForPartition || kerr == kafka.BrokerNotAvailable
	}
	// kafka-go could not route the request from its cached cluster layout
	// (a leader election or a broker restart): a metadata refresh fixes it.
	if errors.Is(err, protocol.ErrNoLeader) || errors.Is(err, protocol.ErrNoTopic) || errors.Is(err, protocol.ErrNoPartition) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) || errors.Is(err, net.ErrClosed) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	// kafka-go wraps connection failures in plain errors; treat I/O errors as retriable.
	msg := err.Error()
	return strings.Contains(msg, "connection") || strings.Contains(msg, "EOF") || strings.Contains(msg, "broken pipe") || strings.Contains(msg, "i/o timeout")
}

// errorKind names an error for the produce-error metric.
func errorKind(err error) string {
	var kerr kafka.Error
	switch {
	case errors.As(err, &kerr):
		return strings.ToLower(strings.ReplaceAll(kerr.Title(), " ", "_"))
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case isRetriable(err):
		return "network"
	}
	return "other"
}
