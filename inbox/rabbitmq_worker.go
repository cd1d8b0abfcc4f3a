package inbox

import (
	"context"
)

// rworker is one worker of a session: it processes the deliveries of the
// aggregates hashed to it, in the order received, and retries a failed
// one in place: the delivery is kept (unacknowledged) and tried again
// after a backoff, up to DeliveryLimit+1 attempts counting its earlier
// deliveries (x-delivery-count), while the aggregate's later events wait
// behind it in the worker's queue.
//
// A failed delivery is never given back to the broker while it may still
// succeed, because a quorum queue cannot keep an aggregate's order across
// a give-back and a crash: it delivers a message given back (basic.reject
// or basic.nack with requeue) again at once, under a new delivery tag,
// after the later events already delivered; and when a consumer dies it
// puts back what the consumer held in delivery-tag order. A consumer
// killed while it held a later event of the aggregate under a lower tag
// (a moment no client can avoid: the later event may be on its way) hands
// the later event to the next consumer first. Kept in place, every held
// delivery keeps its first tag, and the broker puts them back in the
// order it delivered them, which is the queue's.
type rworker[T any] struct {
	r *RabbitMQConsumer[T]
	// doomed holds the ids of deliveries that failed their last attempt:
	// they are rejected with requeue, without running the handler, until
	// the broker dead-letters them at the delivery limit.
	doomed map[string]bool
}

func (w *rworker[T]) run(ctx context.Context, q <-chan rjob) {
	for j := range q {
		batch := []rjob{j}
	fill:
		for len(batch) < w.r.core.cfg.BatchSize {
			select {
			case j, ok := <-q:
				if !ok {
					break fill
				}
				batch = append(batch, j)
			default:
				break fill
			}
		}
		if ctx.Err() != nil {
			continue // the channel is gone: the broker delivers them again
		}
		w.work(ctx, batch)
	}
}

// work processes a batch: in one transaction when it holds more than one
// event, else (or when that fails) one by one, each retried in place.
func (w *rworker[T]) work(ctx context.Context, batch []rjob) {
	r := w.r
	evs := make([]*Event[T], 0, len(batch))
	jobs := make([]rjob, 0, len(batch))
	for _, j := range batch {
		if w.doomed[j.id] {
			w.burn(j)
			continue
		}
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
	limit := r.cfg.DeliveryLimit + 1
	for i, ev := range evs {
		j := jobs[i]
		first := int(deliveryCount(&j.d)) + 1
		_, err := r.core.retryFrom(ctx, ev, first, max(first, limit))
		switch {
		case err == nil:
			w.ack(j)
		case ctx.Err() != nil:
			return
		default:
			w.giveUp(j, ev, err)
		}
	}
}

// ack acknowledges a delivery whose transaction committed (or that was a
// duplicate). An ack that cannot reach the broker (the channel closed) is
// no loss: the delivery comes again and is a duplicate.
func (w *rworker[T]) ack(j rjob) {
	if err := j.d.Ack(false); err != nil {
		w.r.log.Debug("rabbitmq: ack failed; the event will come again as a duplicate", "id", j.id, "error", err)
	}
}

// giveUp hands a delivery that failed its last attempt to the broker's
// delivery limit: the broker dead-letters it (x-first-death-reason
// delivery_limit) once it has been given back DeliveryLimit+1 times in
// all, so it is given back, with basic.reject, as often as that takes
// (see burn). The aggregate's later events go ahead of it.
func (w *rworker[T]) giveUp(j rjob, ev *Event[T], failure error) {
	r := w.r
	r.core.deadLettered.Add(1)
	r.log.Error("handler failed at the event's last attempt; the broker dead-letters it", "id", ev.ID, "event_type", ev.Type,
		"attempt", ev.Attempt, "delivery_limit", r.cfg.DeliveryLimit, "dead_letter_exchange", r.cfg.DeadLetterExchange, "error", failure)
	w.doomed[j.id] = true
	w.burn(j)
}

// burn gives a doomed delivery back with basic.reject, which the broker
// counts (on every RabbitMQ version) and, past the queue's delivery
// limit, dead-letters. A delivery that comes with more than DeliveryLimit
// earlier deliveries sits in a queue with a higher limit or none (a
// Passive queue): it is rejected without requeue, which dead-letters it
// too.
func (w *rworker[T]) burn(j rjob) {
	count := deliveryCount(&j.d)
	requeue := count <= int64(w.r.cfg.DeliveryLimit)
	if count >= int64(w.r.cfg.DeliveryLimit) {
		delete(w.doomed, j.id) // this reject is its last
	}
	if err := j.d.Reject(requeue); err != nil {
		w.r.log.Debug("rabbitmq: reject failed; the channel is gone and the broker delivers the event again", "id", j.id, "error", err)
	}
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
