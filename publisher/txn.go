package publisher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// TxnAcker is what a transactional session also tells its acker: every seq
// up to upTo is in a committed Kafka transaction.
type TxnAcker interface {
	Committed(upTo uint64)
}

// Checkpointer is a TxnAcker whose confirms follow the checkpoint: it
// learns which position each committed checkpoint covers (Checkpointed),
// and names the progress that no record carries (Unwritten: idle positions,
// PostgreSQL transactions without outbox rows). An idle session commits
// that progress in a Kafka transaction of its own, holding only the
// checkpoint, at most once per busyCheckpointGap while transactions end and
// once per idleCheckpointGap while only idle positions move.
type Checkpointer interface {
	Checkpointed(end, commitEnd uint64, commitTime time.Time)
	Unwritten() (end, commitEnd uint64, commitTime time.Time, ok bool)
}

// The least time between two checkpoints of a transactional session that
// carry no record: while PostgreSQL transactions end, and while only idle
// positions move.
const (
	busyCheckpointGap = 100 * time.Millisecond
	idleCheckpointGap = time.Second
)

// boundaryReached records a boundary; false for one whose records are not
// all produced (cannot happen: boundaries follow their records).
func (s *Session) boundaryReached(it item) bool {
	s.boundary = it
	s.checkTxnAge()
	return it.seq == s.produced
}

// commitDue reports whether the open transaction has run long enough, or
// holds enough records, to commit at this boundary under load.
func (s *Session) commitDue() bool {
	return s.inTxn && (s.txnEvents >= s.p.cfg.TxnMaxEvents || time.Since(s.txnStart) >= s.p.cfg.TxnInterval)
}

// checkTxnAge halts the session when its transaction has been open for the
// transaction timeout: the coordinator aborts it then, and doing so again
// on the replay would stall every read_committed consumer in a loop.
func (s *Session) checkTxnAge() {
	if !s.inTxn || time.Since(s.txnStart) < s.p.cfg.TransactionTimeout {
		return
	}
	s.fail(&TxnTimeoutError{Events: s.txnEvents, Open: time.Since(s.txnStart).Round(time.Millisecond), Timeout: s.p.cfg.TransactionTimeout})
}

// commit ends the open transaction at the newest boundary: the checkpoint
// record, every record answered, then EndTxn. Only after it succeeded is
// anything up to the boundary committed for the acker.
func (s *Session) commit() {
	b := s.boundary
	decided := time.Now()
	ck, err := s.p.cfg.Checkpoint(b.end, b.cend, b.time)
	if err != nil {
		s.fail(fmt.Errorf("checkpoint record: %w", err))
		return
	}
	ck.Seq, ck.Reserved = 0, 0
	s.send(ck)
	if err := s.cl.Flush(s.ctx); err != nil {
		return // the session is closing: finish aborts
	}
	// Flush waits for the records kgo buffered; one that failed before it
	// was buffered (refused by the client itself) is answered on its own.
	// Every record must be answered, and none failed, before the commit.
	if !s.allAnswered() || s.failed() {
		return
	}
	s.mu.Lock()
	broken := s.txnBroken
	s.mu.Unlock()
	if broken != nil {
		s.fail(broken)
		return
	}
	if err := s.cl.EndTransaction(s.ctx, kgo.TryCommit); err != nil {
		// The outcome may be unknown (the connection died during the
		// commit): finish aborts through a new epoch, which settles it,
		// and the next session reads the checkpoint to learn which it was.
		if isFenced(err) {
			s.p.markFenced()
			s.mu.Lock()
			s.fenced = true
			s.mu.Unlock()
			err = fmt.Errorf("another relay with transactional id %s took over (fenced): %w", s.txnID, err)
		}
		s.fail(fmt.Errorf("commit Kafka transaction: %w", err))
		return
	}
	s.inTxn, s.txnEnded = false, time.Now()
	s.p.obs.TxnCommitted(s.txnEvents, decided.Sub(s.txnStart), time.Since(decided), s.txnAwait)
	if s.p.log.Enabled(s.ctx, slog.LevelDebug) {
		id, epoch, _ := s.cl.ProducerID(s.ctx)
		s.p.log.Debug("kafka transaction committed", "checkpoint_lsn", fmt.Sprintf("%X", b.end), "up_to_seq", b.seq, "records", s.txnEvents, "producer_id", id, "epoch", epoch)
	}
	s.mu.Lock()
	s.commSeq = b.seq
	s.txn.Committed(b.seq)
	s.mu.Unlock()
	s.ckptAt, s.ckptEnd = time.Now(), b.cend
	if s.ckpt != nil {
		s.ckpt.Checkpointed(b.end, b.cend, b.time)
	}
	select {
	case s.ackedCh <- struct{}{}:
	default:
	}
}

