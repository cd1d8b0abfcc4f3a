package dlq

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
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
	// unroutable. Other letters hold the row's payload and need the row →
	// record step again: they stay pending.
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

func (rl *rabbitLetter) where() string {
	return fmt.Sprintf("id=%s offset=%d", relay.Token([]byte(rl.id())), rl.offset)
}

// rabbitDLQ is one tool's view of the dead-letter stream.
type rabbitDLQ struct {
	cfg  *RabbitMQConfig
	conn *amqp.Connection
	done map[int64]*RabbitPosition // by offset
}

func openRabbitDLQ(ctx context.Context, cfg *RabbitMQConfig) (*rabbitDLQ, error) {
	if cfg.Stream == "" {
		return nil, relay.ConfigErr("rabbitmq-dlq-stream", "the dead-letter stream is not set")
	}
	conn, err := rabbitmq.Dial(cfg.URL, cfg.TLS, "cdc-relay dlq")
	if err != nil {
		return nil, fmt.Errorf("connect to RabbitMQ: %w", err)
	}
	q := &rabbitDLQ{cfg: cfg, conn: conn, done: map[int64]*RabbitPosition{}}
	err = rabbitmq.ReadStream(ctx, conn, rabbitmq.StreamRead{Stream: cfg.positions(), ToEnd: true}, func(d *amqp.Delivery) (bool, error) {
		var p RabbitPosition
		if json.Unmarshal(d.Body, &p) == nil && p.Stream == cfg.Stream {
			q.done[p.Offset] = &p
		}
		return true, nil
	})
	if err != nil && !errors.Is(err, rabbitmq.ErrNoQueue) { // no stream: nothing done yet
		conn.Close()
		return nil, err
	}
	return q, nil
}

func (q *rabbitDLQ) close() { q.conn.Close() }

