package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/cdc-relay/cdc-relay/checkpoint"
	"github.com/cdc-relay/cdc-relay/decoder"
	"github.com/cdc-relay/cdc-relay/publisher"
	recordpkg "github.com/cdc-relay/cdc-relay/record"
	"github.com/cdc-relay/cdc-relay/replication"
)

// handler is the replication.Session of one connection: the record package
// turns each row into a record or a dead letter, the publisher session
// sends it, and --on-invalid decides whether an invalid event halts.
type handler struct {
	builder *recordpkg.Builder
	pub     recordSink
	halt    bool   // --on-invalid halt
	dlq     string // --dlq-topic: for logs, and the dead letter of a refused record
	// broker names the dead letters' place in the logs (deadLetterPlace).
	broker  checkpoint.Broker
	metrics *Metrics
	// dead counts the dead letters; nil counts each in metrics at once.
	dead *deadLetters
	log  *slog.Logger
	// skipBelow is what exactly-once delivery found in Kafka when the
	// session started (replication.Skipping).
	skipBelow replication.LSN
	// tracing, when set (--tracing), gives each record a span.
	tracing *tracing
	// lastTx is the transaction of the previous row, whose commit-to-read
	// time is observed once.
	lastTx replication.LSN
	// txRow is the row's place in its transaction (0 for the first), for
	// rowID.
	txRow uint64
	// unconfigured limits the WARN for rows of unconfigured tables to one
	// line per table per minute; shared by every session of the process.
	unconfigured *rateLog
}

// stageSample is how often a record's stages are timed: every 16th.
const stageSample = 16

var (
	_ replication.Session    = (*handler)(nil)
	_ replication.Bounded    = (*handler)(nil)
	_ replication.Skipping   = (*handler)(nil)
	_ replication.SlotLosing = (*handler)(nil)
)

// session returns the handler of one connection: h's settings with the
// row → record step and the connection's publisher session.
func (h handler) session(builder *recordpkg.Builder, pub recordSink) *handler {
	h.builder, h.pub = builder, pub
	return &h
}

// recordSink is what the handler needs of a *publisher.Session.
type recordSink interface {
	Enqueue(*publisher.Record) error
	SlotLost()
	Stopping()
	Boundary(lastSeq, end uint64, commitTime time.Time)
	Drain(context.Context) error
	Close()
	Done() <-chan struct{}
	Err() error
}

// Row builds the record for one row, or its dead-letter record, and hands it
// to the publisher.
func (h *handler) Row(ctx context.Context, seq uint64, size int, tx *replication.Tx, row *decoder.Row) error {
	rec := publisher.NewRecord()
	rec.Seq, rec.Reserved = seq, size
	newTx := tx.FinalLSN != h.lastTx
	if newTx {
		h.txRow = 0
	} else {
		h.txRow++
	}
	if newTx || seq%stageSample == 0 {
		now := time.Now()
		if newTx {
			h.lastTx = tx.FinalLSN
			if !tx.CommitTime.IsZero() && h.metrics != nil {
				h.metrics.CommitToRead(now.Sub(tx.CommitTime))
			}
		}
		if seq%stageSample == 0 {
			rec.Read = now
		}
	}
	inv, err := h.builder.Build(ctx, rec, tx.CommitTime, row)
	if err != nil {
		publisher.Release(rec)
		if recordpkg.IsHalt(err) {
			return replication.Fatal(err)
		}
		return err
	}
	if len(rec.ID) == 0 {
		// A row of an unconfigured table, or one without an id: the
		// sinks that name each message (RabbitMQ's message_id) get an id
		// that the same row has again when it is read again.
		rec.ID = rowID(tx.FinalLSN, h.txRow)
	}
	if inv != nil {
		// A row of a table that is not configured never halts: rows
		// already in the WAL keep coming after the publication is fixed,
		// so a halt would halt again on the same row at every restart.
		if h.halt && inv.Kind != recordpkg.ReasonUnconfigured {
			publisher.Release(rec)
			return replication.Fatal(inv)
		}
		h.invalid(inv, seq)
	}
	if h.tracing != nil {
		h.tracing.start(rec, tx.CommitTime, row, inv)
	}
	return markFenced(haltOn(h.pub.Enqueue(rec)))
}