// checkpointOnly commits, in a Kafka transaction of its own, the progress
// past the last checkpoint that no record carries, when it is due: every
// record produced is committed (the session is idle), so the acknowledged
// prefix is in Kafka up to that position.
func (s *Session) checkpointOnly() {
	end, cend, ct, ok := s.ckpt.Unwritten()
	if !ok {
		return
	}
	gap := idleCheckpointGap
	if cend > s.ckptEnd {
		gap = busyCheckpointGap
	}
	if time.Since(s.ckptAt) < gap {
		return // the next boundary or tick comes back
	}
	s.boundary = item{seq: s.produced, end: end, cend: cend, time: ct}
	s.commit()
}

// completedWait bounds awaitCompleted: the broker itself retries a
// partition's addition to a transaction for 100 ms by default
// (add.partitions.to.txn.retry.backoff.max.ms), and kgo after that.
const completedWait = 100 * time.Millisecond

// completedPoll is the pause between two DescribeTransactions requests of
// awaitCompleted.
const completedPoll = 250 * time.Microsecond

// awaitCompleted waits, before the first record of a Kafka transaction,
// until the coordinator has completed the previous commit: EndTxn returns
// once the coordinator has logged PrepareCommit, and it writes the commit
// markers after that. A record produced in the meantime finds the
// transactional id busy (CONCURRENT_TRANSACTIONS), and the broker retries
// adding its partition only after add.partitions.to.txn.retry.backoff.ms
// (20 ms by default), which back-to-back transactions hit most of the time.
// Asking the coordinator (DescribeTransactions) until the state leaves
// Prepare*, completedPoll apart, costs about one marker write instead.
// It returns how long it waited: 0 when it asked nothing.
func (s *Session) awaitCompleted() (waited time.Duration) {
	if s.txnEnded.IsZero() || s.p.describeTxnOff.Load() {
		return 0
	}
	began := time.Now()
	defer func() { waited = time.Since(began) }()
	deadline := s.txnEnded.Add(s.p.completedWait)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithDeadline(s.ctx, deadline)
		state, err := describeTxn(ctx, s.cl, s.txnID)
		cancel()
		if err != nil {
			// A broker older than Kafka 3.0 fails it without a round
			// trip, and one refusing it refuses it each time; a slow or
			// failed answer leaves the broker's retry.
			if s.describeFails++; (!retriable(err) || s.describeFails >= 3) && s.ctx.Err() == nil {
				s.p.noDescribeTxn(err)
			}
			return
		}
		s.describeFails = 0
		if !strings.HasPrefix(state, "Prepare") {
			return
		}
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(completedPoll):
		}
	}
	return
}

// SetTransactionalID sets the transactional id the next session's client
// uses.
func (p *Publisher) SetTransactionalID(id string) {
	p.clMu.Lock()
	p.txnID = id
	p.clMu.Unlock()
}

