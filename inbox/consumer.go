package inbox

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

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
	// security are the kgo options of Config's TLS and SASL settings.
	security []kgo.Opt
	// attemptTimeout, when positive, bounds each attempt's transaction
	// (RabbitMQConfig.HandlerTimeout); the Kafka consumer sets none.
	attemptTimeout time.Duration

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
	security, err := cfg.security()
	if err != nil {
		return nil, err
	}
	log := cfg.Logger.With("consumer", cfg.Consumer)
	schemas, err := newSchemas(cfg.RegistryURL, log)
	if err != nil {
		return nil, err
	}
	c := &Consumer[T]{security: security, cfg: cfg, log: log, schemas: schemas}
	c.setTable(table)
	return c, nil
}

// setTable sets the quoted processed_messages table and the mark
// statements on it.
func (c *Consumer[T]) setTable(table string) {
	c.table = table
	c.markSQL = "INSERT INTO " + table + " (consumer, message_id) VALUES ($1, $2) ON CONFLICT DO NOTHING"
	c.markBatchSQL = "INSERT INTO " + table + " (consumer, message_id) SELECT $1, m FROM unnest($2::text[]) AS m " +
		"ON CONFLICT DO NOTHING RETURNING message_id"
}

// Stats returns the counters.
func (c *Consumer[T]) Stats() Stats {
	return Stats{Processed: c.processed.Load(), Duplicates: c.duplicates.Load(), Retries: c.retries.Load(),
		TransientRetries: c.transientRetries.Load(), DeadLettered: c.deadLettered.Load(), Batches: c.batches.Load()}
}

// job is one fetched record on its way through a worker.
type job struct {
	rec   *kgo.Record
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
	offs := newOffsets()
	reader, err := c.groupClient(offs)
	if err != nil {
		return fmt.Errorf("inbox: kafka client: %w", err)
	}
	defer reader.Close()
	dlq, err := c.dlqClient()
	if err != nil {
		return fmt.Errorf("inbox: kafka client: %w", err)
	}
	defer dlq.Close()

	workCtx, stopWork := context.WithCancel(context.Background())
	defer stopWork()
	wake := make(chan struct{}, 1)
	signal := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	queues := make([]chan job, cfg.Workers)
	var workers sync.WaitGroup
	for i := range queues {
		queues[i] = make(chan job, cfg.QueueSize)
		workers.Add(1)
		go func(q <-chan job) {
			defer workers.Done()
			done := func(j job) {
				if offs.done(tp{j.rec.Topic, int(j.rec.Partition)}, j.epoch, j.rec.Offset) {
					signal()
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

	var runErr error
	fb := backoff.Backoff{Min: cfg.RetryMin, Max: cfg.RetryMax}
fetch:
	for {
		fs := reader.PollRecords(ctx, 1000)
		if ctx.Err() != nil {
			break // what was fetched is not done: fetched again later
		}
		if fs.IsClientClosed() {
			runErr = errors.New("inbox: fetch: the Kafka client was closed")
			break
		}
		for _, r := range fs.Records() {
			k := tp{r.Topic, int(r.Partition)}
			epoch := offs.fetched(k, r.Offset)
			if r.Attrs.IsControl() { // a transaction marker: done at once
				if offs.done(k, epoch, r.Offset) {
					signal()
				}
				continue
			}
			select {
			case queues[c.worker(r)] <- job{rec: r, epoch: epoch}:
			case <-ctx.Done():
				break fetch
			}
		}
		var fetchErr error
		fs.EachError(func(topic string, partition int32, err error) {
			if fetchErr == nil && !errors.Is(err, context.Canceled) {
				fetchErr = fmt.Errorf("%s/%d: %w", topic, partition, err)
			}
		})
		if fetchErr == nil {
			fb.Reset()
			continue
		}
		// The brokers or the group coordinator are unreachable, or refuse
		// us: the client reconnects on its own; wait and fetch again.
		c.log.Warn("kafka fetch failed; retrying", "error", fetchErr, "consecutive_errors", fb.Attempts()+1)
		if fb.Wait(ctx) != nil {
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
	return runErr
}

// worker picks the worker for a record: hash(key) % Workers, so an
// aggregate's events are applied in order by one goroutine.
func (c *Consumer[T]) worker(r *kgo.Record) int {
	h := fnv.New32a()
	if len(r.Key) > 0 {
		h.Write(r.Key)
	} else {
		h.Write([]byte(r.Topic + "/" + strconv.Itoa(int(r.Partition))))
	}
	return int(h.Sum32() % uint32(c.cfg.Workers))
}

// commitLoop commits the done prefix after progress (at most every
// CommitInterval) and retries failed commits every second.
func (c *Consumer[T]) commitLoop(ctx context.Context, reader *kgo.Client, offs *offsets, wake <-chan struct{}) {
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

// commit commits the done prefix of every partition that moved since the
// last commit: the next offset to read, one past the last one done.
func (c *Consumer[T]) commit(ctx context.Context, reader *kgo.Client, offs *offsets) error {
	m := offs.toCommit()
	if len(m) == 0 {
		return nil
	}
	req := map[string]map[int32]kgo.EpochOffset{}
	for k, off := range m {
		if req[k.topic] == nil {
			req[k.topic] = map[int32]kgo.EpochOffset{}
		}
		req[k.topic][int32(k.partition)] = kgo.EpochOffset{Epoch: -1, Offset: off + 1}
	}
	var cerr error
	reader.CommitOffsetsSync(ctx, req, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			cerr = err
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil && cerr == nil {
					cerr = fmt.Errorf("%s/%d: %w", t.Topic, p.Partition, err)
				}
			}
		}
	})
	if cerr != nil {
		return cerr
	}
	offs.committed(m)
	return nil
}
