package rabbitmq

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/cdc-relay/cdc-relay/internal/backoff"
)

// Config is a Publisher's configuration.
type Config struct {
	URL string      // amqp://… or amqps://…
	TLS *tls.Config // for amqps; nil: the system roots
	// Exchange, with Declare, is declared as a durable topic exchange at
	// every connect; an existing exchange of another type or durability is
	// an *ExchangeError. Messages name their exchange themselves.
	Exchange string
	Declare  bool
	// Streams, with Declare, are declared as durable stream queues
	// (x-queue-type: stream) at every connect, the dead-letter stream for
	// one; an existing queue of another kind is a *StreamError.
	Streams []string
	// The window of unconfirmed messages, in events and bytes (body and
	// headers as sent): Publish waits for room. Defaults 10,000 and 64 MiB.
	MaxInFlight      int
	MaxInFlightBytes int64
	// Acked is called, from the publisher's goroutine, as the contiguous
	// prefix of confirmed sequence numbers grows: upTo is its newest
	// sequence number, events and bytes what this call covers.
	Acked func(upTo uint64, events int, bytes int64)
	// Unroutable gives the dead letter to publish in place of a message the
	// broker returned (no queue bound for its routing key), with the same
	// Seq. An error ends Run.
	Unroutable func(m *Message) (*Message, error)
	Observer   Observer
	Logger     *slog.Logger
	Backoff    backoff.Backoff // reconnects and re-sends after a nack
}

// Observer learns what the broker answered; its methods are called from
// the publisher's goroutine.
type Observer interface {
	Confirmed(n int)
	Nacked()
	Returned()
	Reconnected()
}

type nopObserver struct{}

func (nopObserver) Confirmed(int) {}
func (nopObserver) Nacked()       {}
func (nopObserver) Returned()     {}
func (nopObserver) Reconnected()  {}

// Message is one record for RabbitMQ. Publishing.MessageId must be set: a
// basic.return is matched to its message by it.
type Message struct {
	Seq        uint64
	Exchange   string // "": the default exchange (the routing key names a queue)
	RoutingKey string
	Publishing amqp.Publishing
	// DeadLetter marks a message Unroutable gave: if it is returned too,
	// Run ends, since the dead-letter destination itself is unroutable.
	DeadLetter bool
}

func (m *Message) size() int64 {
	n := int64(len(m.Publishing.Body) + len(m.RoutingKey) + len(m.Publishing.MessageId))
	for k, v := range m.Publishing.Headers {
		n += int64(len(k))
		switch v := v.(type) {
		case string:
			n += int64(len(v))
		case []byte:
			n += int64(len(v))
		default:
			n += 8
		}
	}
	return n
}

// ExchangeError is a declare the broker refused with 406
// PRECONDITION_FAILED: the exchange exists with another type or
// durability. Retrying cannot help.
type ExchangeError struct {
	Exchange string
	Err      *amqp.Error
}

func (e *ExchangeError) Error() string {
	return fmt.Sprintf("exchange %q exists with another type or durability than a durable topic exchange: %s (delete it, or name another with --rabbitmq-exchange)", e.Exchange, e.Err.Reason)
}

// StreamError is a stream declare the broker refused with 406
// PRECONDITION_FAILED: a queue of that name exists with other arguments.
// Retrying cannot help.
type StreamError struct {
	Stream string
	Err    *amqp.Error
}

func (e *StreamError) Error() string {
	return fmt.Sprintf("queue %q exists with other arguments than a durable stream (x-queue-type: stream): %s (delete it, or name another)", e.Stream, e.Err.Reason)
}

// ErrDeadLetterUnroutable ends Run when a dead letter is returned.
var ErrDeadLetterUnroutable = errors.New("rabbitmq: the dead-letter destination is unroutable: no queue is bound for it")

// Health is what readiness needs to know.
type Health struct {
	BlockedSince time.Time // a memory or disk alarm holds publishing; zero: not blocked
	BlockReason  string
	FailingSince time.Time // connecting has failed since; zero: connected
	LastError    string
}

type state uint8

const (
	unsent    state = iota
	sent            // awaiting its confirm
	confirmed       // acked and not returned
)

type entry struct {
	m        *Message
	size     int64
	st       state
	dc       *amqp.DeferredConfirmation
	returned bool
	due      time.Time // a nacked message is sent again from then
	nacks    int
}

