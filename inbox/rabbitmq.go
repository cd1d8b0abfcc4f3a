package inbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/cdc-relay/cdc-relay/internal/backoff"
)

// drainTimeout bounds how long Run, once cancelled, lets the workers
// finish the deliveries they already hold before it cancels them.
const drainTimeout = 10 * time.Second

// RabbitMQConsumer reads a RabbitMQ quorum queue the relay's exchange
// feeds and applies each event exactly once per consumer name, with the
// Handler API of Consumer. Create it with NewRabbitMQ and run it with Run.
type RabbitMQConsumer[T any] struct {
	cfg  RabbitMQConfig[T]
	core *Consumer[T]
	log  *slog.Logger
}

// NewRabbitMQ checks cfg and returns a RabbitMQConsumer. A missing or
// invalid field is a *ConfigError naming it.
func NewRabbitMQ[T any](cfg RabbitMQConfig[T]) (*RabbitMQConsumer[T], error) {
	coreCfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	table, err := quoteTable(coreCfg.Table)
	if err != nil {
		return nil, err
	}
	log := coreCfg.Logger.With("consumer", cfg.Consumer, "queue", cfg.Queue)
	core := &Consumer[T]{cfg: coreCfg, log: log, attemptTimeout: cfg.HandlerTimeout}
	core.setTable(table)
	if cfg.RegistryURL != "" {
		if core.schemas, err = newSchemas(cfg.RegistryURL, log); err != nil {
			return nil, err
		}
	}
	return &RabbitMQConsumer[T]{cfg: cfg, core: core, log: log}, nil
}

// Stats returns the counters. DeadLettered counts the deliveries the
// consumer rejected for good: undecodable ones, and failed ones at their
// last attempt (the broker dead-letters them).
func (r *RabbitMQConsumer[T]) Stats() Stats { return r.core.Stats() }

// Cleanup deletes this consumer's old marks, as Consumer.Cleanup does.
func (r *RabbitMQConsumer[T]) Cleanup(ctx context.Context, olderThan time.Duration) (int64, error) {
	return r.core.Cleanup(ctx, olderThan)
}

// Run consumes until ctx is cancelled or a fault that reconnecting cannot
// fix (a *QueueArgumentsError, an *ExchangeTypeError, ErrQueueNotFound,
// an access refusal), and returns nil after a cancellation. A lost
// connection or channel is reconnected with backoff (amqp091-go's own
// recovery is not used) and the topology declared again; the deliveries
// held then come again from the broker. Each event is processed in one
// transaction (the mark, the handler unless the mark was already there,
// the commit) and acknowledged only after the commit. Once ctx is
// cancelled, consuming stops and the deliveries already held are finished
// for up to 10 s; the rest roll back and the broker delivers them again.
func (r *RabbitMQConsumer[T]) Run(ctx context.Context) error {
	var cleanupDone chan struct{}
	if r.core.cfg.Retention > 0 {
		cleanupDone = make(chan struct{})
		go func() {
			defer close(cleanupDone)
			r.core.cleanupLoop(ctx)
		}()
		defer func() { <-cleanupDone }()
	}
	b := backoff.Backoff{Min: r.core.cfg.RetryMin, Max: r.core.cfg.RetryMax}
	for {
		err := r.session(ctx, &b)
		if ctx.Err() != nil {
			return nil
		}
		var f fatal
		if errors.As(err, &f) {
			r.log.Error("rabbitmq: cannot consume", "error", f.err)
			return f.err
		}
		r.log.Warn("rabbitmq: connection lost; reconnecting", "error", err, "consecutive_errors", b.Attempts()+1)
		if b.Wait(ctx) != nil {
			return nil
		}
	}
}

// rjob is a delivery on its way through a worker.
type rjob struct {
	d   amqp.Delivery
	id  string // deliveryID
	agg string // aggregateKey
}

