package publisher

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Session publishes the records of one replication session. kgo keeps each
// partition's records in order (an idempotent producer, so retries neither
// reorder nor duplicate them within the session) and the session turns its
// per-record answers into acknowledgements of a contiguous prefix. A
// terminal Kafka error ends it; Enqueue then returns that error and the
// stream reconnects, restarting from the confirmed LSN.
//
// With a transactional publisher the records go out in Kafka transactions,
// each ending at a boundary (Boundary: the end of a PostgreSQL transaction)
// with the checkpoint record, and the acker learns what committed
// (TxnAcker.Committed). A session never commits part of a PostgreSQL
// transaction: at Close or after an error, what is open is aborted.
type Session struct {
	p      *Publisher
	cl     *kgo.Client
	txnID  string // the client's transactional id, for messages
	acker  Acker
	txn    TxnAcker // nil unless transactional
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	notify chan struct{}

	mu      sync.Mutex
	queue   []item
	spare   []item
	err     error
	lastSeq uint64 // newest enqueued
	acked   uint64 // contiguous prefix answered
	slots   []slot // slots[seq&(len-1)] for the seqs after acked
	ackedCh chan struct{}
	commSeq uint64 // newest seq whose transaction committed
	// The producer id and epoch the open transaction's records were
	// acknowledged under: all must be alike, or the client's producer id
	// changed within the transaction, which aborted what came before.
	txnPID    int64
	txnEpoch  int16
	txnIDSet  bool
	txnBroken error
	fenced    bool          // another instance took over the transactional id
	slotLost  bool          // the replication connection failed (SlotLost)
	stopping  bool          // the relay is stopping, not reconnecting (Stopping)
	bSeq      uint64        // seq of the newest boundary
	inflight  int           // records handed to kgo and not yet answered
	answered  chan struct{} // signalled when inflight drops to 0

	// Only the run goroutine uses these.
	inTxn     bool
	txnStart  time.Time
	txnEvents int
	txnEnded  time.Time     // when the last EndTxn(commit) of this session returned
	txnAwait  time.Duration // how long awaitCompleted held the open transaction's first record
	ckpt      Checkpointer  // s.txn, when it follows the checkpoint
	ckptAt    time.Time     // when the last checkpoint committed
	ckptEnd   uint64        // the commit end it covered
	// describeFails counts awaitCompleted's requests that failed in a row.
	describeFails int
	produced      uint64 // newest seq handed to kgo
	hold          holder // records not yet handed to kgo (hold.go)
	boundary      item   // the newest boundary handed over
	promiseFn     func(*kgo.Record, error)
	// The limit of the previous record's topic, read again when the topic
	// changes or after limitCheck: one map lookup under a lock per topic
	// run instead of per record.
	limTopic string
	limBytes int
	limAt    time.Time
}

// item is a queued record, or (rec nil) the boundary after seq: end is
// where the checkpoint goes, cend the end of the newest PostgreSQL
// transaction up to it (end too, except for an idle position).
type item struct {
	rec  *Record
	seq  uint64
	end  uint64
	cend uint64
	time time.Time
}

// slot is one in-flight seq.
type slot struct {
	rec      *Record
	done     bool
	reserved int
}

// NewSession starts a session; its goroutine runs until Close or a terminal
// error. A transactional session needs an acker that is also a TxnAcker;
// the relay has called Fence first.
func (p *Publisher) NewSession(ctx context.Context, acker Acker) *Session {
	ctx, cancel := context.WithCancel(ctx)
	s := &Session{p: p, acker: acker, ctx: ctx, cancel: cancel, done: make(chan struct{}),
		notify: make(chan struct{}, 1), ackedCh: make(chan struct{}, 1), answered: make(chan struct{}, 1), slots: make([]slot, 256)}
	s.promiseFn = s.promise
	cl, err := p.client()
	if err == nil && p.Transactional() {
		if t, ok := acker.(TxnAcker); ok {
			s.txn = t
			s.ckpt, _ = acker.(Checkpointer)
		} else {
			err = errors.New("publisher: a transactional session needs a TxnAcker")
		}
	}
	if err != nil {
		s.err = err
		close(s.done)
		return s
	}
	s.cl = cl
	p.clMu.Lock()
	s.txnID = p.clTxnID
	p.clMu.Unlock()
	p.pending.Store(s)
	go s.run()
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
	if r.Seq-s.acked > uint64(len(s.slots)) {
		s.growSlots(r.Seq - s.acked)
	}
	// Seqs skipped since the last record (none in the relay) count as
	// answered.
	for q := s.lastSeq + 1; q < r.Seq; q++ {
		s.slots[q&uint64(len(s.slots)-1)] = slot{done: true}
	}
	s.slots[r.Seq&uint64(len(s.slots)-1)] = slot{rec: r, reserved: r.Reserved}
	s.lastSeq = r.Seq
	s.queue = append(s.queue, item{rec: r, seq: r.Seq})
	s.mu.Unlock()
	s.wake()
	return nil
}

