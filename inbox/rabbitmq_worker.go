package inbox

import (
	"context"
	"time"
)

// blockTimeout is how long a worker waits for a delivery it gave back
// before its aggregate's later events may go ahead of it. That delivery
// normally comes back at once (a quorum queue with a delivery limit
// delivers returned messages first); if it does not, order gives way to
// progress.
const blockTimeout = 30 * time.Second

// block holds an aggregate whose event failed and was given back, so that
// the aggregate's events are still applied in order. The broker delivers
// messages given back (basic.reject, basic.nack) before the others, in the
// order given back, and puts back what a closed channel held in the order
// it was delivered. So that every later event of the aggregate stays
// behind the failed one on the broker's side too (the consumer may die at
// any moment):
//   - right after the failed delivery is rejected, the aggregate's later
//     events the worker holds are given back behind it, with basic.nack;
//   - while it is away, a later event that arrives (it was on its way) is
//     given back behind it too;
//   - once it is back (in hand) and has succeeded, the events given back
//     behind it are applied as they come back, in order, while any other
//     event of the aggregate (a later one, delivered meanwhile) waits,
//     parked and unacknowledged, until they are all back;
//   - when one of them fails, it is given back the same way, and what is
//     parked goes behind it.
type block struct {
	id     string // the delivery given back and awaited; "" once it succeeded
	inHand bool   // it came back and is being processed
	since  time.Time
	parked []rjob
	// behind are the events given back behind it, not yet back.
	behind map[string]bool
}

// rworker is one worker of a session: it processes the deliveries of the
// aggregates hashed to it, in the order received.
type rworker[T any] struct {
	r       *RabbitMQConsumer[T]
	q       <-chan rjob
	pending []rjob // received from q, not yet processed, in order
	blocked map[string]*block
}

func (w *rworker[T]) run(ctx context.Context, q <-chan rjob) {
	w.q = q
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		if len(w.pending) == 0 {
			select {
			case j, ok := <-q:
				if !ok {
					return // what is parked is given back when the channel closes
				}
				w.pending = append(w.pending, j)
			case <-tick.C:
				w.expire()
				continue
			}
		}
		if ctx.Err() != nil {
			w.pending = w.pending[:0] // the channel is gone: the broker delivers them again
			continue
		}
		w.fill()
		batch := make([]rjob, 0, w.r.core.cfg.BatchSize)
		for len(batch) < w.r.core.cfg.BatchSize && len(w.pending) > 0 {
			j := w.pending[0]
			w.pending = w.pending[1:]
			if !w.hold(j) {
				batch = append(batch, j)
			}
		}
		if len(batch) > 0 {
			w.work(ctx, batch)
		}
	}
}

// fill moves what q holds now into pending.
func (w *rworker[T]) fill() {
	for {
		select {
		case j, ok := <-w.q:
			if !ok {
				return
			}
			w.pending = append(w.pending, j)
		default:
			return
		}
	}
}

// hold reports whether j waits for an earlier event of its aggregate that
// failed: it is then parked or given back behind it (see block).
func (w *rworker[T]) hold(j rjob) bool {
	b := w.blocked[j.agg]
	switch {
	case b == nil:
		return false
	case b.id != "" && !b.inHand && j.id == b.id:
		b.inHand = true // it is back
		return false
	case b.behind[j.id] && (j.d.Redelivered || b.id == ""):
		if b.id != "" && !b.inHand {
			// Given back behind the failed event, it came back first: the
			// failed one is not coming (dead-lettered under a lower limit
			// than DeliveryLimit). Only a redelivery says so: a copy
			// published again (a duplicate) may come first.
			w.r.log.Warn("a delivery given back did not come back before the events behind it; they go ahead of it", "id", b.id)
			b.id = ""
		}
		if b.id == "" {
			delete(b.behind, j.id) // the next earlier event: it runs
			return false
		}
	case b.id != "" && !b.inHand:
		w.requeue(b, j) // it was on its way while the failed one is away
		return true
	}
	b.parked = append(b.parked, j) // a later event
	return true
}

// requeue gives j back behind its aggregate's failed event, with
// basic.nack: not a failure of j's (from RabbitMQ 4.3 it does not count
// toward j's delivery limit; before, every return counts).
func (w *rworker[T]) requeue(b *block, j rjob) {
	if err := j.d.Nack(false, true); err != nil {
		w.r.log.Debug("rabbitmq: nack failed; the channel is gone and the broker delivers the event again", "id", j.id, "error", err)
	}
	b.behind[j.id] = true
}

// work processes a batch: in one transaction when it holds more than one
// event, else (or when that fails) one by one.
func (w *rworker[T]) work(ctx context.Context, batch []rjob) {
	r := w.r
	evs := make([]*Event[T], 0, len(batch))
	jobs := make([]rjob, 0, len(batch))
	for _, j := range batch {
		ev, reason := r.prepare(ctx, &j.d)
		if ctx.Err() != nil {
			return
		}
		if reason != "" {
			w.reject(j, ev, reason)
			continue
		}
		evs, jobs = append(evs, ev), append(jobs, j)
	}
	if len(evs) > 1 {
		err := r.core.processBatch(ctx, evs)
		if err == nil {
			for _, j := range jobs {
				w.ack(j)
			}
			return
		}
		if ctx.Err() != nil {
			return
		}
		r.log.Info("batch failed; retrying its events one by one", "events", len(evs), "error", err)
	}
	for i, ev := range evs {
		j := jobs[i]
		_, err := r.core.retry(ctx, ev)
		switch {
		case err == nil:
			w.ack(j)
		case ctx.Err() != nil:
			return
		case w.giveBack(ctx, j, ev, err):
			// The rest of the batch goes first again, and the aggregate's
			// later events are given back behind the failed one now.
			w.pending = append(append([]rjob(nil), jobs[i+1:]...), w.pending...)
			w.fill()
			w.requeuePending(j.agg)
			return
		}
	}
}

