package inbox

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/cdc-relay/cdc-relay/internal/backoff"
)

// Consumer reads the relay's topics and applies each event exactly once per
// consumer name. Create it with New and run it with Run.
type Consumer[T any] struct {
	cfg     Config[T]
	log     *slog.Logger
	schemas *schemas
	markSQL string
	// markBatchSQL inserts the marks of a batch ($2, a text[]) and returns
	// the new ones.
	markBatchSQL string
	table        string

	processed, duplicates, retries, transientRetries, deadLettered, batches atomic.Int64
}

// Stats counts what a Consumer did since it was created.
type Stats struct {
	// Processed events: the handler ran and its transaction committed.
	Processed int64
	// Duplicates skipped because their mark was already there.
	Duplicates int64
	// Retries of failed attempts, transient or not.
	Retries int64
	// TransientRetries of the Retries did not count toward MaxAttempts: a
	// serialization failure, a deadlock, a lost connection, an error marked
	// with Transient.
	TransientRetries int64
	// Batches committed with more than one event (Config.BatchSize).
	Batches int64
	// DeadLettered events sent to the dead-letter topic.
	DeadLettered int64
}

// New checks cfg and returns a Consumer. A missing or invalid field is a
// *ConfigError naming it.
func New[T any](cfg Config[T]) (*Consumer[T], error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	table, err := quoteTable(cfg.Table)
	if err != nil {
		return nil, err
	}
	return &Consumer[T]{
		cfg:     cfg,
		log:     cfg.Logger.With("consumer", cfg.Consumer),
		schemas: newSchemas(cfg.RegistryURL),
		table:   table,
		markSQL: "INSERT INTO " + table + " (consumer, message_id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
		markBatchSQL: "INSERT INTO " + table + " (consumer, message_id) SELECT $1, m FROM unnest($2::text[]) AS m " +
			"ON CONFLICT DO NOTHING RETURNING message_id",
	}, nil
}

// Stats returns the counters.
func (c *Consumer[T]) Stats() Stats {
	return Stats{Processed: c.processed.Load(), Duplicates: c.duplicates.Load(), Retries: c.retries.Load(),
		TransientRetries: c.transientRetries.Load(), DeadLettered: c.deadLettered.Load(), Batches: c.batches.Load()}
}

// job is one fetched record on its way through a worker.
type job struct {
	msg   kafka.Message
	epoch uint64
}