// Boundary says that the record with seq lastSeq ends a PostgreSQL
// transaction whose commit ends at end. A transactional session may commit
// its Kafka transaction there, with the checkpoint at end; others ignore it.
func (s *Session) Boundary(lastSeq, end uint64, commitTime time.Time) {
	if s.txn == nil {
		return
	}
	s.mu.Lock()
	if s.err == nil {
		s.queue = append(s.queue, item{seq: lastSeq, end: end, cend: end, time: commitTime})
		s.bSeq = lastSeq
	}
	s.mu.Unlock()
	s.wake()
}

func (s *Session) wake() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// growSlots makes room for n seqs after acked (s.mu held).
func (s *Session) growSlots(n uint64) {
	size := len(s.slots)
	for uint64(size) < n {
		size *= 2
	}
	slots := make([]slot, size)
	oldMask, newMask := uint64(len(s.slots)-1), uint64(size-1)
	for q := s.acked + 1; q <= s.lastSeq; q++ {
		slots[q&newMask] = s.slots[q&oldMask]
	}
	s.slots = slots
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

// Drain waits until everything enqueued is acknowledged and, in a
// transactional session, committed up to the last boundary: records after
// it belong to a PostgreSQL transaction that has not ended, and are never
// committed.
func (s *Session) Drain(ctx context.Context) error {
	return WaitDrained(ctx, func() (bool, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.txn != nil {
			return s.commSeq >= s.bSeq, s.err
		}
		return s.acked >= s.lastSeq, s.err
	}, s.ackedCh, s.done)
}

// WaitDrained is a session's Drain: it asks state whether everything is
// acknowledged (or why the session failed) until it is, state fails, or
// ctx ends, asking again each time acked or done fires.
func WaitDrained(ctx context.Context, state func() (drained bool, err error), acked <-chan struct{}, done <-chan struct{}) error {
	for {
		drained, err := state()
		if drained {
			return nil
		}
		if err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("drain: %w", ctx.Err())
		case <-acked:
		case <-done:
		}
	}
}

// Close stops the session and waits for its goroutine. What kgo still
// holds is dropped (records not yet answered are published again by the
// next session, from the confirmed LSN), and an open transaction aborted.
func (s *Session) Close() {
	s.cancel()
	<-s.done
}

// SlotLost says, before Close, that the session ends because its
// replication connection failed. The slot is the leader lock, so another
// instance may hold it already, and may have fenced this one: the open
// transaction is then left alone, for the fence of whoever holds the slot
// next (this instance too) to abort. Aborting it from here would let the
// Kafka client, refused as fenced, recover by bumping the epoch, which
// fences the instance that took over.
func (s *Session) SlotLost() {
	s.mu.Lock()
	s.slotLost = true
	s.mu.Unlock()
}

// Stopping says, before Close, that the session ends because the relay
// is stopping: the client is closed next, which fails whatever it still
// holds, so Close waits for the broker only briefly (stopFinishTimeout)
// instead of a whole request timeout. With Kafka down that wait was the
// 40 s between the end of --shutdown-timeout and the exit.
func (s *Session) Stopping() {
	s.mu.Lock()
	s.stopping = true
	s.mu.Unlock()
}

// stopFinishTimeout bounds finish when the relay is stopping: enough for
// a reachable broker to abort the open transaction.
const stopFinishTimeout = 5 * time.Second

func (s *Session) fail(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
	s.wake()
}

func (s *Session) failed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err != nil
}

func (s *Session) run() {
	defer close(s.done)
	defer s.finish()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var ageTick <-chan time.Time // checkTxnAge's: a session without transactions never wakes for it
	if s.txn != nil {
		ageTick = tick.C
	}
	for {
		s.mu.Lock()
		batch := s.queue
		s.queue, s.spare = s.spare[:0], nil
		err := s.err
		s.mu.Unlock()
		if err != nil {
			return
		}
		s.checkTxnAge()
		for i := range batch {
			if s.failed() {
				break
			}
			if it := batch[i]; it.rec != nil {
				s.take(it.rec)
			} else if s.boundaryReached(it) && s.commitDue() {
				s.commit()
			}
		}
		clear(batch)
		s.mu.Lock()
		s.spare = batch[:0]
		idle := len(s.queue) == 0
		s.mu.Unlock()
		if s.txn != nil && idle && s.inTxn && s.boundary.seq == s.produced && s.boundary.seq > 0 {
			// Nothing more waits: commit now, so that latency at low
			// rates stays near at-least-once.
			s.commit()
		}
		if s.ckpt != nil && idle && !s.inTxn && !s.failed() {
			s.checkpointOnly()
		}
		s.maybeRelease(idle)
		if !idle {
			continue
		}
		select {
		case <-s.ctx.Done():
			return
		case <-s.holdTimer():
			s.release()
		case <-s.notify:
		case <-ageTick:
			s.checkTxnAge()
		}
	}
}

