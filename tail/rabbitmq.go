package tail

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/rabbitmq"
	recordpkg "github.com/cdc-relay/cdc-relay/record"
	"github.com/cdc-relay/cdc-relay/relay"
	"github.com/cdc-relay/cdc-relay/schemaregistry"
)

// `cdc-relay tail` with RabbitMQ. An exchange keeps nothing, so tail
// follows it through a queue of its own (temporary, exclusive,
// auto-delete) bound with a pattern, from the moment it starts. A stream
// (the dead-letter stream, or one of the user's bound to the exchange) is
// read by name without consuming it, from where tail is told.

// Defaults of RabbitMQConfig.
const (
	DefaultPattern        = "#"
	DefaultMaxLength      = 10000
	DefaultMaxLengthBytes = 16 << 20
)

// rabbitPrefetch is how many deliveries tail holds unacked: the rest waits
// in its queue, where x-max-length bounds it.
const rabbitPrefetch = 100

// RabbitMQConfig is one tail of RabbitMQ. Exactly one of Exchange and
// Stream is set.
type RabbitMQConfig struct {
	URL string      // amqp://… or amqps://… (--rabbitmq-url)
	TLS *tls.Config // for amqps; nil: the system roots
	// Exchange is followed through a temporary queue bound with Pattern
	// (default "#": every routing key), from the moment tail starts.
	Exchange string
	Pattern  string
	// The temporary queue's bounds: at most MaxLength messages (default
	// 10,000) and MaxLengthBytes of bodies (default 16 MiB). When tail
	// falls behind, the oldest are dropped (x-overflow: drop-head), so that
	// a slow tail never holds the broker's memory and raises the alarm that
	// blocks the relay's publishing.
	MaxLength      int64
	MaxLengthBytes int64
	// Stream is read by name, without consuming it: from Start (FromEnd:
	// what arrives after tail starts; FromBeginning: its first message;
	// FromTime: Since; FromOffsets: Offset). Without Follow the read ends at
	// the stream's end as of the start (an end marker, published with
	// confirms, which readers pass by).
	Stream string
	Start  Start
	Since  time.Time
	Offset int64
	Follow bool  // a stream: keep reading past its end; an exchange is always followed
	Count  int64 // stop after this many lines; 0: no limit
	Pretty bool
	// KeyFormat is how the relay writes keys (the aggregate_id header here).
	KeyFormat recordpkg.KeyFormat
	// Lookup fetches a writer schema by id, for Confluent-framed values;
	// nil without a registry.
	Lookup func(ctx context.Context, id int) (*schemaregistry.WriterSchema, error)
	// Subject names the registry's "topic" of a message, for the subject
	// printed; default: the routing key.
	Subject func(exchange, routingKey string) string
}

// RunRabbitMQ prints the messages cfg names on stdout, one JSON line each
// (the members of Kafka's lines, and exchange, routing_key, stream and the
// AMQP properties), until ctx ends, Count lines were printed, or without
// Follow the stream's end as of the start. A setting that cannot work (no
// source, --from-beginning on an exchange, a queue that is not a stream)
// is a *relay.ConfigError: exit 2.
func RunRabbitMQ(ctx context.Context, cfg RabbitMQConfig, stdout io.Writer, log *slog.Logger) error {
	switch {
	case cfg.Exchange == "" && cfg.Stream == "":
		return relay.ConfigErr("rabbitmq-exchange", "tail needs an exchange to follow or a stream to read")
	case cfg.Exchange != "" && cfg.Stream != "":
		return relay.ConfigErr("stream", "tail reads an exchange or a stream, not both")
	case cfg.Exchange != "" && cfg.Start != FromEnd:
		return relay.ConfigErr(startFlag(cfg.Start), "exchange %s is not a stream: an exchange keeps no messages, and tail's queue receives only what is published after it starts; read a stream by name (--stream) to start from its beginning, a time or an offset", cfg.Exchange)
	}
	if cfg.Pattern == "" {
		cfg.Pattern = DefaultPattern
	}
	if cfg.MaxLength <= 0 {
		cfg.MaxLength = DefaultMaxLength
	}
	if cfg.MaxLengthBytes <= 0 {
		cfg.MaxLengthBytes = DefaultMaxLengthBytes
	}
	if cfg.Subject == nil {
		cfg.Subject = func(_, key string) string { return key }
	}
	conn, err := rabbitmq.Dial(cfg.URL, cfg.TLS, "cdc-relay tail")
	if err != nil {
		return fmt.Errorf("connect to RabbitMQ: %w", err)
	}
	t := &rabbitTail{cfg: &cfg, log: log, f: newTailFormatter(cfg.KeyFormat, cfg.Lookup, log), out: bufio.NewWriter(stdout)}
	t.use(conn)
	if cfg.Start == FromOffsets {
		t.next = cfg.Offset
	}
	defer func() { t.conn.Close() }() // the last connection
	defer t.out.Flush()
	return t.run(ctx)
}

