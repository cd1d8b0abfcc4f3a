package publisher

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"

	"github.com/cdc-relay/cdc-relay/internal/backoff"
)

// ErrSessionClosed is returned by Enqueue after the session stopped.
var ErrSessionClosed = errors.New("publisher session closed")

// Session publishes the records of one replication session, batch after
// batch. A terminal Kafka error ends it; Enqueue then returns that error and
// the stream reconnects, restarting from the confirmed LSN.
type Session struct {
	p      *Publisher
	acker  Acker
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	queue    []*Record
	queuedAt time.Time // when the first record of queue arrived
	queued   int       // bytes in queue (Size), counted only with a linger
	spare    []*Record
	notify   chan struct{}
	err      error
	lastSeq  uint64 // newest enqueued
	ackedSeq uint64
	ackedCh  chan struct{}
}

// NewSession starts a session; its goroutine runs until Close or a terminal error.
func (p *Publisher) NewSession(ctx context.Context, acker Acker) *Session {
	ctx, cancel := context.WithCancel(ctx)
	s := &Session{p: p, acker: acker, cancel: cancel, done: make(chan struct{}),
		notify: make(chan struct{}, 1), ackedCh: make(chan struct{}, 1)}
	go s.run(ctx)
	return s
}

// Enqueue hands a record over. The tracker has already bounded what is in
// flight, so it never blocks.
func (s *Session) Enqueue(r *Record) error {
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return err
	}
	if s.p.cfg.Linger > 0 { // what lingerFor needs
		if len(s.queue) == 0 {
			s.queuedAt = time.Now()
		}
		s.queued += r.size()
	}
	s.queue = append(s.queue, r)
	s.lastSeq = r.Seq
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
	return nil
}

// Done is closed when the session has stopped: after Close, or after a
// terminal error (see Err).
func (s *Session) Done() <-chan struct{} { return s.done }

// Err returns the error that stopped the session, or nil while it runs.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Drain waits until everything enqueued is acknowledged.
func (s *Session) Drain(ctx context.Context) error {
	for {
		s.mu.Lock()
		done, err := s.ackedSeq >= s.lastSeq, s.err
		s.mu.Unlock()
		if done {
			return nil
		}
		if err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("drain: %w", ctx.Err())
		case <-s.ackedCh:
		case <-s.done:
		}
	}
}

// Close stops the session and waits for its goroutine; unacknowledged records are dropped.
func (s *Session) Close() {
	s.cancel()
	<-s.done
}

func (s *Session) fail(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
}

func (s *Session) run(ctx context.Context) {
	defer close(s.done)
	defer s.fail(ErrSessionClosed)
	linger := s.p.cfg.Linger
	var timer *time.Timer
	if linger > 0 {
		timer = time.NewTimer(linger)
		timer.Stop()
		defer timer.Stop()
	}
	justSent := false
	for {
		// Swap the queue with the spare slice: Enqueue appends to one while
		// this goroutine publishes the other.
		s.mu.Lock()
		if wait := s.lingerFor(linger, justSent); wait > 0 {
			s.mu.Unlock()
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
			s.mu.Lock()
		}
		batch := s.queue
		if len(batch) > 0 {
			s.queue, s.spare = s.spare[:0], nil
			s.queued = 0
		}
		s.mu.Unlock()
		justSent = false
		if len(batch) == 0 {
			select {
			case <-ctx.Done():
				return
			case <-s.notify:
				continue
			}
		}
		if err := s.publish(ctx, batch); err != nil {
			if ctx.Err() == nil {
				s.p.log.Error("kafka publish failed; restarting from the confirmed LSN", "err", err.Error())
			}
			s.fail(err)
			return
		}
		last := batch[len(batch)-1].Seq
		var bytes int64
		for _, r := range batch {
			bytes += int64(r.Reserved)
		}
		s.acker.Ack(last, len(batch), bytes)
		justSent = true
		for _, r := range batch {
			Release(r)
		}
		s.mu.Lock()
		s.ackedSeq = last
		clear(batch)
		s.spare = batch[:0]
		s.mu.Unlock()
		select {
		case s.ackedCh <- struct{}{}:
		default:
		}
	}
}

