package tail

import (
	"context"
	"errors"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/cdc-relay/cdc-relay/internal/backoff"
	"github.com/cdc-relay/cdc-relay/rabbitmq"
	"github.com/cdc-relay/cdc-relay/relay"
)

// A following tail of RabbitMQ (an exchange, or a stream with --follow)
// rides through a lost connection (a broker restart, a node failover, a
// network blip): it reconnects with backoff. A stream is read on after
// the last offset printed (with nothing printed yet, from where the read
// began: for a read from the end, the time it began, to the second, as
// AMQP keeps time; a chunk of the stream written in that second may be
// printed). An exchange is
// followed through a new temporary queue: the old one was exclusive and
// went with the connection, so what was published in between is not
// shown (tail is a viewer, not a consumer). A read to the stream's end
// (no --follow) ends with the error, as before.

// Reconnect delays of a following tail.
const (
	tailMinBackoff = 100 * time.Millisecond
	tailMaxBackoff = 5 * time.Second
)

// errConsumerEnded is the broker ending tail's consumer on the exchange's
// queue: the channel or the connection closed, or the queue was deleted.
var errConsumerEnded = errors.New("the broker closed tail's consumer (the channel or the connection closed)")

// run reads or follows until ctx ends, Count lines were printed, a read
// to the end ends, or an error that a reconnect cannot help.
func (t *rabbitTail) run(ctx context.Context) error {
	following := t.cfg.Exchange != "" || t.cfg.Follow
	b := backoff.Backoff{Min: tailMinBackoff, Max: tailMaxBackoff}
	for again := false; ; again = true {
		start, printed := time.Now(), t.printed
		err := t.once(ctx, again)
		if err == nil || !following || ctx.Err() != nil || !t.lost(err, again) {
			return err
		}
		if t.printed > printed || time.Since(start) > tailMaxBackoff {
			b.Reset() // it read on after the last reconnect
		}
		failed := err.Error()
		select {
		case cerr := <-t.closed: // the connection's own error names the cause better
			if cerr != nil {
				err = cerr
			}
		default:
		}
		switch {
		case errors.Is(err, rabbitmq.ErrStalled):
			t.log.Warn("tail: the broker stopped giving tail the stream's messages; reconnecting, then reading on after the last offset printed",
				"err", err.Error(), "stream", t.cfg.Stream, "next_offset", t.next, "printed", t.printed)
		case t.cfg.Stream != "":
			t.log.Warn("tail: lost the connection to RabbitMQ; reconnecting, then reading on after the last offset printed",
				"err", err.Error(), "failed", failed, "stream", t.cfg.Stream, "next_offset", t.next, "printed", t.printed)
		default:
			t.log.Warn("tail: lost the connection to RabbitMQ; reconnecting with a new queue: the events published to the exchange until then are not shown (tail's queue was exclusive and went with the connection; tail is a viewer, not a consumer)",
				"err", err.Error(), "failed", failed, "exchange", t.cfg.Exchange)
		}
		if t.reconnect(ctx, &b) != nil {
			return nil // interrupted: what was printed stands
		}
	}
}

// lost reports whether err comes from a lost connection or consumer
// (a stream's ends with no error from the broker; either can end before
// the connection's close arrives), which a reconnect can help: not a
// setting to fix, nor printing that failed. After a reconnect, a read or
// a queue that cannot be set up yet (the broker still starting) is lost
// too.
func (t *rabbitTail) lost(err error, again bool) bool {
	var cerr *relay.ConfigError
	var aerr *amqp.Error
	switch {
	case t.emitErr != nil || errors.As(err, &cerr):
		return false
	case t.conn.IsClosed() || errors.Is(err, errConsumerEnded):
		return true
	case t.cfg.Stream != "" && !errors.As(err, &aerr):
		return true
	}
	return again
}

// use makes conn tail's connection.
func (t *rabbitTail) use(conn *amqp.Connection) {
	t.conn, t.closed = conn, conn.NotifyClose(make(chan *amqp.Error, 1))
}

// reconnect connects again with backoff until it succeeds or ctx ends
// (its error then).
func (t *rabbitTail) reconnect(ctx context.Context, b *backoff.Backoff) error {
	t.conn.Close()
	for {
		if err := b.Wait(ctx); err != nil {
			return err
		}
		conn, err := rabbitmq.Dial(t.cfg.URL, t.cfg.TLS, "cdc-relay tail")
		if err == nil {
			t.use(conn)
			t.log.Info("tail: connected to RabbitMQ again")
			return nil
		}
		t.log.Warn("tail: cannot reconnect to RabbitMQ; retrying", "err", fmt.Errorf("connect to RabbitMQ: %w", err).Error(), "attempt", b.Attempts())
	}
}