// Publisher publishes Messages and acknowledges them in sequence order.
type Publisher struct {
	cfg Config
	obs Observer
	log *slog.Logger

	mu      sync.Mutex
	pending []*entry // handed to Publish, not yet in the window
	events  int      // in the window or pending
	bytes   int64
	room    chan struct{} // signalled when the window shrinks
	notify  chan struct{} // signalled when pending grows
	health  Health
	stopped error

	// Only Run's goroutine uses these.
	window   []*entry // in Seq order, oldest unacked first
	next     int      // window[next:] have not been sent on this channel
	resend   []*entry // nacked, to send again when due
	conn     *amqp.Connection
	ch       *amqp.Channel
	returns  chan amqp.Return
	closed   chan *amqp.Error // the channel's, then the connection's
	blocked  chan amqp.Blocking
	isBlock  bool
	lastSeq  uint64
	reconnAt time.Time
}

// New makes a Publisher; Run connects it.
func New(cfg Config) *Publisher {
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 10000
	}
	if cfg.MaxInFlightBytes <= 0 {
		cfg.MaxInFlightBytes = 64 << 20
	}
	p := &Publisher{cfg: cfg, obs: cfg.Observer, log: cfg.Logger,
		room: make(chan struct{}, 1), notify: make(chan struct{}, 1)}
	if p.obs == nil {
		p.obs = nopObserver{}
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	return p
}