// Fence makes a new client and loads the producer id of the transactional
// id: the broker bumps its epoch, which fences every older instance with
// the same id and settles what it left open (commits a transaction it was
// committing, aborts any other). A relay calls it only once it holds the
// slot, before each session.
func (p *Publisher) Fence(ctx context.Context) error {
	p.clMu.Lock()
	id := p.txnID
	// A new client for every session: its InitProducerID also aborts
	// whatever an earlier session of this process left open, and no state
	// of a failed session's client carries over.
	p.fenced = p.cl != nil
	p.clMu.Unlock()
	if id == "" {
		return errors.New("publisher: Fence before SetTransactionalID")
	}
	cl, err := p.client()
	if err != nil {
		return err
	}
	if !p.describeTxnOff.Load() {
		// Before the producer id is loaded: a client made anew here
		// fences nothing.
		if _, err := describeTxn(ctx, cl, id); err != nil && !retriable(err) {
			p.noDescribeTxn(err)
			p.markFenced() // replaced by a client of transaction version 1
			if cl, err = p.client(); err != nil {
				return err
			}
		}
	}
	if _, _, err := cl.ProducerID(ctx); err != nil {
		if isFenced(err) {
			p.markFenced()
		}
		return fmt.Errorf("init producer id for transactional id %s: %w", id, err)
	}
	return nil
}

// markFenced replaces the client before the next session: another instance
// took over the transactional id, and this client can no longer produce.
func (p *Publisher) markFenced() {
	p.clMu.Lock()
	p.fenced = true
	p.clMu.Unlock()
}

// transactionPacing are the transactional client's options that set how
// soon a new Kafka transaction may follow the last one.
//
// After EndTxn returns, the coordinator still writes the commit markers,
// and until it has, the next transaction cannot add a partition: it is told
// CONCURRENT_TRANSACTIONS. With transaction.version 2 (KIP-890 part 2, Kafka
// 4's default) the produce request adds the partition itself and the broker
// retries for the client after add.partitions.to.txn.retry.backoff.ms, 20 ms
// by default. The session therefore waits for the coordinator to complete
// the last commit before it produces again (Session.awaitCompleted, with
// DescribeTransactions). Where the broker does not answer that (tv1), the
// client keeps produce requests at v11 and adds partitions itself
// (AddPartitionsToTxn, transaction version 1, which every Kafka 4 broker
// serves, verifying each transactional produce since 3.6), and retries
// after 2 ms, as it does on any broker without transaction version 2.
// docs/DESIGN.md, "How soon one transaction follows the last", has the
// figures.
func transactionPacing(tv1 bool) []kgo.Opt {
	opts := []kgo.Opt{kgo.ConcurrentTransactionsBackoff(2 * time.Millisecond)}
	if tv1 {
		v := kversion.Stable()
		v.SetMaxKeyVersion(int16(kmsg.Produce), 11)
		opts = append(opts, kgo.MaxVersions(v))
	}
	return opts
}

// noDescribeTxn turns Session.awaitCompleted off, and makes the clients
// made after it of transaction version 1 (transactionPacing), saying why
// once. A session's client stays as it is: Fence makes the next one.
func (p *Publisher) noDescribeTxn(err error) {
	if p.describeTxnOff.Swap(true) {
		return
	}
	p.log.Info("exactly-once: the broker does not answer DescribeTransactions for the transactional id, so the relay cannot wait for each commit's markers before it produces again; "+
		"its transactions add their partitions themselves (transaction version 1) and retry after 2 ms, and follow each other a little slower",
		"transactional_id", p.txnID, "err", err.Error())
}

// describeTxn asks the coordinator for the state of transactional id id.
// A coordinator that does not know the id yet answers: "" and no error.
func describeTxn(ctx context.Context, cl *kgo.Client, id string) (string, error) {
	ds, err := kadm.NewClient(cl).DescribeTransactions(ctx, id)
	if err != nil {
		return "", shardErr(err)
	}
	d, ok := ds[id]
	if len(ds) != 1 || !ok {
		return "", fmt.Errorf("DescribeTransactions answered %d states for one transactional id", len(ds))
	}
	if d.Err != nil && !errors.Is(d.Err, kerr.TransactionalIDNotFound) {
		return "", d.Err
	}
	return d.State, nil
}
