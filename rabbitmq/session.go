package rabbitmq

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/cdc-relay/cdc-relay/publisher"
)

// SinkConfig configures a Sink.
type SinkConfig struct {
	URL string
	TLS *tls.Config // for amqps; nil: the system roots
	// Declare declares the exchange (a durable topic exchange) and the
	// dead-letter stream at every connect; false only checks, at Prepare,
	// that they exist.
	Declare bool
	Format  Format
	// The window of unconfirmed messages of a session (Config's
	// MaxInFlight and MaxInFlightBytes).
	MaxInFlight      int
	MaxInFlightBytes int64
	// DeadLetter hears of each dead letter the sink makes (unroutable,
	// invalid_routing_key), with its kind, id and reason, before it is
	// published; it may be nil.
	DeadLetter func(kind, id, reason string)
	Observer   Observer
	Logger     *slog.Logger
}

// Sink publishes the records of the relay's replication sessions to
// RabbitMQ, one Session (and one connection) per replication session.
type Sink struct {
	cfg SinkConfig

	mu  sync.Mutex
	cur *Publisher // the newest session's
}

// NewSink returns a sink; its sessions connect.
func NewSink(cfg SinkConfig) *Sink {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Sink{cfg: cfg}
}

// MissingError is an exchange or a stream that does not exist while the
// relay declares nothing (--rabbitmq-declare=false).
type MissingError struct {
	Kind, Name string // Kind: "exchange" or "stream"
	Err        *amqp.Error
}

func (e *MissingError) Error() string {
	return fmt.Sprintf("%s %q does not exist, and the relay declares nothing (--rabbitmq-declare=false): declare it, or let the relay (%s)", e.Kind, e.Name, e.Err.Reason)
}