// session connects, declares, consumes until the connection or channel
// closes or ctx ends, and stops its workers before it returns.
func (r *RabbitMQConsumer[T]) session(ctx context.Context, b *backoff.Backoff) error {
	conn, err := amqp.DialConfig(r.cfg.URL, amqp.Config{
		Heartbeat:       10 * time.Second,
		TLSClientConfig: r.cfg.TLS,
		Locale:          "en_US",
		Properties:      amqp.Table{"connection_name": "inbox " + r.cfg.Consumer, "product": "cdc-relay inbox"},
	})
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close()
	if err := r.declare(conn); err != nil {
		return err
	}
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("open channel: %w", err)
	}
	if err := ch.Qos(r.cfg.Prefetch, 0, false); err != nil {
		return fmt.Errorf("set prefetch: %w", err)
	}
	tag := r.cfg.Consumer + "-" + randomHex()
	deliveries, err := ch.Consume(r.cfg.Queue, tag, false, false, false, false, nil)
	if err != nil {
		if missing(err) {
			return fatal{fmt.Errorf("%w: %q", ErrQueueNotFound, r.cfg.Queue)}
		}
		return refused(fmt.Errorf("consume: %w", err))
	}
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	b.Reset()
	r.log.Info("rabbitmq: consuming", "prefetch", r.cfg.Prefetch, "single_active_consumer", !r.cfg.Competing, "passive", r.cfg.Passive)

	// The workers' context ends when the channel does: an ack after that
	// cannot reach the broker, which delivers the message again.
	work, stopWork := context.WithCancel(context.Background())
	defer stopWork()
	queues := make([]chan rjob, r.core.cfg.Workers)
	var workers sync.WaitGroup
	for i := range queues {
		queues[i] = make(chan rjob, r.cfg.Prefetch)
		workers.Add(1)
		go func(q <-chan rjob) {
			defer workers.Done()
			w := &rworker[T]{r: r, doomed: map[string]bool{}}
			w.run(work, q)
		}(queues[i])
	}
	stop := func(drain bool) {
		for _, q := range queues {
			close(q)
		}
		if drain {
			done := make(chan struct{})
			go func() { workers.Wait(); close(done) }()
			t := time.NewTimer(drainTimeout)
			select {
			case <-done:
			case <-t.C:
			}
			t.Stop()
		}
		stopWork()
		workers.Wait()
	}
	for {
		select {
		case <-ctx.Done():
			// Finish what the workers hold, then close: the broker gives
			// back whatever was not acknowledged, in the order it was
			// delivered, before another consumer gets anything. No
			// basic.cancel first: with single active consumer it makes the
			// next consumer active at once, which would apply later events
			// of an aggregate while this one still finishes earlier ones.
			// What arrives meanwhile waits in the client, unacknowledged.
			stop(true)
			return nil
		case aerr, ok := <-closed:
			stop(false)
			if !ok || aerr == nil {
				return errors.New("the channel was closed")
			}
			return refused(aerr)
		case d, ok := <-deliveries:
			if !ok {
				stop(false)
				return errors.New("the delivery stream ended")
			}
			j := rjob{d: d, id: deliveryID(&d), agg: aggregateKey(&d)}
			queues[r.worker(j.agg)] <- j // never blocks: at most Prefetch deliveries are held
		}
	}
}

// worker picks the worker of an aggregate: hash(key) % Workers.
func (r *RabbitMQConsumer[T]) worker(agg string) int {
	h := fnv.New32a()
	h.Write([]byte(agg))
	return int(h.Sum32() % uint32(r.core.cfg.Workers))
}

// deliveryCount is the broker's count of earlier deliveries of d that
// were given back (x-delivery-count; absent on the first delivery).
func deliveryCount(d *amqp.Delivery) int64 {
	switch v := d.Headers["x-delivery-count"].(type) {
	case int64:
		return v
	case int32:
		return int64(v)
	case int:
		return int64(v)
	}
	return 0
}

func randomHex() string {
	b := make([]byte, 4)
	rand.Read(b)
	return hex.EncodeToString(b)
}
