package dlq

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/cdc-relay/cdc-relay/rabbitmq"
	recordpkg "github.com/cdc-relay/cdc-relay/record"
	"github.com/cdc-relay/cdc-relay/relay"
	"github.com/cdc-relay/cdc-relay/router"
)

// The dlq tools with RabbitMQ: the dead letters are in a stream, which the
// tools read from its first offset to a marker they publish (its end as
// of the start) without consuming it. What they did is kept in a second
// stream, the positions stream: one RabbitPosition per letter redriven or
// retired, never expiring, as the consumer group and --dlq-retired-topic
// keep it on Kafka. A letter with a position is no longer pending.
//
// A dead letter in the stream is an AMQP message: the event's body and
// properties (message_id the event id, type, timestamp the commit time,
// content_type, app_id), and the headers of a Kafka dead letter (id,
// event_type, aggregate_type, the row's own, outbox_row, error_kind,
// error, redrive_attempts) plus aggregate_id, and for a message the broker
// returned, where it was published: HeaderExchange and HeaderRoutingKey.

// Headers of a RabbitMQ dead letter beyond the Kafka ones.
const (
	// HeaderExchange is the exchange the event was published to.
	HeaderExchange = "exchange"
	// HeaderRoutingKey is the routing key it was published with; redrive
	// publishes the letter again with it.
	HeaderRoutingKey = "routing_key"
	// HeaderAggregateID is the event's aggregate id (a Kafka record's key).
	HeaderAggregateID = "aggregate_id"
)

// letterOnly are the headers of a dead letter that the event it is
// published again as does not carry.
var letterOnly = map[string]bool{rabbitmq.OffsetHeader: true, recordpkg.HeaderErrorKind: true, recordpkg.HeaderError: true,
	recordpkg.HeaderRow: true, recordpkg.HeaderRedriveAttempts: true, HeaderExchange: true, HeaderRoutingKey: true}

// RabbitMQConfig is the dead-letter stream of the dlq tools with RabbitMQ.
type RabbitMQConfig struct {
	URL string      // amqp://… or amqps://… (--rabbitmq-url)
	TLS *tls.Config // for amqps; nil: the system roots
	// Stream is the dead-letter stream.
	Stream string
	// Positions is the stream of the tools' positions; default Stream +
	// ".positions". Redrive and retire declare it (a durable stream without
	// retention) on their first write.
	Positions string
	// Exchange is where redrive publishes letters again (the relay's
	// --rabbitmq-exchange); "": the letter's exchange header.
	Exchange string
	// RedriveKinds are the error kinds whose letters hold the event as it
	// was published, which redrive sends again as they are; default
	// unroutable. Other letters hold the row's payload: redrive builds
	// them again through the row → record step (RabbitRedriveOptions.Relay).
	RedriveKinds []string
	// RoutingKey gives the routing key of a letter without a routing_key
	// header; default: its event_type header (the relay's default
	// --routing-key {event_type}).
	RoutingKey func(l *recordpkg.Letter) string
}

func (c *RabbitMQConfig) positions() string {
	if c.Positions != "" {
		return c.Positions
	}
	return c.Stream + ".positions"
}

// Position actions.
const (
	ActionRedriven = "redriven"
	ActionRetired  = "retired"
)

// RabbitPosition is one record of the positions stream: a letter redriven
// or retired.
type RabbitPosition struct {
	Action string `json:"action"` // ActionRedriven, ActionRetired
	Stream string `json:"stream"`
	Offset int64  `json:"offset"`
	// MessageID is the letter's: a position holds for the letter at Offset
	// only when it has this id (a stream created again starts at 0 again).
	MessageID  string    `json:"message_id,omitempty"`
	ID         string    `json:"id,omitempty"`
	EventType  string    `json:"event_type,omitempty"`
	ErrorKind  string    `json:"error_kind,omitempty"`
	Exchange   string    `json:"exchange,omitempty"`    // redriven: where to
	RoutingKey string    `json:"routing_key,omitempty"` // redriven: with which key
	Reason     string    `json:"reason,omitempty"`      // retired: why
	LetterTime time.Time `json:"letter_timestamp"`
	At         time.Time `json:"at"`
	By         string    `json:"by"`
}

// rabbitLetter is one dead letter read from the stream.
type rabbitLetter struct {
	offset int64
	d      *amqp.Delivery
	l      *recordpkg.Letter
	done   *RabbitPosition // its position, nil while pending
}

func (rl *rabbitLetter) id() string {
	id, _ := rl.l.Header(router.HeaderID)
	if len(id) == 0 {
		return rl.d.MessageId
	}
	return string(id)
}

func (rl *rabbitLetter) where() string { return rl.whereID(rl.id()) }

// whereID is where with the event's id id (an unconfigured_table letter
// built again has its row's).
func (rl *rabbitLetter) whereID(id string) string {
	return fmt.Sprintf("id=%s offset=%d", relay.Token([]byte(id)), rl.offset)
}