// Prepare connects once and declares the exchange and the dead-letter
// stream, or with Declare false checks that they exist: an
// *ExchangeError, a *StreamError or a *MissingError is a setting to fix;
// any other error, such as a broker not reachable, may pass.
func (s *Sink) Prepare(ctx context.Context) error {
	f := &s.cfg.Format
	conn, err := amqp.DialConfig(s.cfg.URL, amqp.Config{Heartbeat: 10 * time.Second, TLSClientConfig: s.cfg.TLS, Dial: amqp.DefaultDial(10 * time.Second),
		Properties: amqp.Table{"connection_name": "cdc-relay preflight"}})
	if err != nil {
		return err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	if s.cfg.Declare {
		if err := ch.ExchangeDeclare(f.Exchange, amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
			var aerr *amqp.Error
			if errors.As(err, &aerr) && aerr.Code == amqp.PreconditionFailed {
				return &ExchangeError{Exchange: f.Exchange, Err: aerr}
			}
			return err
		}
		return declareStreams(ch, []string{f.DLQStream})
	}
	var aerr *amqp.Error
	if err := ch.ExchangeDeclarePassive(f.Exchange, amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
		if errors.As(err, &aerr) && aerr.Code == amqp.NotFound {
			return &MissingError{Kind: "exchange", Name: f.Exchange, Err: aerr}
		}
		return err
	}
	if _, err := ch.QueueDeclarePassive(f.DLQStream, true, false, false, false, nil); err != nil {
		if errors.As(err, &aerr) && Missing(err) {
			return &MissingError{Kind: "stream", Name: f.DLQStream, Err: aerr}
		}
		return err
	}
	return nil
}

// Health is the newest session's publisher's; the zero Health before the
// first session.
func (s *Sink) Health() Health {
	s.mu.Lock()
	p := s.cur
	s.mu.Unlock()
	if p == nil {
		return Health{}
	}
	return p.Health()
}

// Session publishes the records of one replication session, a
// relay's record sink: each record becomes a Message (Format.Message),
// and acker hears of the contiguous prefix of sequence numbers the broker
// confirmed. What is unconfirmed when the session ends is never acked; the
// next session publishes it again from the confirmed LSN.
type Session struct {
	sink   *Sink
	pub    *Publisher
	acker  publisher.Acker
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	acked  chan struct{} // signalled when the prefix grows

	mu      sync.Mutex
	err     error
	lastSeq uint64    // newest enqueued
	upTo    uint64    // contiguous prefix acked
	waiting []waiting // enqueued, not yet acked, in Seq order
}

// waiting is one enqueued record: what the tracker charged for it, and
// who hears of its confirm.
type waiting struct {
	seq      uint64
	reserved int
	onAck    publisher.AckHook
}

// ErrSessionClosed is a closed session's Err.
var ErrSessionClosed = errors.New("rabbitmq: session closed")

// NewSession starts a session on a connection of its own; it runs until
// Close or an error retrying cannot help (Err).
func (s *Sink) NewSession(ctx context.Context, acker publisher.Acker) *Session {
	ctx, cancel := context.WithCancel(ctx)
	ss := &Session{sink: s, acker: acker, ctx: ctx, cancel: cancel, done: make(chan struct{}), acked: make(chan struct{}, 1)}
	var streams []string
	if s.cfg.Format.DLQStream != "" {
		streams = []string{s.cfg.Format.DLQStream}
	}
	ss.pub = New(Config{URL: s.cfg.URL, TLS: s.cfg.TLS, Exchange: s.cfg.Format.Exchange, Declare: s.cfg.Declare, Streams: streams,
		MaxInFlight: s.cfg.MaxInFlight, MaxInFlightBytes: s.cfg.MaxInFlightBytes,
		Acked: ss.ack, Unroutable: ss.unroutable, Observer: s.cfg.Observer, Logger: s.cfg.Logger})
	s.mu.Lock()
	s.cur = ss.pub
	s.mu.Unlock()
	go func() {
		defer close(ss.done)
		err := ss.pub.Run(ctx)
		if err == nil {
			err = ErrSessionClosed
		}
		ss.mu.Lock()
		if ss.err == nil {
			ss.err = err
		}
		ss.mu.Unlock()
	}()
	return ss
}

// Enqueue hands a record over; the caller may not use r after.
func (ss *Session) Enqueue(r *publisher.Record) error {
	if err := ss.Err(); err != nil {
		return err
	}
	m, kind := ss.sink.cfg.Format.Message(r)
	if kind != "" {
		ss.deadLetter(kind, m)
	}
	ss.mu.Lock()
	ss.waiting = append(ss.waiting, waiting{seq: r.Seq, reserved: r.Reserved, onAck: r.OnAck})
	ss.lastSeq = r.Seq
	ss.mu.Unlock()
	publisher.Release(r)
	if err := ss.pub.Publish(ss.ctx, m); err != nil {
		if ss.ctx.Err() != nil {
			return ErrSessionClosed
		}
		return err
	}
	return nil
}

// deadLetter tells the SinkConfig of a dead letter the sink made.
func (ss *Session) deadLetter(kind string, dl *Message) {
	if ss.sink.cfg.DeadLetter != nil {
		reason, _ := dl.Publishing.Headers[HeaderError].(string)
		ss.sink.cfg.DeadLetter(kind, dl.Publishing.MessageId, reason)
	}
}

// unroutable is the Publisher's Config.Unroutable: the dead letter of a
// message the broker returned.
func (ss *Session) unroutable(m *Message) (*Message, error) {
	dl := ss.sink.cfg.Format.DeadLetter(m, KindUnroutable,
		fmt.Sprintf("no queue is bound to exchange %s for routing key %s (basic.return NO_ROUTE): bind a queue, or change --routing-key", m.Exchange, m.RoutingKey))
	ss.deadLetter(KindUnroutable, dl)
	ss.returned(m.Seq, dl.RoutingKey)
	return dl, nil
}

// returned tells the hook of the record of seq, if it has a
// publisher.ReturnHook, that the broker gave it back.
func (ss *Session) returned(seq uint64, routingKey string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	i, ok := slices.BinarySearchFunc(ss.waiting, seq, func(w waiting, seq uint64) int { return cmp.Compare(w.seq, seq) })
	if !ok {
		return
	}
	if h, ok := ss.waiting[i].onAck.(publisher.ReturnHook); ok {
		h.Returned(KindUnroutable, routingKey)
	}
}

// ack is the Publisher's Config.Acked: it acks the prefix up to upTo with
// what the tracker charged for it.
func (ss *Session) ack(upTo uint64, _ int, _ int64) {
	ss.mu.Lock()
	n, bytes := 0, int64(0)
	for n < len(ss.waiting) && ss.waiting[n].seq <= upTo {
		w := &ss.waiting[n]
		bytes += int64(w.reserved)
		if w.onAck != nil {
			w.onAck.Acked(-1, -1) // no partition or offset on RabbitMQ
		}
		n++
	}
	ss.waiting = ss.waiting[n:]
	if n > 0 {
		ss.upTo = upTo
		// Under ss.mu: acknowledgements reach the acker in order.
		ss.acker.Ack(upTo, n, bytes)
	}
	ss.mu.Unlock()
	if n > 0 {
		select {
		case ss.acked <- struct{}{}:
		default:
		}
	}
}

// SlotLost does nothing: without transactions nothing is left open.
func (ss *Session) SlotLost() {}

// Stopping does nothing: Close drops the connection at once.
func (ss *Session) Stopping() {}

// Boundary does nothing: without transactions a PostgreSQL transaction's
// end changes nothing on RabbitMQ.
func (ss *Session) Boundary(uint64, uint64, time.Time) {}

// Drain waits until the broker confirmed everything enqueued.
func (ss *Session) Drain(ctx context.Context) error {
	return publisher.WaitDrained(ctx, func() (bool, error) {
		ss.mu.Lock()
		defer ss.mu.Unlock()
		return ss.upTo >= ss.lastSeq, ss.err
	}, ss.acked, ss.done)
}

// Close stops the session and closes its connection; what is unconfirmed
// is dropped, for the next session to publish again.
func (ss *Session) Close() {
	ss.cancel()
	<-ss.done
}

// Done is closed when the session has stopped (Err says why).
func (ss *Session) Done() <-chan struct{} { return ss.done }

// Err is the error that stopped the session, or nil while it runs.
func (ss *Session) Err() error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.err
}