// invalid counts and logs an event sent to the dead-letter topic as the
// record of seq.
func (h *handler) invalid(inv *recordpkg.Invalid, seq uint64) {
	if h.dead != nil {
		h.dead.add(seq, inv.Kind)
	} else {
		h.metrics.DeadLetter(inv.Kind)
	}
	if inv.Kind == recordpkg.ReasonUnconfigured {
		h.unconfiguredRow(inv.Table)
		return
	}
	place, key := deadLetterPlace(h.broker)
	h.log.Warn("invalid event sent to "+place, "id", inv.ID, "event_type", inv.EventType, "reason", inv.Reason, key, h.dlq)
}

// rejected handles a record the broker refused (publisher.Config.Reject),
// for every session alike (it needs no builder):
// under --on-invalid dlq it becomes a dead letter without its value; under
// halt the relay stops naming the event.
func (h *handler) rejected(r *publisher.Record, err error) (*publisher.Record, error) {
	dl, inv := recordpkg.Rejected(h.dlq, r, err)
	if h.halt {
		return nil, replication.Fatal(inv)
	}
	h.invalid(inv, r.Seq)
	if h.tracing != nil {
		h.tracing.rejected(r, dl, inv)
	}
	return dl, nil
}

// SlotLost tells the publisher session that the replication connection
// failed (exactly-once: its open transaction is left to the next fence).
func (h *handler) SlotLost() { h.pub.SlotLost() }

// Stopping tells the publisher session that the relay is stopping, so
// its Close need not wait long for the broker.
func (h *handler) Stopping() { h.pub.Stopping() }

// Drain waits for Kafka to acknowledge everything handed over.
func (h *handler) Drain(ctx context.Context) error { return markFenced(h.pub.Drain(ctx)) }

// Close drops the session.
func (h *handler) Close() { h.pub.Close() }

// Done is closed when the publisher session stopped on a terminal error.
func (h *handler) Done() <-chan struct{} { return h.pub.Done() }

// Err is the publisher session's terminal error; a PostgreSQL transaction
// too large for one Kafka transaction halts the relay, and a fence by
// another relay is marked replication.ErrFenced.
func (h *handler) Err() error { return markFenced(haltOn(h.pub.Err())) }

// markFenced marks an error of Kafka meaning another relay with the same
// transactional id took over (PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH,
// which Kafka 4 answers a produce or EndTxn of an older epoch) with
// replication.ErrFenced, so that the reconnect counts as cause "fenced".
func markFenced(err error) error {
	if err != nil && !errors.Is(err, replication.ErrFenced) &&
		(errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch)) {
		return fmt.Errorf("%w: %w", replication.ErrFenced, err)
	}
	return err
}

// haltOn marks the publisher errors that halt the relay: a PostgreSQL
// transaction that cannot be delivered within --txn-timeout (a replay would
// only time out again).
func haltOn(err error) error {
	if err == nil {
		return nil // without the errors.As below, whose target escapes: no allocation per event
	}
	var tooLong *publisher.TxnTimeoutError
	if errors.As(err, &tooLong) {
		return replication.Fatal(err)
	}
	return err
}

// Boundary passes the end of a PostgreSQL transaction on to the publisher
// session, where a Kafka transaction may end (exactly-once).
func (h *handler) Boundary(lastSeq uint64, end replication.LSN, commitTime time.Time) {
	h.pub.Boundary(lastSeq, uint64(end), commitTime)
}

// SkipBelow is the checkpoint read when the session started
// (exactly-once); 0 otherwise.
func (h *handler) SkipBelow() replication.LSN { return h.skipBelow }