// letters calls fn for each letter of the stream up to its end as of now,
// in offset order. A stream that does not exist holds none.
func (q *rabbitDLQ) letters(ctx context.Context, fn func(*rabbitLetter) error) error {
	err := rabbitmq.ReadStream(ctx, q.conn, rabbitmq.StreamRead{Stream: q.cfg.Stream, ToEnd: true}, func(d *amqp.Delivery) (bool, error) {
		rl := &rabbitLetter{offset: rabbitmq.Offset(d), d: d, l: rabbitLetterOf(d)}
		if p := q.done[rl.offset]; p != nil && (p.MessageID == "" || p.MessageID == d.MessageId) {
			rl.done = p
		}
		return true, fn(rl)
	})
	if errors.Is(err, rabbitmq.ErrNoQueue) {
		return nil // nothing was ever dead-lettered
	}
	return err
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

// RabbitRedriven is what one redrive of the dead-letter stream did.
type RabbitRedriven struct {
	Redriven int // published again, confirmed and routed
	// Failing were published again and returned (still unroutable) or
	// nacked: they stay pending.
	Failing int
	// Skipped: left out by the filters (Filtered), letters that cannot be
	// sent as they are (NotAsIs), and retired or redriven before (Done).
	Filtered, NotAsIs, Done int
}

// ExitCode is the command's: relay.ExitFailed while a letter still fails.
func (r RabbitRedriven) ExitCode() int {
	if r.Failing > 0 {
		return relay.ExitFailed
	}
	return relay.ExitOK
}

// rabbitRedriveBatch is how many letters redrive publishes before it
// waits for their confirms and writes their positions: a kill repeats at
// most this many (consumers dedupe by message_id).
const rabbitRedriveBatch = 100

// RedriveRabbitMQ publishes the pending letters of the dead-letter stream
// that f keeps again, as they are (RedriveKinds), to cfg.Exchange with
// their routing key, with mandatory and confirms; a letter confirmed and
// routed gets a redriven position, one returned or nacked stays pending.
// It prints a line per letter and the summary on stdout. f.Follow is a
// *relay.ConfigError: a stream has no end to follow to.
func RedriveRabbitMQ(ctx context.Context, cfg RabbitMQConfig, f Filters, stdout io.Writer) (RabbitRedriven, error) {
	var res RabbitRedriven
	if f.Follow {
		return res, relay.ConfigErr("follow", "dlq redrive --follow reads the Kafka dead-letter topic only; with RabbitMQ, run dlq redrive again")
	}
	if len(cfg.RedriveKinds) == 0 {
		cfg.RedriveKinds = []string{"unroutable"}
	}
	if cfg.RoutingKey == nil {
		cfg.RoutingKey = func(l *recordpkg.Letter) string { et, _ := l.Header(router.HeaderEventType); return string(et) }
	}
	q, err := openRabbitDLQ(ctx, &cfg)
	if err != nil {
		return res, err
	}
	defer q.close()
	var c *rabbitmq.Confirmer
	if !f.DryRun {
		if c, err = rabbitmq.NewConfirmer(q.conn); err != nil {
			return res, fmt.Errorf("open a channel: %w", err)
		}
		defer c.Close()
	}
	now, by := time.Now().UTC(), retiredBy()
	var batch []*rabbitLetter
	var msgs []rabbitmq.Outgoing
	flush := func() error {
		if len(batch) == 0 || f.DryRun {
			return nil
		}
		fates, err := c.Publish(ctx, msgs)
		if err != nil {
			return fmt.Errorf("publish to exchange %s: %w", cfg.Exchange, err)
		}
		var ps []RabbitPosition
		for i, rl := range batch {
			if fates[i] == nil {
				p := q.position(rl, ActionRedriven, now, by)
				p.Exchange, p.RoutingKey = msgs[i].Exchange, msgs[i].RoutingKey
				ps = append(ps, p)
			}
		}
		// The positions after the confirms: a kill in between sends those
		// letters again next time (at least once).
		if err := q.record(ctx, ps); err != nil {
			return err
		}
		for i, rl := range batch {
			if fates[i] != nil {
				res.Failing++
				fmt.Fprintf(stdout, "still failing %s exchange=%s routing_key=%s reason=%s\n", rl.where(), msgs[i].Exchange, relay.Token([]byte(msgs[i].RoutingKey)), strconv.Quote(fates[i].Error()))
				continue
			}
			res.Redriven++
			fmt.Fprintf(stdout, "redriven %s exchange=%s routing_key=%s\n", rl.where(), msgs[i].Exchange, relay.Token([]byte(msgs[i].RoutingKey)))
		}
		batch, msgs = batch[:0], msgs[:0]
		return nil
	}
	err = q.letters(ctx, func(rl *rabbitLetter) error {
		if rl.done != nil {
			res.Done++
			what := "redriven"
			if rl.done.Action == ActionRetired {
				what = "retired (dlq retire, reason " + strconv.Quote(rl.done.Reason) + ")"
			}
			fmt.Fprintf(stdout, "skipped %s: %s at %s\n", rl.where(), what, rl.done.At.Format(time.RFC3339))
			return nil
		}
		if why := f.filtered(rl.l); why != "" {
			res.Filtered++
			fmt.Fprintf(stdout, "skipped %s: left out by %s, pending\n", rl.where(), why)
			return nil
		}
		if kind := rl.l.Kind(); !slices.Contains(cfg.RedriveKinds, kind) {
			res.NotAsIs++
			fmt.Fprintf(stdout, "skipped %s: its error_kind %s holds the row's payload, not the event as published; it needs the row → record step again, which dlq redrive does not do with RabbitMQ yet: pending (cdc-relay dlq retire retires it)\n", rl.where(), kind)
			return nil
		}
		m := republish(rl, &cfg)
		if f.DryRun {
			res.Redriven++
			fmt.Fprintf(stdout, "would be redriven %s exchange=%s routing_key=%s\n", rl.where(), m.Exchange, relay.Token([]byte(m.RoutingKey)))
			return nil
		}
		batch, msgs = append(batch, rl), append(msgs, m)
		if len(batch) >= rabbitRedriveBatch {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	prefix := "redrive"
	switch {
	case f.DryRun:
		prefix = "dry run: would have"
	case err != nil:
		prefix = "redrive incomplete"
	}
	fmt.Fprintf(stdout, "%s: redriven %d, still failing %d, skipped %d (%d left out by the filters, %d that cannot be sent as they are, %d retired or redriven before) from stream %s\n",
		prefix, res.Redriven, res.Failing, res.Filtered+res.NotAsIs+res.Done, res.Filtered, res.NotAsIs, res.Done, cfg.Stream)
	return res, err
}

// republish is the event a letter holds, to cfg.Exchange (or the
// letter's) with its routing key: its body and properties, persistent,
// without the dead-letter headers.
func republish(rl *rabbitLetter, cfg *RabbitMQConfig) rabbitmq.Outgoing {
	d := rl.d
	headers := amqp.Table{}
	for k, v := range d.Headers {
		if !letterOnly[k] {
			headers[k] = v
		}
	}
	ex := cfg.Exchange
	if ex == "" {
		h, _ := rl.l.Header(HeaderExchange)
		ex = string(h)
	}
	key, ok := rl.l.Header(HeaderRoutingKey)
	rk := string(key)
	if !ok {
		rk = cfg.RoutingKey(rl.l)
	}
	return rabbitmq.Outgoing{Exchange: ex, RoutingKey: rk, Publishing: amqp.Publishing{
		Headers: headers, ContentType: d.ContentType, ContentEncoding: d.ContentEncoding, Priority: d.Priority,
		CorrelationId: d.CorrelationId, MessageId: d.MessageId, Timestamp: d.Timestamp, Type: d.Type, AppId: d.AppId,
		Body: d.Body,
	}}
}