// rabbitTail is one tail of RabbitMQ.
type rabbitTail struct {
	cfg     *RabbitMQConfig
	log     *slog.Logger
	conn    *amqp.Connection
	closed  chan *amqp.Error // the error conn closes with
	f       *tailFormatter
	out     *bufio.Writer
	line    []byte
	printed int64
	// next is the stream offset after the last line printed: a read after
	// a lost connection starts there.
	next int64
	// readFrom is when the first read of a stream from its end began: a
	// read after a lost connection, with nothing printed yet, starts there.
	readFrom time.Time
	emitErr  error // printing failed: not a connection's fault
}

// emit prints d's line, and reports whether to go on (Count).
func (t *rabbitTail) emit(ctx context.Context, d *amqp.Delivery) (bool, error) {
	offset := rabbitmq.Offset(d)
	if t.cfg.Stream != "" && offset >= 0 && offset < t.next {
		return true, nil // a stream delivers from the start of the chunk that holds the offset asked for
	}
	line, err := appendRabbitLine(ctx, t.f, t.line[:0], t.cfg, d)
	t.line = line
	if err != nil {
		t.emitErr = err
		return false, err
	}
	t.out.Write(line)
	t.printed++
	if offset >= 0 {
		t.next = offset + 1
	}
	if err := t.out.Flush(); err != nil {
		t.emitErr = err
		return false, fmt.Errorf("write: %w", err)
	}
	return t.cfg.Count == 0 || t.printed < t.cfg.Count, nil
}

// once reads the stream, or follows the exchange, on t.conn; again is
// true after a reconnect.
func (t *rabbitTail) once(ctx context.Context, again bool) error {
	cfg := t.cfg
	emit := func(d *amqp.Delivery) (bool, error) { return t.emit(ctx, d) }
	if cfg.Stream == "" {
		return followExchange(ctx, t.conn, cfg, t.log, emit, again)
	}
	r := rabbitmq.StreamRead{Stream: cfg.Stream, ToEnd: !cfg.Follow}
	switch {
	case again && t.printed > 0:
		r.Offset = t.next
	case again && cfg.Start == FromEnd:
		r.Offset = t.readFrom
	case cfg.Start == FromEnd:
		r.Offset = "next"
		t.readFrom = time.Now()
	case cfg.Start == FromBeginning:
		r.Offset = "first"
	case cfg.Start == FromTime:
		r.Offset = cfg.Since
	case cfg.Start == FromOffsets:
		r.Offset = cfg.Offset
	}
	if r.ToEnd && cfg.Start == FromEnd {
		return nil // from the end to the end: nothing
	}
	if !again {
		t.log.Info("reading", "stream", cfg.Stream, "from", startNames[cfg.Start], "follow", cfg.Follow)
	}
	err := rabbitmq.ReadStream(ctx, t.conn, r, emit)
	switch {
	case errors.Is(err, rabbitmq.ErrNotStream):
		return relay.ConfigErr("stream", "%s: tail reads a queue only when it is a stream, which it can read without consuming; follow the exchange it is bound to instead", err)
	case errors.Is(err, rabbitmq.ErrNoQueue):
		return relay.ConfigErr("stream", "%v", err)
	}
	return err
}

