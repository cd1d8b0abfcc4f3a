package rabbitmq

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/cdc-relay/cdc-relay/checkpoint"
)

// CheckpointStore keeps the relay's checkpoints in RabbitMQ streams
// (x-queue-type: stream, RabbitMQ 3.9+), a checkpoint.Backend:
//   - <name>.relay.<hash of the relay id>: one stream per relay, its
//     checkpoints. Size retention (MaxBytes) drops only old segments, and no
//     other relay writes to it, so its newest record outlives any pause.
//   - <name>.gaps: every accepted gap, with no retention: gaps never expire.
//   - <name>.relays: the directory, one record per relay stream, with no
//     retention.
//
// AMQP 0-9-1 gives a stream reader no end: Load publishes a marker with
// confirms and reads up to it. What cannot be read is an error (unknown),
// never an empty state.
type CheckpointStore struct {
	cfg CheckpointConfig

	mu         sync.Mutex
	conn       *amqp.Connection
	ch         *amqp.Channel    // confirm mode, for writes and markers
	returns    chan amqp.Return // ch's returns: one listener per channel
	blocked    chan amqp.Blocking
	blockedBy  string // the alarm's reason while the broker blocks conn; "" otherwise
	registered map[string]bool

	// alarm mirrors blockedBy, with since when, for Blocked: it is read
	// without mu, which a store call holds while it waits on the broker.
	alarm struct {
		sync.Mutex
		since  time.Time
		reason string
	}
}

// ErrBlocked is a checkpoint write or read the broker holds back: it has
// blocked the store's connection (connection.blocked, a memory or disk
// alarm). The store gives up at once rather than wait silently for the
// alarm to clear; its caller retries.
var ErrBlocked = errors.New("the broker has blocked publishing (connection.blocked: a memory or disk alarm)")

// CheckpointConfig configures a CheckpointStore.
type CheckpointConfig struct {
	URL  string
	TLS  *tls.Config
	Name string // the streams' common prefix, e.g. cdc-relay.checkpoints
	// Retention of each relay's stream: at most MaxBytes, in segments of
	// SegmentBytes (defaults 4 MB and 512 KB: Load reads the whole stream).
	// The newest segment is never dropped.
	MaxBytes, SegmentBytes int64
}

// NewCheckpointStore returns a store; it connects on first use.
func NewCheckpointStore(cfg CheckpointConfig) *CheckpointStore {
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = 4 << 20
	}
	if cfg.SegmentBytes <= 0 {
		cfg.SegmentBytes = 512 << 10
	}
	return &CheckpointStore{cfg: cfg, registered: map[string]bool{}}
}

var _ checkpoint.Backend = (*CheckpointStore)(nil)

// Topic is the streams' common prefix.
func (s *CheckpointStore) Topic() string { return s.cfg.Name }

// Broker is RabbitMQ.
func (s *CheckpointStore) Broker() checkpoint.Broker { return checkpoint.RabbitMQ }

func (s *CheckpointStore) gaps() string      { return s.cfg.Name + ".gaps" }
func (s *CheckpointStore) directory() string { return s.cfg.Name + ".relays" }

// relayStream names relay id's stream: a hash, since a relay id may hold any
// character and any length.
func (s *CheckpointStore) relayStream(relayID string) string {
	h := sha256.Sum256([]byte(relayID))
	return s.cfg.Name + ".relay." + hex.EncodeToString(h[:8])
}

// streamArgs are a stream's declare arguments, with or without retention.
func (s *CheckpointStore) streamArgs(retention bool) amqp.Table {
	args := amqp.Table{"x-queue-type": "stream"}
	if retention {
		args["x-max-length-bytes"] = s.cfg.MaxBytes
		args["x-stream-max-segment-size-bytes"] = s.cfg.SegmentBytes
	}
	return args
}

// CheckpointStream is one stream a store uses, as `cdc-relay check` sees it.
type CheckpointStream struct {
	Name, Role string     // Role: "checkpoints of this relay", "gaps" or "relay directory"
	Args       amqp.Table // the arguments the store declares it with
}

// Streams are the streams relayID's store uses: its own checkpoints, the
// gaps and the directory.
func (s *CheckpointStore) Streams(relayID string) []CheckpointStream {
	return []CheckpointStream{
		{s.relayStream(relayID), "checkpoints of this relay", s.streamArgs(true)},
		{s.gaps(), "gaps", s.streamArgs(false)},
		{s.directory(), "relay directory", s.streamArgs(false)},
	}
}

