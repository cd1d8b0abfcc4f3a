package inbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/internal/backoff"
)

// transientWarnAfter is how long one event's transient retries are logged
// at INFO before they are logged at WARN.
const transientWarnAfter = time.Minute

// work processes a worker's batch of records until each is done (applied,
// skipped as a duplicate, or dead-lettered), calling done for each; it
// stops early only when ctx ends.
func (c *Consumer[T]) work(ctx context.Context, dlq *kgo.Client, batch []job, done func(job)) {
	evs := make([]*Event[T], 0, len(batch))
	jobs := make([]job, 0, len(batch))
	for _, j := range batch {
		ev, ok := c.prepare(ctx, dlq, j.rec, true)
		if ctx.Err() != nil {
			return
		}
		if !ok { // dead-lettered: done
			done(j)
			continue
		}
		evs, jobs = append(evs, ev), append(jobs, j)
	}
	if len(evs) > 1 {
		if err := c.processBatch(ctx, evs); err == nil {
			for _, j := range jobs {
				done(j)
			}
			return
		} else if ctx.Err() != nil {
			return
		} else {
			c.log.Info("batch failed; retrying its events one by one", "events", len(evs), "error", err)
		}
	}
	for i, ev := range evs {
		if !c.handle(ctx, dlq, ev, jobs[i].rec) {
			return
		}
		done(jobs[i])
	}
}

// event builds the handler's view of a record, without its value.
func (c *Consumer[T]) event(m *kgo.Record) *Event[T] {
	ev := &Event[T]{Topic: m.Topic, Partition: int(m.Partition), Offset: m.Offset, Key: m.Key, AggregateID: string(m.Key),
		Headers: make(map[string]string, len(m.Headers))}
	for _, h := range m.Headers {
		ev.Headers[h.Key] = string(h.Value)
	}
	ev.ID, ev.Type, ev.AggregateType = ev.Headers["id"], ev.Headers["event_type"], ev.Headers["aggregate_type"]
	return ev
}

// prepare builds the event of m and decodes its key and value. A record
// that can never be processed goes to the dead-letter topic (if toDLQ) and
// prepare returns false; a registry outage is waited out, never
// dead-lettered.
func (c *Consumer[T]) prepare(ctx context.Context, dlq *kgo.Client, m *kgo.Record, toDLQ bool) (*Event[T], bool) {
	ev := c.event(m)
	reject := func(reason string) (*Event[T], bool) {
		if toDLQ {
			c.deadLetter(ctx, dlq, ev, m, reason, 0)
		} else {
			ev.rejected = reason
		}
		return ev, false
	}
	if ev.ID == "" {
		return reject(ReasonNoID + ": the record has no id header to deduplicate on")
	}
	if m.Key != nil {
		id, err := decodeKey(c.cfg.KeyFormat, m.Key)
		if err != nil {
			return reject(ReasonBadKey + ": " + err.Error())
		}
		ev.AggregateID = id
	}
	if m.Value == nil {
		ev.Null = true
		return ev, true
	}
	b := backoff.Backoff{Min: c.cfg.RetryMin, Max: c.cfg.RetryMax}
	for {
		id, err := decode(ctx, c.schemas, m.Value, &ev.Value)
		if err == nil {
			ev.SchemaID = int(id)
			return ev, true
		}
		var de *decodeError
		if errors.As(err, &de) {
			return reject(err.Error())
		}
		c.log.Warn("schema registry unavailable; retrying", "error", err, "consecutive_errors", b.Attempts()+1)
		if b.Wait(ctx) != nil {
			return ev, false
		}
	}
}

// handle processes one event until it is done: applied, skipped as a
// duplicate, or dead-lettered. It returns false only when ctx ended first.
func (c *Consumer[T]) handle(ctx context.Context, dlq *kgo.Client, ev *Event[T], m *kgo.Record) bool {
	_, err := c.retry(ctx, ev)
	switch {
	case err == nil:
		return true
	case ctx.Err() != nil:
		return false
	}
	return c.deadLetter(ctx, dlq, ev, m, ReasonHandler+": "+err.Error(), ev.Attempt)
}

// retry runs attempts of ev until one succeeds (nil; dup if its mark was
// there), MaxAttempts counted failures happened (the last error), or ctx
// ends (ctx's error).
// Transient failures and outages are retried with backoff without counting;
// transient ones only for TransientTimeout from the first of them.
func (c *Consumer[T]) retry(ctx context.Context, ev *Event[T]) (dup bool, _ error) {
	return c.retryFrom(ctx, ev, 1, c.cfg.MaxAttempts)
}