// requeuePending gives back, in order, the pending events of a blocked
// aggregate.
func (w *rworker[T]) requeuePending(agg string) {
	b := w.blocked[agg]
	if b == nil {
		return
	}
	kept := w.pending[:0]
	for _, j := range w.pending {
		if j.agg == agg {
			w.requeue(b, j)
		} else {
			kept = append(kept, j)
		}
	}
	w.pending = kept
}

// ack acknowledges a delivery whose transaction committed (or that was a
// duplicate), and lets its aggregate's parked events run if it was the
// one they waited for. An ack that cannot reach the broker (the channel
// closed) is no loss: the delivery comes again and is a duplicate.
func (w *rworker[T]) ack(j rjob) {
	if err := j.d.Ack(false); err != nil {
		w.r.log.Debug("rabbitmq: ack failed; the event will come again as a duplicate", "id", j.id, "error", err)
	}
	if b := w.blocked[j.agg]; b != nil {
		if b.id == j.id {
			b.id, b.inHand, b.since = "", false, time.Now()
		}
		w.settle(j.agg)
	}
}

// settle releases an aggregate whose failed event succeeded (or was
// dead-lettered) once every event given back behind it is back.
func (w *rworker[T]) settle(agg string) {
	if b := w.blocked[agg]; b != nil && b.id == "" && len(b.behind) == 0 {
		w.release(agg)
	}
}

// giveBack rejects a failed delivery with requeue after a backoff that
// grows with its delivery count, so that the broker counts the failure
// against the queue's delivery limit: basic.reject counts on every
// RabbitMQ version (basic.nack stopped counting in 4.3). At the limit the
// broker dead-letters it. Otherwise, with single active consumer, its
// aggregate is blocked behind it, and giveBack reports true.
func (w *rworker[T]) giveBack(ctx context.Context, j rjob, ev *Event[T], failure error) bool {
	r := w.r
	count := deliveryCount(&j.d)
	last := count >= int64(r.cfg.DeliveryLimit)
	if !last {
		d := r.core.cfg.RetryMin
		for i := int64(0); i < count && d < r.core.cfg.RetryMax; i++ {
			d *= 2
		}
		t := time.NewTimer(min(d, r.core.cfg.RetryMax))
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
	if err := j.d.Reject(true); err != nil {
		r.log.Debug("rabbitmq: reject failed; the channel is gone and the broker delivers the event again", "id", j.id, "error", err)
	}
	r.core.retries.Add(1)
	if last {
		r.core.deadLettered.Add(1)
		r.log.Error("handler failed at the event's last delivery; the broker dead-letters it", "id", ev.ID, "event_type", ev.Type,
			"delivery", count+1, "delivery_limit", r.cfg.DeliveryLimit, "dead_letter_exchange", r.cfg.DeadLetterExchange, "error", failure)
		if b := w.blocked[j.agg]; b != nil && b.id == j.id {
			b.id, b.inHand, b.since = "", false, time.Now()
			w.settle(j.agg)
		}
		return false
	}
	r.log.Warn("handler failed; the delivery is given back", "id", ev.ID, "event_type", ev.Type,
		"delivery", count+1, "delivery_limit", r.cfg.DeliveryLimit, "error", failure)
	if r.cfg.Competing {
		return false // several consumers: no order to keep
	}
	b := w.blocked[j.agg]
	if b == nil {
		b = &block{}
		w.blocked[j.agg] = b
	}
	parked := b.parked
	b.id, b.inHand, b.since, b.parked, b.behind = j.id, false, time.Now(), nil, map[string]bool{}
	for _, p := range parked {
		w.requeue(b, p)
	}
	return true
}

// reject dead-letters a delivery that can never be processed: the broker
// routes it to the dead-letter exchange (at-least-once).
func (w *rworker[T]) reject(j rjob, ev *Event[T], reason string) {
	if len(reason) > maxReason {
		reason = reason[:maxReason] + "..."
	}
	if err := j.d.Reject(false); err != nil {
		w.r.log.Debug("rabbitmq: reject failed; the channel is gone and the broker delivers the event again", "id", j.id, "error", err)
		return
	}
	w.r.core.deadLettered.Add(1)
	w.r.log.Error("event sent to the dead-letter exchange", "dead_letter_exchange", w.r.cfg.DeadLetterExchange, "id", ev.ID,
		"event_type", ev.Type, "routing_key", j.d.RoutingKey, "reason", reason)
}

// release lifts an aggregate's block: its parked events go first among
// the pending ones, in order.
func (w *rworker[T]) release(agg string) {
	b := w.blocked[agg]
	delete(w.blocked, agg)
	if b != nil && len(b.parked) > 0 {
		w.pending = append(b.parked, w.pending...)
	}
}

// expire releases the aggregates whose given-back deliveries did not come
// back within blockTimeout (the broker dead-lettered one under a lower
// limit than DeliveryLimit says, or the queue lost it).
func (w *rworker[T]) expire() {
	for agg, b := range w.blocked {
		if b.inHand || time.Since(b.since) < blockTimeout {
			continue
		}
		w.r.log.Warn("a delivery given back did not come back; its aggregate's later events go ahead of it", "id", b.id, "behind", len(b.behind))
		w.release(agg)
	}
}
