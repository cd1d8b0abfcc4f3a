package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// connect dials, opens a confirm channel and declares the exchange, with
// backoff between attempts. After it, everything unacked goes again, in
// Seq order. It returns an error only when retrying cannot help.
func (p *Publisher) connect(ctx context.Context) error {
	if err := p.dial(); err != nil {
		var exErr *ExchangeError
		var stErr *StreamError
		if errors.As(err, &exErr) || errors.As(err, &stErr) {
			return err
		}
		p.mu.Lock()
		if p.health.FailingSince.IsZero() {
			p.health.FailingSince = time.Now()
		}
		p.health.LastError = err.Error()
		p.mu.Unlock()
		p.log.Warn("rabbitmq: cannot connect; retrying", "err", err, "attempt", p.cfg.Backoff.Attempts()+1)
		p.cfg.Backoff.Wait(ctx) // ctx's end is run's to see
		return nil
	}
	if p.cfg.Backoff.Attempts() > 0 || !p.reconnAt.IsZero() {
		p.obs.Reconnected()
		p.log.Info("rabbitmq: connected again; sending what was unconfirmed", "unconfirmed", len(p.window))
	}
	p.reconnAt = time.Now()
	p.cfg.Backoff.Reset()
	p.mu.Lock()
	p.health.FailingSince, p.health.LastError = time.Time{}, ""
	p.mu.Unlock()
	for _, e := range p.window {
		if e.st != confirmed {
			e.st, e.dc, e.returned = unsent, nil, false
		}
	}
	// Every unconfirmed entry goes again on the new channel, in Seq order
	// (send skips the confirmed ones).
	clear(p.resend)
	p.resend = p.resend[:0]
	p.next = 0
	for p.next < len(p.window) && p.window[p.next].st == confirmed {
		p.next++
	}
	return nil
}

func (p *Publisher) dial() error {
	cfg := amqp.Config{
		Heartbeat:       10 * time.Second,
		TLSClientConfig: p.cfg.TLS,
		Properties:      amqp.Table{"connection_name": "cdc-relay", "product": "cdc-relay"},
		Locale:          "en_US",
	}
	conn, err := amqp.DialConfig(p.cfg.URL, cfg)
	if err != nil {
		return err
	}
	ch, err := conn.Channel()
	if err != nil {
		conn.Close()
		return err
	}
	if p.cfg.Declare && p.cfg.Exchange != "" {
		if err := ch.ExchangeDeclare(p.cfg.Exchange, amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
			conn.Close()
			var aerr *amqp.Error
			if errors.As(err, &aerr) && aerr.Code == amqp.PreconditionFailed {
				return &ExchangeError{Exchange: p.cfg.Exchange, Err: aerr}
			}
			return err
		}
	}
	if p.cfg.Declare {
		if err := declareStreams(ch, p.cfg.Streams); err != nil {
			conn.Close()
			return err
		}
	}
	if err := ch.Confirm(false); err != nil {
		conn.Close()
		return err
	}
	p.conn, p.ch = conn, ch
	p.returns = ch.NotifyReturn(make(chan amqp.Return, p.cfg.MaxInFlight+16))
	// One channel for both closes: the channel's comes first when only the
	// channel fails, the connection's when the connection does.
	p.closed = make(chan *amqp.Error, 2)
	ch.NotifyClose(p.closed)
	p.blocked = conn.NotifyBlocked(make(chan amqp.Blocking, 16))
	return nil
}

// lost drops the connection after an error: the next connect sends every
// unconfirmed message again, in order.
func (p *Publisher) lost(err error) {
	if p.ch == nil {
		return
	}
	p.log.Warn("rabbitmq: connection lost; reconnecting", "err", err, "unconfirmed", len(p.window))
	p.mu.Lock()
	p.health.LastError = err.Error()
	p.mu.Unlock()
	p.disconnect()
}

func (p *Publisher) disconnect() {
	if p.conn != nil {
		// Close waits for the broker's answer; a blocked or dead broker may
		// never give it.
		go p.conn.Close()
	}
	p.conn, p.ch, p.returns, p.closed, p.blocked = nil, nil, nil, nil, nil
	if p.isBlock {
		p.block(amqp.Blocking{Active: false})
	}
}

// block pauses publishing while the broker says connection.blocked.
func (p *Publisher) block(b amqp.Blocking) {
	p.isBlock = b.Active
	p.mu.Lock()
	if b.Active {
		if p.health.BlockedSince.IsZero() {
			p.health.BlockedSince = time.Now()
		}
		p.health.BlockReason = b.Reason
	} else {
		p.health.BlockedSince, p.health.BlockReason = time.Time{}, ""
	}
	p.mu.Unlock()
	if b.Active {
		p.log.Warn("rabbitmq: the broker blocked publishing (a memory or disk alarm); paused", "reason", b.Reason)
	} else {
		p.log.Info("rabbitmq: the broker unblocked publishing")
	}
}

// declareStreams declares each of streams as a durable stream queue.
func declareStreams(ch *amqp.Channel, streams []string) error {
	for _, name := range streams {
		if _, err := ch.QueueDeclare(name, true, false, false, false, amqp.Table{"x-queue-type": "stream"}); err != nil {
			var aerr *amqp.Error
			if errors.As(err, &aerr) && aerr.Code == amqp.PreconditionFailed {
				return &StreamError{Stream: name, Err: aerr}
			}
			return fmt.Errorf("declare stream %s: %w", name, err)
		}
	}
	return nil
}