// retryFrom is retry with the attempts numbered from first (earlier ones
// happened elsewhere: RabbitMQ's earlier deliveries) up to maxAttempts.
func (c *Consumer[T]) retryFrom(ctx context.Context, ev *Event[T], first, maxAttempts int) (dup bool, _ error) {
	b := backoff.Backoff{Min: c.cfg.RetryMin, Max: c.cfg.RetryMax}
	var waitingSince time.Time // the first transient failure of this event
	for attempt := first; ; attempt++ {
		ev.Attempt = attempt
		dup, herr, err := c.process(ctx, ev)
		if err == nil && herr == nil {
			if dup {
				c.duplicates.Add(1)
				if c.cfg.OnDuplicate != nil {
					c.cfg.OnDuplicate(ev)
				}
			} else {
				c.processed.Add(1)
			}
			return dup, nil
		}
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		failure, class := herr, classCounted
		if herr != nil {
			class = classify(herr, false)
		} else {
			failure, class = err, classify(err, true)
		}
		if class == classTransient {
			if waitingSince.IsZero() {
				waitingSince = time.Now()
			}
			if time.Since(waitingSince) >= c.cfg.TransientTimeout {
				class = classCounted // held too long: from now on it counts
			}
		}
		waited := time.Duration(0)
		if !waitingSince.IsZero() {
			waited = time.Since(waitingSince)
		}
		switch {
		case class == classCounted && attempt >= maxAttempts:
			return false, failure
		case class == classCounted:
			c.log.Warn("handler failed; retrying", "id", ev.ID, "event_type", ev.Type, "attempt", attempt, "max_attempts", maxAttempts, "error", failure)
		default:
			attempt--
			c.transientRetries.Add(1)
			level := slogInfo
			if waited >= transientWarnAfter || class == classOutage && b.Attempts() >= 10 {
				level = slogWarn
			}
			what := "transient error; retrying without counting an attempt"
			if class == classOutage {
				what = "database unreachable; retrying"
			}
			c.log.Log(ctx, level, what, "id", ev.ID, "event_type", ev.Type, "error", failure,
				"consecutive_errors", b.Attempts()+1, "waiting", waited.Round(time.Millisecond))
		}
		c.retries.Add(1)
		if b.Wait(ctx) != nil {
			return false, ctx.Err()
		}
	}
}

// process runs one attempt of one event: mark, handler, commit. dup reports
// a mark that was already there; handlerErr is the handler's failure, err
// the database's.
func (c *Consumer[T]) process(ctx context.Context, ev *Event[T]) (dup bool, handlerErr, err error) {
	ctx, cancel := c.attemptContext(ctx)
	defer cancel()
	tx, err := c.begin(ctx)
	if err != nil {
		return false, nil, fmt.Errorf("begin: %w", err)
	}
	defer tx.rollback(ctx)
	fresh, err := tx.mark(ctx, []string{ev.ID})
	if err != nil {
		return false, nil, fmt.Errorf("insert mark: %w", err)
	}
	if !fresh[ev.ID] {
		// Processed before (or by a concurrent delivery that committed
		// first: the INSERT waited for it). Nothing to apply.
		return true, nil, nil
	}
	if herr := c.callHandler(ctx, tx, ev); herr != nil {
		return false, herr, nil
	}
	if err := tx.commit(ctx); err != nil {
		return false, nil, fmt.Errorf("commit: %w", err)
	}
	return false, nil, nil
}

// processBatch runs evs in one transaction: every mark in one statement,
// then the handler of each event whose mark is new, in order, then the
// commit. Any failure rolls back the whole batch and is returned.
func (c *Consumer[T]) processBatch(ctx context.Context, evs []*Event[T]) error {
	ctx, cancel := c.attemptContext(ctx)
	defer cancel()
	tx, err := c.begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.rollback(ctx)
	ids := make([]string, 0, len(evs))
	seen := make(map[string]bool, len(evs))
	for _, ev := range evs {
		if !seen[ev.ID] {
			seen[ev.ID] = true
			ids = append(ids, ev.ID)
		}
	}
	fresh, err := tx.mark(ctx, ids)
	if err != nil {
		return fmt.Errorf("insert marks: %w", err)
	}
	dups := make([]bool, len(evs))
	for i, ev := range evs {
		if !fresh[ev.ID] {
			dups[i] = true
			continue
		}
		delete(fresh, ev.ID) // a second record with this id in the batch is a duplicate
		// At least 1: RabbitMQ's prepare counts the earlier deliveries.
		ev.Attempt = max(ev.Attempt, 1)
		if err := c.callHandler(ctx, tx, ev); err != nil {
			return fmt.Errorf("event %s: %w", ev.ID, err)
		}
	}
	if err := tx.commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	c.batches.Add(1)
	for i, ev := range evs {
		if dups[i] {
			c.duplicates.Add(1)
			if c.cfg.OnDuplicate != nil {
				c.cfg.OnDuplicate(ev)
			}
		} else {
			c.processed.Add(1)
		}
	}
	return nil
}

// attemptContext bounds one attempt's transaction by attemptTimeout, when
// set.
func (c *Consumer[T]) attemptContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.attemptTimeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, c.attemptTimeout)
}

// callHandler runs the handler, turning a panic into an error.
func (c *Consumer[T]) callHandler(ctx context.Context, tx txn[T], ev *Event[T]) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panicked: %v", r)
		}
	}()
	return tx.handle(ctx, ev)
}

const (
	slogInfo = slog.LevelInfo
	slogWarn = slog.LevelWarn
)