// lingerFor is how long the next request should wait for more records
// (s.mu held): the rest of the linger since the queue's first record, unless
// the queue is empty, already fills a request, or its records arrived while
// the previous request was in flight (justSent): those have waited enough.
func (s *Session) lingerFor(linger time.Duration, justSent bool) time.Duration {
	if linger <= 0 || justSent || len(s.queue) == 0 || s.queued >= s.p.cfg.BatchBytes {
		return 0
	}
	return time.Until(s.queuedAt.Add(linger))
}

// group is one topic partition's records of a batch, in order.
type group struct {
	topic     string
	partition int
	records   []*Record
}

// publish writes a batch: partitions in parallel, each partition's records in
// order, each request retried until it succeeds or fails terminally.
func (s *Session) publish(ctx context.Context, batch []*Record) error {
	groups, err := s.group(ctx, batch)
	if err != nil {
		return err
	}
	if len(groups) == 1 {
		return s.publishGroup(ctx, groups[0])
	}
	errs := make([]error, len(groups))
	var wg sync.WaitGroup
	for i, g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.publishGroup(ctx, g)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (s *Session) group(ctx context.Context, batch []*Record) ([]*group, error) {
	type tp struct {
		topic     string
		partition int
	}
	index := make(map[tp]*group)
	var groups []*group
	now := s.p.now() // once per batch: one topic's records all see one count
	var (
		lastTopic string // the previous record's, whose count is lastN
		lastN     int
		have      bool
	)
	for _, r := range batch {
		n := lastN
		if !have || r.Topic != lastTopic {
			var err error
			if n, err = s.partitions(ctx, r.Topic, now); err != nil {
				return nil, err
			}
			lastTopic, lastN, have = r.Topic, n, true
		}
		key := r.Key
		if len(key) == 0 {
			key = headerValue(r.Headers, "id")
		}
		r.partition = Partition(key, n)
		k := tp{r.Topic, r.partition}
		g := index[k]
		if g == nil {
			g = &group{topic: r.Topic, partition: r.partition}
			index[k] = g
			groups = append(groups, g)
		}
		g.records = append(g.records, r)
	}
	return groups, nil
}

// partitions returns the topic's partition count: from the cache without
// any retry machinery on the per-record path while it is younger than
// MetadataMaxAge at now, read again once it is older, else from metadata,
// retried.
func (s *Session) partitions(ctx context.Context, topic string, now int64) (int, error) {
	s.p.mu.RLock()
	m, ok := s.p.partitions[topic]
	s.p.mu.RUnlock()
	if ok && now < m.refreshAt {
		return m.n, nil
	}
	if ok {
		return s.p.refreshPartitions(ctx, topic, m.n), nil
	}
	return s.retry(ctx, func() (int, error) { return s.p.partitionCount(ctx, topic) })
}

func headerValue(hs []kafka.Header, key string) []byte {
	for _, h := range hs {
		if h.Key == key {
			return h.Value
		}
	}
	return nil
}

// publishGroup sends one partition's records in requests of at most BatchBytes.
func (s *Session) publishGroup(ctx context.Context, g *group) error {
	recs := g.records
	for len(recs) > 0 {
		n, size := 0, 0
		for n < len(recs) {
			sz := recs[n].size()
			if n > 0 && size+sz > s.p.cfg.BatchBytes {
				break
			}
			size += sz
			n++
		}
		if err := s.sendChunk(ctx, g.topic, g.partition, recs[:n], false); err != nil {
			return fmt.Errorf("produce to %s[%d]: %w", g.topic, g.partition, err)
		}
		recs = recs[n:]
	}
	return nil
}

// sendChunk writes records to one partition, retrying until it succeeds. A
// chunk the broker refuses (too large, or a record's timestamp) is split in halves, sent in order;
// a single refused record goes to Config.Reject, which supplies the record
// to send instead (a dead letter) or an error.
func (s *Session) sendChunk(ctx context.Context, topic string, partition int, chunk []*Record, replacement bool) error {
	size := 0
	for _, r := range chunk {
		size += r.size()
	}
	_, err := s.retry(ctx, func() (int, error) { return 0, s.produce(ctx, topic, partition, chunk, size) })
	if err == nil || !refused(err) {
		return err
	}
	if len(chunk) > 1 {
		half := len(chunk) / 2
		if err := s.sendChunk(ctx, topic, partition, chunk[:half], replacement); err != nil {
			return err
		}
		return s.sendChunk(ctx, topic, partition, chunk[half:], replacement)
	}
	if s.p.cfg.Reject == nil || replacement {
		return err
	}
	rep, rerr := s.p.cfg.Reject(chunk[0], err)
	if rerr != nil {
		return rerr
	}
	n, perr := s.partitions(ctx, rep.Topic, s.p.now())
	if perr != nil {
		return perr
	}
	key := rep.Key
	if len(key) == 0 {
		key = headerValue(rep.Headers, "id")
	}
	return s.sendChunk(ctx, rep.Topic, Partition(key, n), []*Record{rep}, true)
}

// moved reports an error that means the topic's partitions or their leaders
// are not where the cached metadata says: the partition count is read again
// before the next batch.
func moved(err error) bool {
	var kerr kafka.Error
	if errors.As(err, &kerr) {
		return kerr == kafka.UnknownTopicOrPartition || kerr == kafka.NotLeaderForPartition || kerr == kafka.LeaderNotAvailable
	}
	return errors.Is(err, protocol.ErrNoTopic) || errors.Is(err, protocol.ErrNoPartition)
}

// refused reports a broker refusal of a record or batch for what it holds:
// its size, or a record's timestamp.
func refused(err error) bool {
	return errors.Is(err, kafka.MessageSizeTooLarge) || errors.Is(err, kafka.RecordListTooLarge) || errors.Is(err, kafka.InvalidTimestamp)
}

func (s *Session) produce(ctx context.Context, topic string, partition int, chunk []*Record, size int) error {
	records := make([]kafka.Record, len(chunk))
	for i, r := range chunk {
		records[i] = r.kafkaRecord()
	}
	start := time.Now()
	res, err := s.p.client.Produce(ctx, &kafka.ProduceRequest{
		Topic:        topic,
		Partition:    partition,
		RequiredAcks: kafka.RequireAll,
		Records:      kafka.NewRecordReader(records...),
		Compression:  s.p.cfg.Compression,
	})
	if err == nil && res.Error != nil {
		err = res.Error
	}
	if err == nil {
		for _, rerr := range res.RecordErrors {
			err = rerr
			break
		}
	}
	if err != nil {
		if moved(err) {
			s.p.forgetTopic(topic)
		}
		s.p.obs.ProduceError(errorKind(err))
		return err
	}
	s.p.noteSuccess()
	s.p.obs.Produced(topic, len(chunk), size, time.Since(start))
	return nil
}

// retry runs f until it succeeds, fails terminally, or ctx ends, backing off
// between attempts and logging failures rate-limited with their count.
func (s *Session) retry(ctx context.Context, f func() (int, error)) (int, error) {
	var bo backoff.Backoff
	warned := false
	for {
		n, err := f()
		if err == nil {
			if warned {
				s.p.log.Info("kafka recovered", "consecutive_errors", bo.Attempts())
			}
			return n, nil
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		s.p.noteFailure(err)
		if !isRetriable(err) {
			return 0, err
		}
		switch a := bo.Attempts(); {
		case a < 3 && errors.Is(err, kafka.UnknownTopicOrPartition):
			// A new topic that broker auto-creation is creating: expected.
			s.p.log.Debug("waiting for topic creation", "err", err.Error(), "consecutive_errors", a+1)
		case a < 3 || a%20 == 0:
			warned = true
			s.p.log.Warn("kafka error, retrying", "err", err.Error(), "consecutive_errors", a+1)
		}
		if werr := bo.Wait(ctx); werr != nil {
			return 0, werr
		}
	}
}