// produce hands one record to kgo, after the checks a record needs before
// it may be produced: its size against its topic's limit, and whether the
// broker refused it, or a batch holding it, before.
//
// A refusal fails every record of the batch, and names none of them. So the
// session ends (the stream restarts from the confirmed LSN) and the records
// of that batch become suspects; on the replay each suspect is sent alone,
// with nothing else in flight, so that the one refused alone is the one at
// fault (its dead letter takes its place, in order) and the others go on.
// Within a transaction a refusal makes it abort-only: the one at fault is
// remembered instead, and dead-lettered up front on the next replay.
func (s *Session) produce(r *Record) {
	if r.Topic != s.limTopic || time.Since(s.limAt) > limitCheck {
		s.limTopic, s.limBytes, s.limAt = r.Topic, s.p.recordLimit(s.ctx, s.cl, r.Topic), time.Now()
	}
	if limit := s.limBytes; r.size() > limit && !r.replaced {
		s.reject(r, fmt.Errorf("%w: the record is %d bytes, the topic takes at most %d (its max.message.bytes, or --max-record-bytes)", kerr.MessageTooLarge, r.size(), limit))
		return
	}
	switch s.p.refusal(r) {
	case refusedAlone:
		s.reject(r, s.p.refusedErr(r))
		return
	case suspect:
		s.sendAlone(r)
		return
	}
	s.send(r)
}

// send hands r to kgo, in a transaction when the session has them.
func (s *Session) send(r *Record) {
	if s.txn != nil && !s.inTxn {
		s.txnAwait = s.awaitCompleted()
		if err := s.cl.BeginTransaction(); err != nil {
			s.fail(fmt.Errorf("begin Kafka transaction: %w", err))
			return
		}
		s.inTxn, s.txnStart, s.txnEvents = true, time.Now(), 0
		s.mu.Lock()
		s.txnIDSet, s.txnBroken = false, nil
		s.mu.Unlock()
	}
	if r.Seq > s.produced {
		s.produced = r.Seq
	}
	s.txnEvents++
	s.mu.Lock()
	s.inflight++
	s.mu.Unlock()
	if !r.Read.IsZero() {
		r.sent = time.Now()
	}
	s.cl.Produce(context.Background(), r.kgoRecord(), s.promiseFn)
}

// promise receives kgo's answer for one record.
func (s *Session) promise(kr *kgo.Record, err error) {
	r := recordOf(kr)
	if err != nil {
		s.failedRecord(r, err)
		s.mu.Lock()
		s.answeredLocked()
		s.mu.Unlock()
		return
	}
	if r.Seq != 0 && !r.Read.IsZero() {
		s.p.obs.Stages(r.sent.Sub(r.Read), time.Since(r.sent))
	}
	if r.OnAck != nil {
		r.OnAck.Acked(kr.Partition, kr.Offset)
	}
	events := 0
	// One lock for the answer: the transaction's producer id, the
	// acknowledged prefix, and last the count that commit waits on, so
	// that a commit sees everything an answer changed.
	s.mu.Lock()
	if s.txn != nil {
		switch {
		case !s.txnIDSet:
			s.txnPID, s.txnEpoch, s.txnIDSet = kr.ProducerID, kr.ProducerEpoch, true
		case kr.ProducerID != s.txnPID || kr.ProducerEpoch != s.txnEpoch:
			if s.txnBroken == nil {
				s.txnBroken = fmt.Errorf("the Kafka client's producer id changed within a transaction (%d/%d, then %d/%d for a record to %s), which aborts what the transaction held: aborting it",
					s.txnPID, s.txnEpoch, kr.ProducerID, kr.ProducerEpoch, r.Topic)
			}
		}
	}
	if r.Seq != 0 { // 0: the checkpoint record of a transaction
		mask := uint64(len(s.slots) - 1)
		s.slots[r.Seq&mask].done = true
		bytes, upTo := int64(0), s.acked
		for upTo < s.lastSeq {
			sl := &s.slots[(upTo+1)&mask]
			if !sl.done {
				break
			}
			upTo++
			events++
			bytes += int64(sl.reserved)
			if sl.rec != nil {
				if !sl.rec.replaced {
					Release(sl.rec)
				}
				sl.rec = nil
			}
		}
		if upTo > s.acked {
			s.acked = upTo
			// Under s.mu: acknowledgements reach the acker in order.
			s.acker.Ack(upTo, events, bytes)
		}
	}
	s.answeredLocked()
	s.mu.Unlock()
	if events > 0 {
		select {
		case s.ackedCh <- struct{}{}:
		default:
		}
	}
}