// channel is the store's confirm channel, opened when needed.
func (s *CheckpointStore) channel() (*amqp.Channel, error) {
	if s.ch != nil && !s.ch.IsClosed() {
		return s.ch, nil
	}
	s.closeLocked()
	conn, err := amqp.DialConfig(s.cfg.URL, amqp.Config{Heartbeat: 10 * time.Second, TLSClientConfig: s.cfg.TLS,
		Properties: amqp.Table{"connection_name": "cdc-relay checkpoints"}})
	if err != nil {
		return nil, err
	}
	ch, err := conn.Channel()
	if err == nil {
		err = ch.Confirm(false)
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	// One return listener for the channel's life: the library hands every
	// return to every listener, blocking, so one per publish would leak and
	// at the second return stall the connection.
	s.conn, s.ch, s.returns = conn, ch, ch.NotifyReturn(make(chan amqp.Return, 16))
	s.blocked, s.blockedBy = conn.NotifyBlocked(make(chan amqp.Blocking, 16)), ""
	return ch, nil
}

func (s *CheckpointStore) closeLocked() {
	s.drainBlocked()
	switch {
	case s.conn != nil && s.blockedBy != "":
		// A blocked connection is not read by the broker until the alarm
		// clears, so Close would wait that long for its answer.
		go s.conn.Close()
	case s.conn != nil:
		s.conn.Close()
	}
	s.conn, s.ch, s.returns, s.blocked, s.blockedBy = nil, nil, nil, nil, ""
	s.mirrorAlarm()
}

// block applies a connection.blocked or unblocked notification (!open:
// the connection closed, and the next use opens another).
func (s *CheckpointStore) block(b amqp.Blocking, open bool) {
	switch {
	case !open:
		s.blocked = nil
	case b.Active:
		s.blockedBy = b.Reason
		if s.blockedBy == "" {
			s.blockedBy = "blocked"
		}
	default:
		s.blockedBy = ""
	}
	s.mirrorAlarm()
}

// mirrorAlarm copies blockedBy into alarm, keeping since while the alarm
// lasts.
func (s *CheckpointStore) mirrorAlarm() {
	s.alarm.Lock()
	defer s.alarm.Unlock()
	switch {
	case s.blockedBy == "":
		s.alarm.since, s.alarm.reason = time.Time{}, ""
	case s.alarm.since.IsZero():
		s.alarm.since, s.alarm.reason = time.Now(), s.blockedBy
	default:
		s.alarm.reason = s.blockedBy
	}
}

// Blocked says since when the broker has blocked the store's connection
// (connection.blocked, a memory or disk alarm), and why; zero when it has
// not. An idle store applies the notifications received so far first; a
// busy one applies them itself, so Blocked never waits for the broker.
func (s *CheckpointStore) Blocked() (since time.Time, reason string) {
	if s.mu.TryLock() {
		s.drainBlocked()
		s.mu.Unlock()
	}
	s.alarm.Lock()
	defer s.alarm.Unlock()
	return s.alarm.since, s.alarm.reason
}

// drainBlocked applies the blocked and unblocked notifications received
// so far.
func (s *CheckpointStore) drainBlocked() {
	for s.blocked != nil {
		select {
		case b, open := <-s.blocked:
			s.block(b, open)
		default:
			return
		}
	}
}

func (s *CheckpointStore) blockedErr() error {
	return fmt.Errorf("%w: %s; the checkpoint can be neither written nor read up to an end marker until the alarm clears", ErrBlocked, s.blockedBy)
}

// Close closes the connection; the store opens another when used again.
func (s *CheckpointStore) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeLocked()
}

// declare declares a durable stream with retention args (nil: none). A
// declare that meets a queue with other arguments is an error naming it.
func (s *CheckpointStore) declare(ch *amqp.Channel, name string, retention bool) error {
	args := s.streamArgs(retention)
	if _, err := ch.QueueDeclare(name, true, false, false, false, args); err != nil {
		var aerr *amqp.Error
		if errors.As(err, &aerr) && aerr.Code == amqp.PreconditionFailed {
			return fmt.Errorf("checkpoint stream %s exists with other arguments than %v: %s", name, args, aerr.Reason)
		}
		return fmt.Errorf("declare checkpoint stream %s: %w", name, err)
	}
	return nil
}

// Ensure declares the gaps and directory streams when create is true;
// otherwise it only checks that they exist.
func (s *CheckpointStore) Ensure(ctx context.Context, create bool) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, name := range []string{s.gaps(), s.directory()} {
		ch, err := s.channel()
		if err != nil {
			return false, fmt.Errorf("checkpoint streams %s: %w", s.cfg.Name, err)
		}
		// The broker reads nothing from a blocked connection, a declare
		// included, until the alarm clears.
		if s.drainBlocked(); s.blockedBy != "" {
			return false, fmt.Errorf("checkpoint streams %s: %w", s.cfg.Name, s.blockedErr())
		}
		if create {
			if err := s.declare(ch, name, false); err != nil {
				return false, err
			}
			continue
		}
		if _, err := ch.QueueDeclarePassive(name, true, false, false, false, nil); err != nil {
			var aerr *amqp.Error
			if errors.As(err, &aerr) && Missing(err) {
				return false, nil // the channel is closed; channel() opens another
			}
			return false, fmt.Errorf("checkpoint stream %s: %w", name, err)
		}
	}
	return true, nil
}

