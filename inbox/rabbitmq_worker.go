package inbox

import (
	"context"
	"time"
)

// blockTimeout is how long a worker keeps an aggregate's later events
// waiting for the delivery it gave back. That delivery normally comes back
// at once (a quorum queue with a delivery limit delivers returned
// messages first); if it does not, order gives way to progress.
const blockTimeout = 30 * time.Second

// block holds an aggregate whose event failed and was given back: its
// later events wait (parked, unacknowledged) until that delivery comes
// back and succeeds, so that the aggregate's events are applied in order.
type block struct {
	id     string // the delivery awaited
	since  time.Time
	parked []rjob
}

// rworker is one worker of a session: it processes the deliveries of the
// aggregates hashed to it, in the order received.
type rworker[T any] struct {
	r       *RabbitMQConsumer[T]
	blocked map[string]*block
}

func (w *rworker[T]) run(ctx context.Context, q <-chan rjob) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	batch := make([]rjob, 0, w.r.core.cfg.BatchSize)
	for {
		var j rjob
		select {
		case next, ok := <-q:
			if !ok {
				return // what is parked is given back when the channel closes
			}
			j = next
		case <-tick.C:
			w.expire(ctx)
			continue
		}
		batch = w.admit(batch[:0], j)
	more:
		for len(batch) < w.r.core.cfg.BatchSize {
			select {
			case next, ok := <-q:
				if !ok {
					break more
				}
				batch = w.admit(batch, next)
			default:
				break more
			}
		}
		if ctx.Err() != nil || len(batch) == 0 {
			continue // the channel is gone: the broker delivers them again
		}
		w.work(ctx, batch)
	}
}

// admit appends j to batch, unless its aggregate waits for an earlier
// event given back: then j is parked behind it.
func (w *rworker[T]) admit(batch []rjob, j rjob) []rjob {
	if b := w.blocked[j.agg]; b != nil && b.id != j.id {
		b.parked = append(b.parked, j)
		return batch
	}
	return append(batch, j)
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
				w.ack(ctx, j)
			}
			return
		}
		if ctx.Err() != nil {
			return
		}
		r.log.Info("batch failed; retrying its events one by one", "events", len(evs), "error", err)
	}
	for i, ev := range evs {
		if b := w.blocked[jobs[i].agg]; b != nil && b.id != jobs[i].id {
			b.parked = append(b.parked, jobs[i]) // an earlier event of its aggregate failed
			continue
		}
		w.one(ctx, jobs[i], ev)
		if ctx.Err() != nil {
			return
		}
	}
}

// one processes one prepared event: its transient failures are retried in
// place; a counted failure gives the delivery back.
func (w *rworker[T]) one(ctx context.Context, j rjob, ev *Event[T]) {
	_, err := w.r.core.retry(ctx, ev)
	switch {
	case err == nil:
		w.ack(ctx, j)
	case ctx.Err() == nil:
		w.giveBack(ctx, j, ev, err)
	}
}

// ack acknowledges a delivery whose transaction committed (or that was a
// duplicate), and lets its aggregate's parked events run if it was the
// one they waited for. An ack that cannot reach the broker (the channel
// closed) is no loss: the delivery comes again and is a duplicate.
func (w *rworker[T]) ack(ctx context.Context, j rjob) {
	if err := j.d.Ack(false); err != nil {
		w.r.log.Debug("rabbitmq: ack failed; the event will come again as a duplicate", "id", j.id, "error", err)
	}
	if b := w.blocked[j.agg]; b != nil && b.id == j.id {
		w.release(ctx, j.agg)
	}
}

// giveBack rejects a failed delivery with requeue after a backoff that
// grows with its delivery count, so that the broker counts the failure
// against the queue's delivery limit: basic.reject counts on every
// RabbitMQ version (basic.nack stopped counting in 4.3). At the limit the
// broker dead-letters it. Otherwise the aggregate's later events wait for
// it (with single active consumer).
func (w *rworker[T]) giveBack(ctx context.Context, j rjob, ev *Event[T], failure error) {
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
			return
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
			w.release(ctx, j.agg)
		}
		return
	}
	r.log.Warn("handler failed; the delivery is given back", "id", ev.ID, "event_type", ev.Type,
		"delivery", count+1, "delivery_limit", r.cfg.DeliveryLimit, "error", failure)
	if r.cfg.Competing {
		return // several consumers: no order to keep
	}
	b := w.blocked[j.agg]
	if b == nil {
		b = &block{}
		w.blocked[j.agg] = b
	}
	b.id, b.since = j.id, time.Now()
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

// release lifts an aggregate's block and runs its parked events in order,
// until one of them fails and blocks it again.
func (w *rworker[T]) release(ctx context.Context, agg string) {
	b := w.blocked[agg]
	delete(w.blocked, agg)
	if b == nil {
		return
	}
	for i, p := range b.parked {
		if nb := w.blocked[agg]; nb != nil {
			nb.parked = append(nb.parked, b.parked[i:]...)
			return
		}
		if ctx.Err() != nil {
			return
		}
		w.work(ctx, []rjob{p})
	}
}

// expire releases the aggregates whose given-back delivery did not come
// back within blockTimeout (another consumer took it, or the broker
// dead-lettered it under a lower limit than DeliveryLimit says).
func (w *rworker[T]) expire(ctx context.Context) {
	for agg, b := range w.blocked {
		if time.Since(b.since) < blockTimeout {
			continue
		}
		w.r.log.Warn("a delivery given back did not come back; its aggregate's later events go ahead of it", "id", b.id, "parked", len(b.parked))
		w.release(ctx, agg)
	}
}