// answeredLocked counts one answer (s.mu held) and wakes a commit waiting
// for the last.
func (s *Session) answeredLocked() {
	s.inflight--
	if s.inflight == 0 {
		select {
		case s.answered <- struct{}{}:
		default:
		}
	}
}

// failedRecord handles a record kgo gave up on.
func (s *Session) failedRecord(r *Record, err error) {
	if s.ctx.Err() != nil || errors.Is(err, kgo.ErrAborting) {
		return // the session is ending; the next one publishes again
	}
	if r.alone && refused(err) {
		r.err = err // sendAlone decides
		return
	}
	if s.failed() {
		return
	}
	switch {
	case isFenced(err):
		s.p.markFenced()
		s.mu.Lock()
		s.fenced = true
		s.mu.Unlock()
		s.fail(fmt.Errorf("produce to %s: another relay with transactional id %s took over (fenced): %w", r.Topic, s.txnID, err))
	case refused(err) && r.Seq != 0 && !r.replaced:
		s.p.suspectRecord(r, err)
		s.p.log.Warn("the broker refused a batch; restarting from the confirmed LSN to send its records one at a time and dead-letter the one at fault", "topic", r.Topic, "err", err.Error())
		s.fail(fmt.Errorf("produce to %s: %w (the records of the refused batch are sent one at a time after the restart)", r.Topic, err))
	default:
		s.p.obs.ProduceError(errorKind(err))
		s.p.log.Error("kafka publish failed; restarting from the confirmed LSN", "topic", r.Topic, "err", err.Error())
		s.fail(fmt.Errorf("produce to %s: %w", r.Topic, err))
	}
}

// allAnswered waits until kgo has answered every record handed to it; false
// when the session is closing.
func (s *Session) allAnswered() bool {
	for {
		s.mu.Lock()
		n := s.inflight
		s.mu.Unlock()
		if n == 0 {
			return true
		}
		select {
		case <-s.ctx.Done():
			return false
		case <-s.answered:
		}
	}
}

// finish leaves kgo with nothing of this session: records it still holds
// are failed (they are published again by the next session, in order after
// nothing of this one), and an open transaction is aborted.
func (s *Session) finish() {
	s.fail(ErrSessionClosed)
	s.p.pending.CompareAndSwap(s, nil)
	s.mu.Lock()
	bound := s.p.cfg.RequestTimeout + 10*time.Second
	if s.stopping {
		bound = stopFinishTimeout
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	if err := s.cl.AbortBufferedRecords(ctx); err != nil {
		s.p.log.Warn("dropping the records kgo still holds", "err", err.Error())
	}
	if !s.inTxn {
		return
	}
	s.inTxn = false
	s.mu.Lock()
	fenced, lost := s.fenced, s.slotLost
	s.mu.Unlock()
	// Only the slot's holder may abort: an abort refused as fenced makes
	// kgo reload the producer id, which would fence the relay that holds it.
	switch {
	case fenced:
		// The instance that fenced this one aborted the transaction.
		s.p.log.Warn("another relay with the same transactional id took over (fenced): it aborted this instance's open Kafka transaction, and this instance's writes are refused",
			"transactional_id", s.txnID)
	case lost:
		s.p.log.Warn("exactly-once: the replication connection failed, so another relay may hold the slot and have fenced this one: "+
			"the open Kafka transaction is left to the fence of the slot's next holder, which aborts it (an abort from here could fence that holder)",
			"transactional_id", s.txnID)
	default:
		err := s.cl.EndTransaction(ctx, kgo.TryAbort)
		if err == nil {
			s.p.obs.TxnAborted()
		} else {
			// A new client's InitProducerID aborts it.
			if isFenced(err) {
				s.p.log.Warn("another relay with the same transactional id took over (fenced): this instance's open Kafka transaction was aborted by it and its writes are refused",
					"transactional_id", s.txnID, "err", err.Error())
			} else {
				s.p.log.Warn("abort Kafka transaction failed; the next session fences it", "err", err.Error())
			}
			s.p.markFenced()
		}
	}
}

// pendingTopics names the topics of the records in flight, for the retry
// log.
func (s *Session) pendingTopics() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var topics []string
	mask := uint64(len(s.slots) - 1)
	for q := s.acked + 1; q <= s.lastSeq && len(topics) < 8; q++ {
		if r := s.slots[q&mask].rec; r != nil && !slices.Contains(topics, r.Topic) {
			topics = append(topics, r.Topic)
		}
	}
	return topics
}
