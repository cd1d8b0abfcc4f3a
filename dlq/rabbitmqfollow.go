package dlq

import (
	"context"
	"errors"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/cdc-relay/cdc-relay/internal/backoff"
	"github.com/cdc-relay/cdc-relay/rabbitmq"
)

// dlq redrive --follow with RabbitMQ rides through a lost connection (a
// broker restart, a node failover, a network blip): it reconnects with
// backoff, reads the positions stream again and reads on from the letter
// after the last one it handled. A letter whose position was written
// before the loss is skipped; one published but not confirmed, or
// confirmed without its position written, is sent again: at least once,
// and consumers dedupe by message_id. Without --follow a lost connection
// ends the redrive incomplete (exit 1), and running it again carries on.

// Reconnect delays of redrive --follow.
const (
	followMinBackoff = 100 * time.Millisecond
	followMaxBackoff = 5 * time.Second
)

// readError is the read of the dead-letter stream failing, as opposed to
// the sending of the letters.
type readError struct{ err error }

func (e *readError) Error() string { return e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

// follow runs loop; with --follow, after the connection or the stream's
// consumer was lost, it reconnects and runs it again from r.next, until
// ctx ends.
func (r *rabbitRedriver) follow(ctx context.Context) error {
	r.b = backoff.Backoff{Min: followMinBackoff, Max: followMaxBackoff}
	for again := false; ; again = true {
		start, next := time.Now(), r.next
		err := r.loop(ctx)
		if err == nil || !r.o.Filters.Follow || ctx.Err() != nil || !r.lost(err, again) {
			return err
		}
		if r.next > next || time.Since(start) > followMaxBackoff {
			r.b.Reset() // it read on after the last reconnect
		}
		cause := err // the connection's own error names the cause better
		select {
		case cerr := <-r.q.closed:
			if cerr != nil {
				cause = cerr
			}
		default:
		}
		msg := "dlq redrive: lost the connection to RabbitMQ; reconnecting, then reading on after the last letter handled"
		if errors.Is(err, rabbitmq.ErrStalled) {
			msg, cause = "dlq redrive: the broker stopped giving the dead-letter stream's messages; reconnecting, then reading on after the last letter handled", err
		}
		r.o.Log.Warn(msg, "err", cause.Error(), "failed", err.Error(), "dlq_stream", r.cfg.Stream, "next_offset", r.next, "unconfirmed", len(r.batch))
		if err := r.reconnect(ctx); err != nil {
			if n := len(r.batch); n > 0 {
				return fmt.Errorf("the connection to RabbitMQ was lost, and %d letters were not confirmed: they stay pending, and the next redrive sends them", n)
			}
			return nil // stopped while reconnecting: nothing was left unsent
		}
	}
}

// lost reports whether err comes from a lost connection or a lost
// consumer of the stream (ended with no error from the broker: the
// consumer can end before the connection's close arrives), which a
// reconnect can help; after a reconnect, also a read of the stream that
// the broker refused (still starting). Never a stream that is missing or
// is not one, nor sending that failed.
func (r *rabbitRedriver) lost(err error, again bool) bool {
	if r.q.conn.IsClosed() {
		return true
	}
	var rerr *readError
	if !errors.As(err, &rerr) || errors.Is(err, rabbitmq.ErrNoQueue) || errors.Is(err, rabbitmq.ErrNotStream) {
		return false
	}
	var aerr *amqp.Error
	return again || !errors.As(err, &aerr)
}

// reconnect connects again with backoff until it succeeds or ctx ends
// (its error then): a new connection, the positions read again and a new
// confirm channel. The letters of the batch that now have a position
// were redriven before the loss: they are reported skipped, not sent
// again.
func (r *rabbitRedriver) reconnect(ctx context.Context) error {
	r.q.close()
	for {
		if err := r.b.Wait(ctx); err != nil {
			return err
		}
		err := r.q.connect(ctx)
		if err == nil && !r.o.Filters.DryRun {
			var c *rabbitmq.Confirmer
			if c, err = rabbitmq.NewConfirmer(r.q.conn); err == nil {
				r.c.Close() // its channel went with the connection
				r.c = c
			} else {
				err = fmt.Errorf("open a channel: %w", err)
			}
		}
		if err == nil {
			break
		}
		r.q.close()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r.o.Log.Warn("dlq redrive: cannot reconnect to RabbitMQ; retrying", "err", err.Error(), "attempt", r.b.Attempts())
	}
	batch := r.batch[:0]
	for _, o := range r.batch {
		if o.rl.done = r.q.positionOf(o.rl); o.rl.done != nil {
			r.skipDone(o.rl)
			continue
		}
		batch = append(batch, o)
	}
	r.batch = batch
	r.o.Log.Info("dlq redrive: connected to RabbitMQ again; reading on", "dlq_stream", r.cfg.Stream, "next_offset", r.next, "to_send_again", len(r.batch))
	return nil
}