// Run consumes until ctx is cancelled or the reader fails, and returns nil
// after a cancellation. Each event (or batch, Config.BatchSize) is
// processed in one transaction:
// the mark INSERT (ON CONFLICT DO NOTHING), the handler unless the mark was
// already there, the commit. Only then is the event done, and Kafka offsets
// are committed only up to the contiguous prefix of done offsets per
// partition, so a crash never skips an unprocessed event. Cancelling ctx
// cancels the events in progress (they roll back and come again later); on
// return the done prefix has been committed (within 10 s).
func (c *Consumer[T]) Run(ctx context.Context) error {
	cfg := &c.cfg
	isolation := kafka.ReadCommitted
	if cfg.ReadUncommitted {
		isolation = kafka.ReadUncommitted
	}
	reader := kafka.NewReader(kafka.ReaderConfig{
		IsolationLevel:         isolation,
		Brokers:                cfg.Brokers,
		GroupID:                cfg.GroupID,
		GroupTopics:            cfg.Topics,
		StartOffset:            kafka.FirstOffset,
		CommitInterval:         0, // synchronous commits, only of done offsets
		MinBytes:               1,
		MaxBytes:               10 << 20,
		MaxWait:                250 * time.Millisecond,
		SessionTimeout:         cfg.SessionTimeout,
		RebalanceTimeout:       cfg.SessionTimeout,
		HeartbeatInterval:      cfg.SessionTimeout / 10,
		JoinGroupBackoff:       time.Second,
		ReadBackoffMax:         time.Second,
		WatchPartitionChanges:  true,
		PartitionWatchInterval: 2 * time.Second,
		Logger: kafka.LoggerFunc(func(msg string, args ...any) {
			c.readerLog(fmt.Sprintf(msg, args...))
		}),
		ErrorLogger: kafka.LoggerFunc(func(msg string, args ...any) {
			c.log.Warn("kafka reader: " + fmt.Sprintf(msg, args...))
		}),
	})
	dlq := &kafka.Writer{
		Addr:                   kafka.TCP(cfg.Brokers...),
		Topic:                  cfg.DLQTopic,
		Balancer:               &kafka.Hash{},
		RequiredAcks:           kafka.RequireAll,
		BatchTimeout:           5 * time.Millisecond,
		AllowAutoTopicCreation: true,
		MaxAttempts:            3,
	}
	offs := newOffsets()

	workCtx, stopWork := context.WithCancel(context.Background())
	defer stopWork()
	wake := make(chan struct{}, 1)
	queues := make([]chan job, cfg.Workers)
	var workers sync.WaitGroup
	for i := range queues {
		queues[i] = make(chan job, cfg.QueueSize)
		workers.Add(1)
		go func(q <-chan job) {
			defer workers.Done()
			done := func(j job) {
				if offs.done(tp{j.msg.Topic, j.msg.Partition}, j.epoch, j.msg.Offset) {
					select {
					case wake <- struct{}{}:
					default:
					}
				}
			}
			batch := make([]job, 0, cfg.BatchSize)
			for j := range q {
				// The batch: this job and those already queued behind it.
				batch = append(batch[:0], j)
			more:
				for len(batch) < cfg.BatchSize {
					select {
					case next, ok := <-q:
						if !ok {
							break more
						}
						batch = append(batch, next)
					default:
						break more
					}
				}
				if workCtx.Err() != nil {
					continue // shutting down: not done, fetched again later
				}
				c.work(workCtx, dlq, batch, done)
			}
		}(queues[i])
	}
	commitDone := make(chan struct{})
	commitCtx, stopCommit := context.WithCancel(context.Background())
	go func() {
		defer close(commitDone)
		c.commitLoop(commitCtx, reader, offs, wake)
	}()
	var cleanupDone chan struct{}
	if cfg.Retention > 0 {
		cleanupDone = make(chan struct{})
		go func() {
			defer close(cleanupDone)
			c.cleanupLoop(workCtx)
		}()
	}

	filter := newTxnFilter(cfg.Brokers, cfg.ReadUncommitted)
	var runErr error
	fb := backoff.Backoff{Min: cfg.RetryMin, Max: cfg.RetryMax}
	for {
		m, err := reader.FetchMessage(ctx)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) {
				runErr = fmt.Errorf("inbox: fetch: %w", err)
				break
			}
			// The brokers or the group coordinator are unreachable: the
			// reader reconnects on its own; wait and fetch again.
			c.log.Warn("kafka fetch failed; retrying", "error", err, "consecutive_errors", fb.Attempts()+1)
			if fb.Wait(ctx) != nil {
				break
			}
			continue
		}
		fb.Reset()
		hide, err := c.hidden(ctx, filter, m)
		if err != nil {
			break // ctx ended
		}
		if hide { // an aborted transaction's record or a marker: done at once
			k := tp{m.Topic, m.Partition}
			if offs.done(k, offs.fetched(k, m.Offset), m.Offset) {
				select {
				case wake <- struct{}{}:
				default:
				}
			}
			continue
		}
		j := job{msg: m, epoch: offs.fetched(tp{m.Topic, m.Partition}, m.Offset)}
		q := queues[c.worker(m)]
		select {
		case q <- j:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	// Stop: the transactions in progress are cancelled and roll back, and
	// queued events are dropped from memory; none of them is done, so their
	// offsets are not committed and the next owner of the partition gets
	// them again (an event whose commit raced the cancellation comes back
	// as a duplicate and is skipped).
	stopWork()
	for _, q := range queues {
		close(q)
	}
	workers.Wait()
	if cleanupDone != nil {
		<-cleanupDone
	}
	stopCommit()
	<-commitDone
	fctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	if err := c.commit(fctx, reader, offs); err != nil {
		c.log.Warn("final offset commit failed; the events after the last commit will be skipped as duplicates", "error", err)
	}
	cancel()
	reader.Close()
	dlq.Close()
	return runErr
}

// hidden asks filter whether m is hidden from a read_committed consumer,
// retrying until it knows; an error means ctx ended.
func (c *Consumer[T]) hidden(ctx context.Context, filter *txnFilter, m kafka.Message) (bool, error) {
	b := backoff.Backoff{Min: c.cfg.RetryMin, Max: c.cfg.RetryMax}
	for {
		hide, err := filter.skip(ctx, m)
		if err == nil {
			return hide, nil
		}
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		c.log.Warn("kafka transaction filter failed; retrying", "topic", m.Topic, "partition", m.Partition, "offset", m.Offset,
			"error", err, "consecutive_errors", b.Attempts()+1)
		if err := b.Wait(ctx); err != nil {
			return false, err
		}
	}
}

// worker picks the worker for a record: hash(key) % Workers, so an
// aggregate's events are applied in order by one goroutine.
func (c *Consumer[T]) worker(m kafka.Message) int {
	h := fnv.New32a()
	if len(m.Key) > 0 {
		h.Write(m.Key)
	} else {
		h.Write([]byte(m.Topic + "/" + strconv.Itoa(m.Partition)))
	}
	return int(h.Sum32() % uint32(c.cfg.Workers))
}

// commitLoop commits the done prefix after progress (at most every
// CommitInterval) and retries failed commits every second.
func (c *Consumer[T]) commitLoop(ctx context.Context, reader *kafka.Reader, offs *offsets, wake <-chan struct{}) {
	retry := time.NewTicker(time.Second)
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-retry.C:
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := c.commit(cctx, reader, offs); err != nil && ctx.Err() == nil {
			c.log.Warn("offset commit failed; retrying", "error", err)
		}
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-time.After(c.cfg.CommitInterval):
		}
	}
}

func (c *Consumer[T]) commit(ctx context.Context, reader *kafka.Reader, offs *offsets) error {
	m := offs.toCommit()
	if len(m) == 0 {
		return nil
	}
	msgs := make([]kafka.Message, 0, len(m))
	for k, off := range m {
		msgs = append(msgs, kafka.Message{Topic: k.topic, Partition: k.partition, Offset: off}) // kafka-go commits off+1
	}
	if err := reader.CommitMessages(ctx, msgs...); err != nil {
		return err
	}
	offs.committed(m)
	return nil
}
