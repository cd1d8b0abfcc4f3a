package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// A following read of a stream watches its consumer. RabbitMQ 3.10 can
// leave a stream consumer that attached while the node was starting
// silent for good: the stream takes messages, the consumer is never given
// them, and nothing is closed or logged (a following tail did so across a
// broker restart on a loaded machine). A stream's queue.declare-ok counts
// no messages on 3.10, so the count cannot tell. Instead, when a following
// read has been given nothing for stallIdle, it probes: a second consumer,
// on a channel of its own, reads from the read's next offset. When the
// probe is given a message and the read is still given nothing stallGrace
// later, the read ends with ErrStalled, and its caller reads on from its
// next offset on a new connection, as after a lost one. While a stream is
// quiet, that costs a channel and a consumer for up to probeWait every
// stallIdle.
//
// The set-up of a following read (declare, qos, consume) that gets no
// answer in setupTimeout closes the connection, the only way to end an
// AMQP call that waits, and ends the read with ErrStalled as well.

// stallForTest, set by a test, stands between a following read's
// consumer and the read: a stall made to order.
var stallForTest func(<-chan amqp.Delivery) <-chan amqp.Delivery

// ErrStalled is a following read whose consumer was given nothing while
// the stream had messages for it, or whose set-up got no answer.
var ErrStalled = errors.New("the stream's consumer stalled")

// The watchdog's times; variables only so that a test can shorten them.
var (
	stallIdle    = 10 * time.Second
	stallGrace   = 5 * time.Second
	probeWait    = 3 * time.Second
	setupTimeout = 30 * time.Second
)

// watchdog tells a following read when it has stalled. It is used by the
// read's goroutine; its probe runs on a goroutine of its own.
type watchdog struct {
	conn   *amqp.Connection
	stream string
	from   any   // the read's start, until it is given a message
	next   int64 // the offset after the last message given; -1 before one
	quiet  time.Time
	// suspect is when a probe was given a message the read was not; zero
	// while none was.
	suspect time.Time
	probing bool
	results chan probeResult
	clock   func() time.Time
	probe   func(ctx context.Context, from any) bool
}

type probeResult struct {
	found   bool
	started time.Time
}

func newWatchdog(conn *amqp.Connection, stream string, from any) *watchdog {
	w := &watchdog{conn: conn, stream: stream, from: from, next: -1, results: make(chan probeResult, 1), clock: time.Now}
	if o, ok := from.(int64); ok {
		w.next = o
	}
	w.probe = w.probeStream
	w.quiet = w.clock()
	return w
}

// given records a message given to the read.
func (w *watchdog) given(d *amqp.Delivery) {
	w.quiet, w.suspect = w.clock(), time.Time{}
	if o := Offset(d); o >= 0 {
		w.next = o + 1
	}
}

// tick is called every second or so: it starts a probe when the read has
// been quiet for stallIdle, and is ErrStalled once a probe's message has
// not reached the read in stallGrace.
func (w *watchdog) tick(ctx context.Context) error {
	now := w.clock()
	switch {
	case !w.suspect.IsZero() && now.Sub(w.suspect) >= stallGrace:
		return fmt.Errorf("%w: it was given nothing for %s, while a second consumer was given the message at offset %d or later",
			ErrStalled, now.Sub(w.quiet).Round(time.Second), max(w.next, 0))
	case w.suspect.IsZero() && !w.probing && now.Sub(w.quiet) >= stallIdle:
		w.probing = true
		from := w.from
		if w.next >= 0 {
			from = w.next
		}
		go func() { w.results <- probeResult{found: w.probe(ctx, from), started: now} }()
	}
	return nil
}

// probed takes a probe's result.
func (w *watchdog) probed(r probeResult) {
	w.probing = false
	switch {
	case r.found && !w.quiet.After(r.started):
		w.suspect = w.clock()
	case !r.found:
		w.quiet = w.clock() // the next probe stallIdle from now
	}
}

// probeStream reports whether the stream gives a second consumer a
// message at from or later within probeWait. A failure to set it up
// (the node still starting) is no message.
func (w *watchdog) probeStream(ctx context.Context, from any) bool {
	ch, err := w.conn.Channel()
	if err != nil {
		return false
	}
	defer ch.Close()
	if err := ch.Qos(100, 0, false); err != nil {
		return false
	}
	msgs, err := ch.Consume(w.stream, "", false, false, false, false, amqp.Table{OffsetHeader: from})
	if err != nil {
		return false
	}
	min, _ := from.(int64)
	timer := time.NewTimer(probeWait)
	defer timer.Stop()
	for {
		select {
		case d, ok := <-msgs:
			if !ok {
				return false
			}
			d.Ack(false)
			if Offset(&d) >= min { // a stream gives from the start of the chunk that holds from
				return true
			}
		case <-timer.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// boundSetup runs setup, the set-up of a following read; when it gets no
// answer in setupTimeout, conn is closed, and the error is ErrStalled.
func boundSetup(conn *amqp.Connection, setup func() error) error {
	timer := time.AfterFunc(setupTimeout, func() { conn.CloseDeadline(time.Now().Add(5 * time.Second)) })
	err := setup()
	if !timer.Stop() {
		return fmt.Errorf("%w: the broker did not answer setting up the consumer in %s, so the connection was closed (last: %v)", ErrStalled, setupTimeout, err)
	}
	return err
}