// startFlag names the flag of a start, for errors.
func startFlag(s Start) string {
	switch s {
	case FromTime:
		return "since"
	case FromOffsets:
		return "offset"
	}
	return "from-beginning"
}

// followExchange binds a temporary queue to cfg.Exchange and prints what
// arrives in it until ctx ends or print says stop; again is true after a
// reconnect. The consumer's end is errConsumerEnded.
func followExchange(ctx context.Context, conn *amqp.Connection, cfg *RabbitMQConfig, log *slog.Logger, emit func(*amqp.Delivery) (bool, error), again bool) error {
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("open a channel: %w", err)
	}
	defer ch.Close()
	if err := ch.ExchangeDeclarePassive(cfg.Exchange, amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
		if rabbitmq.AMQPCode(err) == amqp.NotFound {
			return relay.ConfigErr("rabbitmq-exchange", "exchange %s does not exist", cfg.Exchange)
		}
		return fmt.Errorf("exchange %s: %w", cfg.Exchange, err)
	}
	if ch, err = conn.Channel(); err != nil {
		return fmt.Errorf("open a channel: %w", err)
	}
	defer ch.Close()
	var id [6]byte
	rand.Read(id[:])
	name := "cdc-relay.tail." + hex.EncodeToString(id[:])
	q, err := ch.QueueDeclare(name, false, true, true, false, amqp.Table{
		"x-queue-type":       "classic",
		"x-max-length":       cfg.MaxLength,
		"x-max-length-bytes": cfg.MaxLengthBytes,
		"x-overflow":         "drop-head",
	})
	if err != nil {
		return fmt.Errorf("declare tail's temporary queue %s (it needs configure permission on that name): %w", name, err)
	}
	if err := ch.QueueBind(q.Name, cfg.Pattern, cfg.Exchange, false, nil); err != nil {
		return fmt.Errorf("bind tail's queue to exchange %s with %q: %w", cfg.Exchange, cfg.Pattern, err)
	}
	if err := ch.Qos(rabbitPrefetch, 0, false); err != nil {
		return fmt.Errorf("set the prefetch: %w", err)
	}
	msgs, err := ch.Consume(q.Name, "cdc-relay-tail", false, true, false, false, nil)
	if err != nil {
		return fmt.Errorf("consume tail's queue: %w", err)
	}
	log.Info("following", "exchange", cfg.Exchange, "pattern", cfg.Pattern, "queue", q.Name, "max_length", cfg.MaxLength)
	if !again {
		log.Warn("while tail follows the exchange, its queue takes every message the pattern matches, so the relay sees none of them as unroutable: an event that no other queue is bound for is printed here and not dead-lettered; tail a stream bound to the exchange, or use a narrower pattern, where that matters",
			"exchange", cfg.Exchange, "pattern", cfg.Pattern)
	}
	for {
		select {
		case d, ok := <-msgs:
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return errConsumerEnded
			}
			more, err := emit(&d)
			d.Ack(false)
			if err != nil || !more {
				return err
			}
		case <-ctx.Done():
			return nil // interrupted: what was printed stands
		}
	}
}

// rabbitOwnHeaders are the headers a line shows elsewhere: the offset.
var rabbitOwnHeaders = map[string]bool{rabbitmq.OffsetHeader: true}