// rabbitDLQ is one tool's view of the dead-letter stream.
type rabbitDLQ struct {
	cfg  *RabbitMQConfig
	conn *amqp.Connection
	// closed gets the error conn closes with, from the broker or the
	// network.
	closed chan *amqp.Error
	done   map[int64]*RabbitPosition // by offset
}

func openRabbitDLQ(ctx context.Context, cfg *RabbitMQConfig) (*rabbitDLQ, error) {
	if cfg.Stream == "" {
		return nil, relay.ConfigErr("rabbitmq-dlq-stream", "the dead-letter stream is not set")
	}
	q := &rabbitDLQ{cfg: cfg, done: map[int64]*RabbitPosition{}}
	if err := q.connect(ctx); err != nil {
		q.close()
		return nil, err
	}
	return q, nil
}

// connect opens a connection, the one before closed, and reads the
// positions stream: the positions found join those already known.
func (q *rabbitDLQ) connect(ctx context.Context) error {
	q.close()
	conn, err := rabbitmq.Dial(q.cfg.URL, q.cfg.TLS, "cdc-relay dlq")
	if err != nil {
		return fmt.Errorf("connect to RabbitMQ: %w", err)
	}
	q.conn, q.closed = conn, conn.NotifyClose(make(chan *amqp.Error, 1))
	err = rabbitmq.ReadStream(ctx, conn, rabbitmq.StreamRead{Stream: q.cfg.positions(), ToEnd: true}, func(d *amqp.Delivery) (bool, error) {
		var p RabbitPosition
		if json.Unmarshal(d.Body, &p) == nil && p.Stream == q.cfg.Stream {
			q.done[p.Offset] = &p
		}
		return true, nil
	})
	if err != nil && !errors.Is(err, rabbitmq.ErrNoQueue) { // no stream: nothing done yet
		return err
	}
	return nil
}

// close closes the connection, if one is open.
func (q *rabbitDLQ) close() {
	if q.conn != nil {
		q.conn.Close()
		q.conn = nil
	}
}

// letters calls fn for each letter of the stream up to its end as of now,
// in offset order. A stream that does not exist holds none.
func (q *rabbitDLQ) letters(ctx context.Context, fn func(*rabbitLetter) error) error {
	return q.read(ctx, 0, true, fn)
}

// read is letters from offset from on, or with toEnd false, each letter
// of the stream from there and then each one appended to it until ctx
// ends (nil then); a stream that does not exist is then an error wrapping
// rabbitmq.ErrNoQueue.
func (q *rabbitDLQ) read(ctx context.Context, from int64, toEnd bool, fn func(*rabbitLetter) error) error {
	var offset any = "first" // also after retention removed offset 0
	if from > 0 {
		offset = from
	}
	err := rabbitmq.ReadStream(ctx, q.conn, rabbitmq.StreamRead{Stream: q.cfg.Stream, Offset: offset, ToEnd: toEnd}, func(d *amqp.Delivery) (bool, error) {
		rl := &rabbitLetter{offset: rabbitmq.Offset(d), d: d, l: rabbitLetterOf(d)}
		if rl.offset < from {
			return true, nil // a stream delivers from the start of the chunk that holds from
		}
		rl.done = q.positionOf(rl)
		return true, fn(rl)
	})
	if toEnd && errors.Is(err, rabbitmq.ErrNoQueue) {
		return nil // nothing was ever dead-lettered
	}
	return err
}

// positionOf is rl's position, nil while it is pending.
func (q *rabbitDLQ) positionOf(rl *rabbitLetter) *RabbitPosition {
	if p := q.done[rl.offset]; p != nil && (p.MessageID == "" || p.MessageID == rl.d.MessageId) {
		return p
	}
	return nil
}

// rabbitLetterOf is a message of the dead-letter stream as the record
// package reads a dead letter: its key the aggregate_id header, its time
// the AMQP timestamp.
func rabbitLetterOf(d *amqp.Delivery) *recordpkg.Letter {
	l := &recordpkg.Letter{Value: d.Body, Time: d.Timestamp}
	for _, h := range rabbitmq.TextHeaders(d.Headers) {
		if h.Key == rabbitmq.OffsetHeader {
			continue
		}
		if h.Key == HeaderAggregateID {
			l.Key = h.Value
		}
		l.Headers = append(l.Headers, recordpkg.LetterHeader{Key: h.Key, Value: h.Value})
	}
	return l
}

// position is the position of rl for action.
func (q *rabbitDLQ) position(rl *rabbitLetter, action string, now time.Time, by string) RabbitPosition {
	et, _ := rl.l.Header(router.HeaderEventType)
	id, _ := rl.l.Header(router.HeaderID)
	return RabbitPosition{Action: action, Stream: q.cfg.Stream, Offset: rl.offset, MessageID: rl.d.MessageId, ID: string(id),
		EventType: string(et), ErrorKind: rl.l.Kind(), LetterTime: rl.l.Time.UTC(), At: now, By: by}
}