// skippedRows counts the rows of other tables skipped under
// --allow-extra-tables (replication.Deps.OnSkippedRow) and logs the first
// of each table at INFO. It runs on the reader goroutine only.
func skippedRows(m *Metrics, log *slog.Logger, publication string) func(table string) {
	seen := map[string]bool{}
	return func(table string) {
		m.Skipped(table)
		if !seen[table] {
			seen[table] = true
			log.Info("skipping the rows of a table that is not an outbox table (--allow-extra-tables); counted in cdc_relay_skipped_rows_total",
				"table", table, "publication", publication)
		}
	}
}

// unconfiguredRow counts a row of a table the publication publishes but
// --table does not name (a dead letter of kind unconfigured_table) and logs
// it at WARN, at most one line per table per minute with the rows since.
func (h *handler) unconfiguredRow(table string) {
	if h.metrics != nil {
		h.metrics.Unconfigured(table)
	}
	n, ok := h.unconfigured.allow(table, time.Now())
	if !ok {
		return
	}
	place, key := deadLetterPlace(h.broker)
	h.log.Warn("a row of a table that is not a configured outbox table arrived (the publication publishes it): sent to "+place+" with its columns as text. "+
		"To publish such rows as events, configure the table as an outbox table (add --table "+table+" and restart), then send the dead letters on with cdc-relay dlq redrive --kind unconfigured_table; "+
		"otherwise drop the table from the publication (ALTER PUBLICATION … DROP TABLE "+table+"). Logged once a minute per table; counted in cdc_relay_unconfigured_rows_total",
		"table", table, "reason", recordpkg.ReasonUnconfigured, key, h.dlq, "rows", n)
}

// rateLog lets one log line per key through per interval (default a
// minute), counting the calls in between.
type rateLog struct {
	interval time.Duration
	mu       sync.Mutex
	keys     map[string]*rateKey
}

type rateKey struct {
	last time.Time
	n    int64 // calls since the last line, this one included
}

// allow reports whether a line for key may be logged now, and how many
// calls it stands for (this one and those suppressed since the last line).
// A nil rateLog lets every line through.
func (r *rateLog) allow(key string, now time.Time) (int64, bool) {
	if r == nil {
		return 1, true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.keys == nil {
		r.keys = map[string]*rateKey{}
	}
	interval := r.interval
	if interval <= 0 {
		interval = time.Minute
	}
	k := r.keys[key]
	if k == nil {
		k = &rateKey{}
		r.keys[key] = k
	}
	k.n++
	if !k.last.IsZero() && now.Sub(k.last) < interval {
		return 0, false
	}
	n := k.n
	k.last, k.n = now, 0
	return n, true
}

// Invalids handles the invalid events of a tool that publishes rows
// outside the stream (replay) as run does: each is counted in the metrics
// and logged, and a record the broker refuses becomes a dead letter; under
// --on-invalid halt, Halt says so and the tool stops.
type Invalids struct{ h handler }

// Invalids are the set-up's: --on-invalid and --dlq-topic (under RabbitMQ
// --rabbitmq-dlq-stream), its metrics and log.
func (s *Setup) Invalids() *Invalids {
	return &Invalids{h: handler{halt: s.Config.OnInvalid == "halt", dlq: s.Config.DeadLetters(), broker: brokerOf(s.Config), metrics: s.Metrics, log: s.log}}
}

// Halt reports whether an invalid event stops the tool (--on-invalid halt).
func (v *Invalids) Halt() bool { return v.h.halt }

// Add counts and logs inv, sent to the dead-letter topic as the record of
// seq.
func (v *Invalids) Add(inv *recordpkg.Invalid, seq uint64) { v.h.invalid(inv, seq) }

// Rejected is a publisher.Config.Reject: the dead letter of a record the
// broker refused, or under --on-invalid halt a fatal error naming it.
func (v *Invalids) Rejected(r *publisher.Record, err error) (*publisher.Record, error) {
	return v.h.rejected(r, err)
}

// rowID is the id of a row that has none of its own: its transaction's
// commit LSN and its place in the transaction, "0/16B3748-2". A slot reads
// a transaction whole and in the same order every time, so the row gets
// the same id when it is read again after a restart.
func rowID(commit replication.LSN, row uint64) []byte {
	return strconv.AppendUint(append([]byte(commit.String()), '-'), row, 10)
}