// publish sends body to stream with confirms, mandatory, and waits.
func (s *CheckpointStore) publish(ctx context.Context, ch *amqp.Channel, stream string, msg amqp.Publishing) error {
	for drained := false; !drained; { // a return of a publish whose wait was cut short
		select {
		case _, open := <-s.returns:
			drained = !open
		default:
			drained = true
		}
	}
	if s.drainBlocked(); s.blockedBy != "" {
		return s.blockedErr()
	}
	msg.DeliveryMode = amqp.Persistent
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", stream, true, false, msg)
	if err != nil {
		return err
	}
	// The broker blocks a connection when it publishes during an alarm,
	// and then holds the confirm back until the alarm clears.
	for waiting := true; waiting; {
		select {
		case <-dc.Done():
			waiting = false
		case b, open := <-s.blocked:
			if s.block(b, open); s.blockedBy != "" {
				return s.blockedErr()
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	ok := dc.Acked()
	select {
	case r, open := <-s.returns:
		if open {
			return fmt.Errorf("stream %s is missing (%s)", stream, r.ReplyText)
		}
	default:
	}
	if !ok {
		return fmt.Errorf("stream %s refused the record (nack)", stream)
	}
	return nil
}

// Write appends rec to its relay's stream (a checkpoint) or to the gaps
// stream, and returns once the broker confirmed it.
func (s *CheckpointStore) Write(ctx context.Context, rec *checkpoint.Record) error {
	body, err := rec.Marshal()
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, err := s.channel()
	if err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	stream := s.gaps()
	if rec.Kind == checkpoint.KindCheckpoint {
		stream = s.relayStream(rec.RelayID)
		if !s.registered[rec.RelayID] {
			if err := s.declare(ch, stream, true); err != nil {
				return err
			}
			if err := s.publish(ctx, ch, s.directory(), amqp.Publishing{MessageId: stream, Type: "relay", Body: []byte(rec.RelayID)}); err != nil {
				return fmt.Errorf("register checkpoint stream %s: %w", stream, err)
			}
			s.registered[rec.RelayID] = true
		}
	}
	if err := s.publish(ctx, ch, stream, amqp.Publishing{ContentType: "application/json", MessageId: rec.Key(), Type: rec.Kind, Body: body}); err != nil {
		return fmt.Errorf("write checkpoint to stream %s: %w", stream, err)
	}
	return nil
}

// Load reads the directory, each relay stream's newest record and every
// gap.
func (s *CheckpointStore) Load(ctx context.Context) (*checkpoint.State, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	byKey := map[string]*checkpoint.Record{}
	streams := map[string]bool{}
	err := s.read(ctx, s.directory(), "first", func(d amqp.Delivery) {
		if d.Type == "relay" {
			streams[d.MessageId] = true
		}
	})
	if err != nil {
		return nil, err
	}
	keep := func(d amqp.Delivery) {
		if rec, err := checkpoint.ParseRecord(d.Body); err == nil {
			byKey[rec.Key()] = rec
		}
	}
	for stream := range streams {
		// From the first offset, not "last": that is the last chunk, which
		// may hold only an earlier Load's marker.
		if err := s.read(ctx, stream, "first", keep); err != nil {
			return nil, err
		}
	}
	if err := s.read(ctx, s.gaps(), "first", keep); err != nil {
		return nil, err
	}
	return checkpoint.NewState(byKey), nil
}

// read publishes a marker to stream and hands each message from offset
// ("first", "last") up to the marker to fn.
func (s *CheckpointStore) read(ctx context.Context, stream, offset string, fn func(amqp.Delivery)) error {
	fail := func(err error) error { return fmt.Errorf("read checkpoint stream %s: %w", stream, err) }
	ch, err := s.channel()
	if err != nil {
		return fail(err)
	}
	var id [12]byte
	rand.Read(id[:])
	marker := "marker-" + hex.EncodeToString(id[:])
	if err := s.publish(ctx, ch, stream, amqp.Publishing{MessageId: marker, Type: "marker"}); err != nil {
		return fail(err)
	}
	// A channel of its own: the stream's deliveries need credit (qos) and
	// acks, which the confirm channel should not carry.
	rch, err := s.conn.Channel()
	if err != nil {
		return fail(err)
	}
	defer rch.Close()
	if err := rch.Qos(200, 0, false); err != nil {
		return fail(err)
	}
	msgs, err := rch.ConsumeWithContext(ctx, stream, "", false, false, false, false, amqp.Table{"x-stream-offset": offset})
	if err != nil {
		return fail(err)
	}
	for {
		select {
		case d, ok := <-msgs:
			if !ok {
				return fail(errors.New("the consumer was closed before the marker"))
			}
			d.Ack(false)
			if d.Type == "marker" {
				if d.MessageId == marker {
					return nil
				}
				continue
			}
			fn(d)
		case <-ctx.Done():
			return fail(ctx.Err())
		}
	}
}