// record appends ps to the positions stream, declaring it first, and
// returns once the broker confirmed every one.
func (q *rabbitDLQ) record(ctx context.Context, ps []RabbitPosition) error {
	if len(ps) == 0 {
		return nil
	}
	name := q.cfg.positions()
	ch, err := q.conn.Channel()
	if err != nil {
		return fmt.Errorf("write positions: %w", err)
	}
	_, err = ch.QueueDeclare(name, true, false, false, false, amqp.Table{"x-queue-type": "stream"})
	ch.Close()
	if err != nil {
		return fmt.Errorf("declare the positions stream %s: %w", name, err)
	}
	c, err := rabbitmq.NewConfirmer(q.conn)
	if err != nil {
		return fmt.Errorf("write positions: %w", err)
	}
	defer c.Close()
	msgs := make([]rabbitmq.Outgoing, len(ps))
	for i, p := range ps {
		body, _ := json.Marshal(p) // strings, numbers and times always marshal
		msgs[i] = rabbitmq.Outgoing{RoutingKey: name, Publishing: amqp.Publishing{ContentType: "application/json", Type: p.Action,
			MessageId: p.Stream + "/" + strconv.FormatInt(p.Offset, 10), Timestamp: p.At, Body: body}}
	}
	errs, err := c.Publish(ctx, msgs)
	if err == nil {
		err = errors.Join(errs...)
	}
	if err != nil {
		return fmt.Errorf("write positions to %s: %w", name, err)
	}
	for i := range ps {
		q.done[ps[i].Offset] = &ps[i]
	}
	return nil
}

// CountRabbitMQ is dlq stats on the dead-letter stream: it reads it up to
// its end as of now and counts the pending letters (with no position) by
// error kind, event type and age, and the redriven and retired ones.
func CountRabbitMQ(ctx context.Context, cfg RabbitMQConfig, now time.Time) (*Counts, error) {
	q, err := openRabbitDLQ(ctx, &cfg)
	if err != nil {
		return nil, err
	}
	defer q.close()
	counts := &Counts{Topic: cfg.Stream, Positions: cfg.positions(), RetiredTopic: cfg.positions(),
		Kinds: map[string]int{}, EventTypes: map[string]int{}, Ages: map[string]int{}}
	err = q.letters(ctx, func(rl *rabbitLetter) error {
		counts.InTopic++
		switch {
		case rl.done == nil:
			counts.add(rl.l, now)
		case rl.done.Action == ActionRetired:
			counts.Retired++
		default:
			counts.Redriven++
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return counts, nil
}

// RabbitRetirer is dlq retire on the dead-letter stream: it marks the
// pending letters Filters keep handled, with Reason, in the positions
// stream, and prints a line per letter on Stdout. Run leaves the counts in
// Retired, Already (retired before) and Filtered (left out by the
// filters).
type RabbitRetirer struct {
	Config                     RabbitMQConfig
	Filters                    Filters
	Reason                     string
	Stdout                     io.Writer
	Retired, Already, Filtered int
}

// Run retires the letters; an error leaves the counts of what it did.
func (rt *RabbitRetirer) Run(ctx context.Context) error {
	q, err := openRabbitDLQ(ctx, &rt.Config)
	if err != nil {
		return err
	}
	defer q.close()
	now, by := time.Now().UTC(), retiredBy()
	var ps []RabbitPosition
	err = q.letters(ctx, func(rl *rabbitLetter) error {
		switch {
		case rl.done != nil && rl.done.Action == ActionRedriven:
			return nil // not pending
		case rt.Filters.filtered(rl.l) != "":
			rt.Filtered++
		case rl.done != nil:
			rt.Already++
			fmt.Fprintf(rt.Stdout, "already retired %s at %s by %s reason=%s\n", rl.where(), rl.done.At.Format(time.RFC3339), rl.done.By, strconv.Quote(rl.done.Reason))
		default:
			p := q.position(rl, ActionRetired, now, by)
			p.Reason = rt.Reason
			ps = append(ps, p)
			if rt.Filters.DryRun {
				fmt.Fprintf(rt.Stdout, "would be retired %s kind=%s\n", rl.where(), rl.l.Kind())
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if rt.Filters.DryRun {
		rt.Retired = len(ps)
		return nil
	}
	if err := q.record(ctx, ps); err != nil {
		return err
	}
	for _, p := range ps {
		rt.Retired++
		fmt.Fprintf(rt.Stdout, "retired id=%s offset=%d kind=%s\n", relay.Token([]byte(p.ID)), p.Offset, p.ErrorKind)
	}
	return nil
}