// appendRabbitLine appends d's line: the members of a Kafka line (topic
// and partition null, offset the stream offset or null, timestamp the
// AMQP timestamp, key the aggregate_id header), then exchange,
// routing_key, stream, message_id, type, content_type, app_id and
// delivery_mode. Headers that are not UTF-8 text are {"base64": ...}.
func appendRabbitLine(ctx context.Context, f *tailFormatter, dst []byte, cfg *RabbitMQConfig, d *amqp.Delivery) ([]byte, error) {
	var hs []kgo.RecordHeader
	var key []byte
	for _, h := range rabbitmq.TextHeaders(d.Headers) {
		if rabbitOwnHeaders[h.Key] {
			continue
		}
		hs = append(hs, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		if h.Key == "aggregate_id" {
			key = h.Value
		}
	}
	subject := cfg.Subject(d.Exchange, d.RoutingKey)
	k := decoded{json: []byte("null")}
	if key != nil {
		k = decoded{json: plainJSON(nil, key, f.keyFormat == recordpkg.KeyString)}
	}
	val, err := f.data(ctx, subject, d.Body, false)
	if err != nil {
		return dst, err
	}
	headers := headersJSON(nil, hs)
	ts := ""
	if !d.Timestamp.IsZero() {
		ts = d.Timestamp.UTC().Format(tailTimeLayout)
	}
	offset := rabbitmq.Offset(d)
	if cfg.Pretty {
		return appendRabbitPretty(dst, cfg, d, offset, ts, k.json, headers, val), nil
	}
	str := func(dst []byte, s string) []byte {
		if s == "" {
			return append(dst, "null"...)
		}
		return schemaregistry.AppendQuoted(dst, s)
	}
	dst = append(dst, `{"topic":null,"partition":null,"offset":`...)
	if offset >= 0 {
		dst = strconv.AppendInt(dst, offset, 10)
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"timestamp":`...)
	dst = str(dst, ts)
	dst = appendContent(dst, k.json, headers, val)
	dst = append(dst, `,"exchange":`...)
	dst = schemaregistry.AppendQuoted(dst, d.Exchange) // "" is the default exchange
	dst = append(dst, `,"routing_key":`...)
	dst = schemaregistry.AppendQuoted(dst, d.RoutingKey)
	dst = append(dst, `,"stream":`...)
	dst = str(dst, cfg.Stream)
	dst = append(dst, `,"message_id":`...)
	dst = str(dst, d.MessageId)
	dst = append(dst, `,"type":`...)
	dst = str(dst, d.Type)
	dst = append(dst, `,"content_type":`...)
	dst = str(dst, d.ContentType)
	dst = append(dst, `,"app_id":`...)
	dst = str(dst, d.AppId)
	dst = append(dst, `,"delivery_mode":`...)
	dst = strconv.AppendInt(dst, int64(d.DeliveryMode), 10)
	return append(dst, "}\n"...), nil
}

// appendRabbitPretty is --pretty for a message: a line naming it, then its
// properties, key, headers one per line and value indented, and a blank
// line.
func appendRabbitPretty(dst []byte, cfg *RabbitMQConfig, d *amqp.Delivery, offset int64, ts string, key, headers []byte, val decoded) []byte {
	if cfg.Stream != "" {
		dst = fmt.Appendf(dst, "stream %s offset %d", cfg.Stream, offset)
	} else {
		dst = fmt.Appendf(dst, "exchange %s", cfg.Exchange)
	}
	dst = fmt.Appendf(dst, "  routing key %s  %s", strconv.Quote(d.RoutingKey), ts)
	if val.framed {
		dst = fmt.Appendf(dst, "  schema %d", val.schemaID)
		if val.subject != "" {
			dst = fmt.Appendf(dst, " (%s)", val.subject)
		}
	}
	dst = fmt.Appendf(dst, "\nmessage_id: %s  type: %s  content_type: %s  app_id: %s  delivery_mode: %d\nkey: %s\n",
		d.MessageId, d.Type, d.ContentType, d.AppId, d.DeliveryMode, key)
	var hs map[string]json.RawMessage
	if err := json.Unmarshal(headers, &hs); err == nil && len(hs) > 0 {
		dst = append(dst, "headers:\n"...)
		for _, h := range rabbitmq.TextHeaders(d.Headers) {
			if v, ok := hs[h.Key]; ok {
				dst = fmt.Appendf(dst, "  %s: %s\n", h.Key, v)
			}
		}
	}
	dst = append(dst, "value: "...)
	dst = appendIndented(dst, val.json)
	return append(dst, "\n\n"...)
}