// Publish hands m to the publisher, waiting while the window is full. It
// returns the error that ended Run, if Run has ended.
func (p *Publisher) Publish(ctx context.Context, m *Message) error {
	e := &entry{m: m, size: m.size()}
	for {
		p.mu.Lock()
		if p.stopped != nil {
			err := p.stopped
			p.mu.Unlock()
			return err
		}
		if p.events == 0 || (p.events < p.cfg.MaxInFlight && p.bytes+e.size <= p.cfg.MaxInFlightBytes) {
			p.pending = append(p.pending, e)
			p.events++
			p.bytes += e.size
			p.mu.Unlock()
			signal(p.notify)
			return nil
		}
		p.mu.Unlock()
		select {
		case <-p.room:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// InFlight is how many messages are handed over and not yet acked.
func (p *Publisher) InFlight() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.events
}

// Health tells whether publishing is blocked or failing, and since when.
func (p *Publisher) Health() Health {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.health
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Run publishes until ctx ends or an error retrying cannot help (an
// *ExchangeError, a *StreamError, ErrDeadLetterUnroutable, an Unroutable error), which it
// returns. What is unconfirmed then is not acked: the caller restarts from
// its last acked position.
func (p *Publisher) Run(ctx context.Context) error {
	err := p.run(ctx)
	p.mu.Lock()
	p.stopped = err
	if p.stopped == nil {
		p.stopped = errors.New("rabbitmq: publisher stopped")
	}
	p.mu.Unlock()
	signal(p.room)
	p.disconnect()
	return err
}

func (p *Publisher) run(ctx context.Context) error {
	for {
		if ctx.Err() != nil {
			return nil
		}
		if p.ch == nil {
			if err := p.connect(ctx); err != nil {
				return err
			}
			if p.ch == nil {
				continue
			}
		}
		p.take()
		if err := p.confirms(); err != nil {
			return err
		}
		if !p.isBlock && p.ch != nil {
			p.send()
		}
		if p.ch == nil {
			continue
		}
		var head <-chan struct{}
		if p.next > 0 {
			for _, e := range p.window[:p.next] {
				if e.st == sent {
					head = e.dc.Done()
					break
				}
			}
		}
		var timer <-chan time.Time
		if due, ok := p.nextDue(); ok {
			timer = time.After(time.Until(due))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-p.notify:
		case <-head:
		case <-timer:
		case r, ok := <-p.returns:
			if !ok {
				p.lost(errors.New("channel closed"))
				continue
			}
			p.returned(r)
		case err := <-p.closed:
			p.lost(fmt.Errorf("channel closed: %v", err))
		case b, ok := <-p.blocked:
			if !ok {
				p.lost(errors.New("connection closed"))
				continue
			}
			p.block(b)
		}
	}
}

// take moves what Publish handed over into the window.
func (p *Publisher) take() {
	p.mu.Lock()
	if len(p.pending) > 0 {
		p.window = append(p.window, p.pending...)
		clear(p.pending)
		p.pending = p.pending[:0]
	}
	p.mu.Unlock()
}

// send publishes the nacked messages that are due, then those not yet
// sent on this channel, in Seq order.
func (p *Publisher) send() {
	now := time.Now()
	keep := p.resend[:0]
	for i, e := range p.resend {
		if e.due.After(now) {
			keep = append(keep, e)
			continue
		}
		if !p.publish(e) {
			keep = append(keep, p.resend[i:]...)
			break
		}
	}
	clear(p.resend[len(keep):])
	p.resend = keep
	for p.ch != nil && p.next < len(p.window) {
		if e := p.window[p.next]; e.st != confirmed && !p.publish(e) {
			return
		}
		p.next++
	}
}

func (p *Publisher) publish(e *entry) bool {
	dc, err := p.ch.PublishWithDeferredConfirm(e.m.Exchange, e.m.RoutingKey, true, false, e.m.Publishing)
	if err != nil {
		p.lost(fmt.Errorf("publish: %w", err))
		return false
	}
	e.dc, e.st, e.returned = dc, sent, false
	return true
}

func (p *Publisher) nextDue() (time.Time, bool) {
	if len(p.resend) == 0 || p.isBlock {
		return time.Time{}, false
	}
	due := p.resend[0].due
	for _, e := range p.resend[1:] {
		if e.due.Before(due) {
			due = e.due
		}
	}
	return due, true
}

// drainReturns applies every return received so far. A return is sent
// before the confirm of its message, and the library hands it over before
// it resolves that confirm, so after this every confirm already resolved
// has its return applied.
func (p *Publisher) drainReturns() {
	for {
		select {
		case r, ok := <-p.returns:
			if !ok {
				return
			}
			p.returned(r)
		default:
			return
		}
	}
}

// returned marks the oldest sent message with the return's id.
func (p *Publisher) returned(r amqp.Return) {
	for _, e := range p.window {
		if e.st == sent && !e.returned && e.m.Publishing.MessageId == r.MessageId {
			e.returned = true
			p.log.Debug("rabbitmq: message returned", "message_id", r.MessageId, "routing_key", r.RoutingKey, "reply", r.ReplyText)
			return
		}
	}
	p.log.Warn("rabbitmq: a return matched no unconfirmed message", "message_id", r.MessageId, "routing_key", r.RoutingKey)
}

// confirms applies the confirms that have arrived, from the oldest, and
// acks the confirmed prefix.
func (p *Publisher) confirms() error {
	if p.ch == nil {
		return nil
	}
	p.drainReturns()
scan:
	for _, e := range p.window[:p.next] {
		if e.st == unsent || e.st == confirmed {
			continue
		}
		select {
		case <-e.dc.Done():
		default:
			break scan
		}
		switch {
		case !e.dc.Acked() && p.ch.IsClosed():
			// Resolved by the channel's close, not by the broker: lost
			// handles it with everything else unconfirmed.
			p.lost(errors.New("channel closed"))
			return nil
		case !e.dc.Acked():
			e.nacks++
			e.st = unsent
			e.due = time.Now().Add(nackDelay(e.nacks))
			p.resend = append(p.resend, e)
			p.obs.Nacked()
		case e.returned:
			if e.m.DeadLetter {
				return ErrDeadLetterUnroutable
			}
			p.obs.Returned()
			dl, err := p.cfg.Unroutable(e.m)
			if err != nil {
				return err
			}
			dl.Seq, dl.DeadLetter = e.m.Seq, true
			e.m, e.st, e.due = dl, unsent, time.Time{} // e.size stays the original's, counted in the window
			p.resend = append(p.resend, e)
		default:
			e.st = confirmed
		}
	}
	n := 0
	var bytes int64
	for n < p.next && p.window[n].st == confirmed {
		bytes += p.window[n].size
		p.lastSeq = p.window[n].m.Seq
		n++
	}
	if n == 0 {
		return nil
	}
	clear(p.window[:n])
	p.window = p.window[n:]
	p.next -= n
	p.mu.Lock()
	p.events -= n
	p.bytes -= bytes
	p.mu.Unlock()
	signal(p.room)
	p.obs.Confirmed(n)
	if p.cfg.Acked != nil {
		p.cfg.Acked(p.lastSeq, n, bytes)
	}
	return nil
}

// nackDelay is the wait before a nacked message goes again: a full queue
// refuses it, so give the consumers time.
func nackDelay(nacks int) time.Duration {
	d := 100 * time.Millisecond << min(nacks-1, 6)
	return min(d, 5*time.Second)
}
