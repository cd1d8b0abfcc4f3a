package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/cdc-relay/cdc-relay/publisher"
)

// replayLine is what replay prints of one event once the broker
// acknowledged it.
type replayLine struct {
	seq            uint64
	table          int // index into the replay's tables
	id, topic, key string
	reason         string // a dead letter's reason; "" for an event
	// rabbit is set under --rabbitmq-url: the line names the exchange and
	// the routing key the event goes to ("" for a dead letter of the
	// record step), and a dead letter's topic is the dead-letter stream.
	rabbit               bool
	exchange, routingKey string
}

func (l *replayLine) String() string {
	if l.rabbit {
		return l.rabbitString()
	}
	if l.reason != "" {
		return fmt.Sprintf("dead-lettered id=%s topic=%s key=%s reason=%s", l.id, l.topic, l.key, strconv.Quote(l.reason))
	}
	return fmt.Sprintf("published id=%s topic=%s key=%s", l.id, l.topic, l.key)
}

// rabbitString is the line under RabbitMQ, as dlq redrive prints its
// letters: exchange=… routing_key=…, and for a dead letter the dead-letter
// stream (dlq_stream=…, the log key of run's WARN) followed by where the
// event was to go, when it got that far.
func (l *replayLine) rabbitString() string {
	if l.reason == "" {
		return fmt.Sprintf("published id=%s exchange=%s routing_key=%s", l.id, l.exchange, l.routingKey)
	}
	if l.routingKey == "" {
		return fmt.Sprintf("dead-lettered id=%s dlq_stream=%s reason=%s", l.id, l.topic, strconv.Quote(l.reason))
	}
	return fmt.Sprintf("dead-lettered id=%s dlq_stream=%s exchange=%s routing_key=%s reason=%s", l.id, l.topic, l.exchange, l.routingKey, strconv.Quote(l.reason))
}

// replayAcker is the publisher session's Acker: it prints the lines of the
// acknowledged events, in order, and bounds what is in flight.
type replayAcker struct {
	out       io.Writer
	maxEvents int
	maxBytes  int64
	// stopped is waitRoom's error when the session stopped without one.
	stopped string

	mu      sync.Mutex
	pending []replayLine
	events  int
	bytes   int64
	tables  []replayCount // acknowledged events by table
	room    chan struct{}
}

// replayCount is what the broker acknowledged of one table's events.
type replayCount struct {
	published int // acknowledged events
	dead      int // of them, dead letters
}

var _ publisher.Acker = (*replayAcker)(nil)

// newReplayAcker is the acker of a replay to broker ("Kafka",
// "RabbitMQ") of the given number of tables.
func newReplayAcker(out io.Writer, broker string, tables, maxEvents int, maxBytes int64) *replayAcker {
	return &replayAcker{out: out, maxEvents: maxEvents, maxBytes: maxBytes, stopped: strings.ToLower(broker) + " session stopped",
		tables: make([]replayCount, tables), room: make(chan struct{}, 1)}
}

// Ack prints the events up to upTo and frees their room.
func (a *replayAcker) Ack(upTo uint64, events int, bytes int64) {
	a.mu.Lock()
	n := 0
	for n < len(a.pending) && a.pending[n].seq <= upTo {
		l := &a.pending[n]
		fmt.Fprintln(a.out, l.String())
		a.tables[l.table].published++
		if l.reason != "" {
			a.tables[l.table].dead++
		}
		n++
	}
	a.pending = append(a.pending[:0], a.pending[n:]...)
	a.events -= events
	a.bytes -= bytes
	a.mu.Unlock()
	select {
	case a.room <- struct{}{}:
	default:
	}
}

// add records an event about to be enqueued.
func (a *replayAcker) add(l replayLine, size int) {
	a.mu.Lock()
	a.pending = append(a.pending, l)
	a.events++
	a.bytes += int64(size)
	a.mu.Unlock()
}

// rejected marks an event the broker refused, which goes to the
// dead-letter topic instead (publisher.Config.Reject).
func (a *replayAcker) rejected(seq uint64, dlq, reason string) {
	a.mu.Lock()
	for i := range a.pending {
		if a.pending[i].seq == seq {
			a.pending[i].topic, a.pending[i].reason = dlq, reason
		}
	}
	a.mu.Unlock()
}

// deadLettered marks the first event with this id that is not a dead
// letter yet as one: RabbitMQ's sink sent it to the dead-letter stream
// (unroutable, invalid_routing_key), and tells by the event's id.
func (a *replayAcker) deadLettered(id, dlq, reason string) {
	a.mu.Lock()
	for i := range a.pending {
		if a.pending[i].id == id && a.pending[i].reason == "" {
			a.pending[i].topic, a.pending[i].reason = dlq, reason
			break
		}
	}
	a.mu.Unlock()
}

// waitRoom waits until another event fits in the in-flight bounds.
func (a *replayAcker) waitRoom(ctx context.Context, done <-chan struct{}) error {
	for {
		a.mu.Lock()
		full := a.events >= a.maxEvents || a.bytes >= a.maxBytes
		a.mu.Unlock()
		if !full {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-done:
			return errors.New(a.stopped)
		case <-a.room:
		}
	}
}

// counts returns the acknowledged events and dead letters of table i.
func (a *replayAcker) counts(i int) (int, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.tables[i].published, a.tables[i].dead
}
