package rabbitmq

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Reading a stream (x-queue-type: stream) without consuming it, for the
// operator tools (tail, dlq): a consumer with an x-stream-offset, manual
// acks and a prefetch, which leaves every message in the stream. AMQP
// 0-9-1 gives a stream reader no end, so a bounded read publishes a marker
// with confirms and stops at it, as CheckpointStore.Load does.

// MarkerType is the AMQP type of a tool's end marker, and markerPrefix
// begins its message id: a message is a marker only with both, so that an
// event whose type is "marker" is never taken for one. Readers pass
// markers by; ReadStream stops at its own.
const (
	MarkerType   = "cdc-relay.marker"
	markerPrefix = "cdc-relay-marker-"
)

// IsMarker reports whether d is a tool's end marker.
func IsMarker(d *amqp.Delivery) bool {
	return d.Type == MarkerType && strings.HasPrefix(d.MessageId, markerPrefix)
}

// OffsetHeader is the header RabbitMQ adds to each message a stream
// delivers: the message's offset in the stream (an int64).
const OffsetHeader = "x-stream-offset"

// ErrNotStream is a queue read as a stream that is not one (a classic or
// quorum queue refuses x-stream-offset): reading it would consume it.
var ErrNotStream = errors.New("not a stream (x-queue-type: stream)")

// ErrNoQueue is a stream or queue that does not exist (404 NOT_FOUND).
var ErrNoQueue = errors.New("does not exist")

// Dial opens a connection for a tool, named name in the broker's
// connection list.
func Dial(url string, tlsCfg *tls.Config, name string) (*amqp.Connection, error) {
	return amqp.DialConfig(url, amqp.Config{Heartbeat: 10 * time.Second, TLSClientConfig: tlsCfg, Locale: "en_US",
		Properties: amqp.Table{"connection_name": name, "product": "cdc-relay"}})
}

// StreamRead is one read of a stream.
type StreamRead struct {
	Stream string
	// Offset is where the read starts: "first", "last", "next", an int64
	// offset or a time.Time (the first chunk at or after it). Default
	// "first".
	Offset any
	// ToEnd publishes a marker with confirms first and ends the read at it:
	// the end of the stream as of the start. Without it the read follows
	// the stream until ctx ends or fn says stop.
	ToEnd bool
	// Prefetch is how many deliveries may be unacked; default 200.
	Prefetch int
}

// Offset is the stream offset RabbitMQ gave d; -1 when it gave none.
func Offset(d *amqp.Delivery) int64 {
	switch v := d.Headers[OffsetHeader].(type) {
	case int64:
		return v
	case int32:
		return int64(v)
	case int:
		return int64(v)
	}
	return -1
}

// Absent reports whether err is a 404 for a durable queue or stream whose
// node is down or still starting ("home node … is down or
// inaccessible"), as every durable queue is while a restarted node
// recovers them: it exists, and asking again later helps. Any other 404
// is a queue or exchange that does not exist.
func Absent(err error) bool {
	var aerr *amqp.Error
	return errors.As(err, &aerr) && aerr.Code == amqp.NotFound && strings.Contains(aerr.Reason, "is down or inaccessible")
}

// Missing reports whether err is a 404 for a queue, stream or exchange
// that does not exist (not one that is Absent).
func Missing(err error) bool { return AMQPCode(err) == amqp.NotFound && !Absent(err) }

// AMQPCode is the AMQP reply code of err (404, 403, 406...); 0 when err is
// not an *amqp.Error.
func AMQPCode(err error) int {
	var aerr *amqp.Error
	if errors.As(err, &aerr) {
		return aerr.Code
	}
	return 0
}

// ReadStream reads r.Stream on a channel of its own on conn and calls fn
// for each message but markers, in offset order, until fn returns false,
// the marker is reached (ToEnd) or ctx ends (nil: following ends so).
// Every delivery is acked: a stream keeps its messages, an ack only grants
// credit. A queue that is not a stream is ErrNotStream, a missing one
// ErrNoQueue, and neither is consumed. A following read whose consumer
// stalls ends with ErrStalled (stall.go).
func ReadStream(ctx context.Context, conn *amqp.Connection, r StreamRead, fn func(d *amqp.Delivery) (bool, error)) error {
	fail := func(err error) error { return fmt.Errorf("read stream %s: %w", r.Stream, err) }
	ch, err := conn.Channel()
	if err != nil {
		return fail(err)
	}
	defer ch.Close()
	offset := r.Offset
	if offset == nil {
		offset = "first"
	}
	var msgs <-chan amqp.Delivery
	setup := func() error {
		if _, err := ch.QueueDeclarePassive(r.Stream, true, false, false, false, nil); err != nil {
			if Missing(err) {
				return fmt.Errorf("stream %s %w", r.Stream, ErrNoQueue)
			}
			return fail(err)
		}
		prefetch := r.Prefetch
		if prefetch <= 0 {
			prefetch = 200
		}
		if err := ch.Qos(prefetch, 0, false); err != nil {
			return fail(err)
		}
		// Consume, not ConsumeWithContext: that cancels from a goroutine of
		// its own, racing the channel's Close.
		var err error
		if msgs, err = ch.Consume(r.Stream, "", false, false, false, false, amqp.Table{OffsetHeader: offset}); err != nil {
			if AMQPCode(err) == amqp.PreconditionFailed {
				return fmt.Errorf("queue %s is %w: %v", r.Stream, ErrNotStream, err)
			}
			return fail(err)
		}
		return nil
	}
	if r.ToEnd {
		err = setup()
	} else {
		err = boundSetup(conn, setup)
	}
	if err != nil {
		if errors.Is(err, ErrStalled) {
			return fail(err)
		}
		return err
	}
	// The marker after the consumer is attached: a queue that is not a
	// stream refused it, and gets no marker.
	marker := ""
	if r.ToEnd {
		if marker, err = PublishMarker(ctx, conn, r.Stream); err != nil {
			return fail(err)
		}
	}
	// A following read watches its consumer (stall.go).
	var wd *watchdog
	var ticks <-chan time.Time
	var probes <-chan probeResult // nil, never ready, without a watchdog
	if !r.ToEnd {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		wd = newWatchdog(conn, r.Stream, offset)
		if stallForTest != nil {
			msgs = stallForTest(msgs)
		}
		ticker := time.NewTicker(time.Second)
		defer ticker.Stop()
		ticks, probes, ctx = ticker.C, wd.results, wctx
	}
	for {
		select {
		case d, ok := <-msgs:
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return fail(errors.New("the broker closed the consumer (the channel or the connection closed)"))
			}
			d.Ack(false)
			if wd != nil {
				wd.given(&d)
			}
			if IsMarker(&d) {
				if marker != "" && d.MessageId == marker {
					return nil
				}
				continue
			}
			more, err := fn(&d)
			if err != nil || !more {
				return err
			}
		case <-ticks:
			if err := wd.tick(ctx); err != nil {
				return fail(err)
			}
		case res := <-probes:
			wd.probed(res)
		case <-ctx.Done():
			if r.ToEnd {
				return fail(ctx.Err())
			}
			return nil
		}
	}
}

// PublishMarker appends an end marker to stream, with confirms, and
// returns its message id.
func PublishMarker(ctx context.Context, conn *amqp.Connection, stream string) (string, error) {
	var id [12]byte
	rand.Read(id[:])
	marker := markerPrefix + hex.EncodeToString(id[:])
	c, err := NewConfirmer(conn)
	if err != nil {
		return "", err
	}
	defer c.Close()
	errs, err := c.Publish(ctx, []Outgoing{{RoutingKey: stream, Publishing: amqp.Publishing{MessageId: marker, Type: MarkerType}}})
	if err == nil {
		err = errs[0]
	}
	if err != nil {
		return "", fmt.Errorf("publish an end marker: %w", err)
	}
	return marker, nil
}

// ErrReturned is a message the broker returned: no queue is bound for
// its routing key (unroutable).
var ErrReturned = errors.New("unroutable: the broker returned it (no queue is bound for its routing key)")

// ErrNacked is a message the broker refused (a full queue with
// overflow=reject-publish, or a queue that is not available).
var ErrNacked = errors.New("the broker refused it (nack)")

// Outgoing is one message for a Confirmer.
type Outgoing struct {
	Exchange, RoutingKey string
	Publishing           amqp.Publishing
}

// Confirmer publishes batches of messages with mandatory on a confirm
// channel of its own, and tells each message's fate. It is used by one
// goroutine.
type Confirmer struct {
	ch      *amqp.Channel
	returns chan amqp.Return
	closed  chan *amqp.Error
}

// confirmBatch bounds a batch: the returns channel holds that many.
const confirmBatch = 256

// NewConfirmer opens a confirm channel on conn.
func NewConfirmer(conn *amqp.Connection) (*Confirmer, error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, err
	}
	if err := ch.Confirm(false); err != nil {
		ch.Close()
		return nil, err
	}
	return &Confirmer{ch: ch, returns: ch.NotifyReturn(make(chan amqp.Return, confirmBatch)), closed: ch.NotifyClose(make(chan *amqp.Error, 1))}, nil
}

// Close closes the channel.
func (c *Confirmer) Close() { c.ch.Close() }

// Publish sends msgs, persistent, with mandatory and streaming confirms,
// and waits for every confirm. It returns each message's fate (nil:
// confirmed and routed; ErrReturned; ErrNacked), or an error when the
// channel failed: then what became of the batch is unknown. Returns carry
// no delivery tag, so they are matched by message id: a batch is cut
// where an id repeats.
func (c *Confirmer) Publish(ctx context.Context, msgs []Outgoing) ([]error, error) {
	out := make([]error, len(msgs))
	for start := 0; start < len(msgs); {
		ids := map[string]int{}
		end := start
		for end < len(msgs) && end-start < confirmBatch {
			if _, dup := ids[msgs[end].Publishing.MessageId]; dup {
				break
			}
			ids[msgs[end].Publishing.MessageId] = end
			end++
		}
		dcs := make([]*amqp.DeferredConfirmation, 0, end-start)
		for _, m := range msgs[start:end] {
			p := m.Publishing
			p.DeliveryMode = amqp.Persistent
			dc, err := c.ch.PublishWithDeferredConfirmWithContext(ctx, m.Exchange, m.RoutingKey, true, false, p)
			if err != nil {
				return nil, err
			}
			dcs = append(dcs, dc)
		}
		for i, dc := range dcs {
			ok, err := dc.WaitContext(ctx)
			if err != nil {
				return nil, err
			}
			if !ok {
				out[start+i] = ErrNacked
			}
		}
		// The broker sends a message's return before its confirm, and the
		// library hands the return over before it settles the confirm: every
		// return of the batch is in the channel now.
		for more := true; more; {
			select {
			case r, open := <-c.returns:
				if !open {
					more = false
					break
				}
				if i, ok := ids[r.MessageId]; ok {
					out[i] = fmt.Errorf("%w: %s (%d)", ErrReturned, r.ReplyText, r.ReplyCode)
				}
			default:
				more = false
			}
		}
		// A channel the broker closed (403 on the exchange, say) settles
		// what was unconfirmed as nacked: that is the channel's error.
		select {
		case err, open := <-c.closed:
			if open && err != nil {
				return nil, err
			}
			return nil, amqp.ErrClosed
		default:
		}
		start = end
	}
	return out, nil
}

// TextHeader is one AMQP header as text: Value is nil for a void value.
type TextHeader struct {
	Key   string
	Value []byte
}

// TextHeaders are t's headers in name order (an AMQP table keeps none),
// each value as text: a string or byte array as it is, a number, boolean
// or time in its usual text form (a time in RFC 3339), a table or array as
// JSON.
func TextHeaders(t amqp.Table) []TextHeader {
	out := make([]TextHeader, 0, len(t))
	for k, v := range t {
		out = append(out, TextHeader{Key: k, Value: headerText(v)})
	}
	slices.SortFunc(out, func(a, b TextHeader) int { return strings.Compare(a.Key, b.Key) })
	return out
}

func headerText(v any) []byte {
	switch v := v.(type) {
	case nil:
		return nil
	case string:
		return []byte(v)
	case []byte:
		return v
	case bool:
		return strconv.AppendBool(nil, v)
	case int8, int16, int32, int64, int, uint8, uint16, uint32, uint64:
		return fmt.Append(nil, v)
	case float32:
		return strconv.AppendFloat(nil, float64(v), 'g', -1, 32)
	case float64:
		return strconv.AppendFloat(nil, v, 'g', -1, 64)
	case time.Time:
		return []byte(v.UTC().Format(time.RFC3339))
	case amqp.Decimal:
		return decimalText(v)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Append(nil, v)
	}
	return b
}

// decimalText is an AMQP decimal in decimal notation: 1234 with scale 2 is
// 12.34.
func decimalText(d amqp.Decimal) []byte {
	v := int64(d.Value)
	sign := ""
	if v < 0 {
		sign, v = "-", -v
	}
	digits := strconv.FormatInt(v, 10)
	if d.Scale == 0 {
		return []byte(sign + digits)
	}
	for len(digits) <= int(d.Scale) {
		digits = "0" + digits
	}
	cut := len(digits) - int(d.Scale)
	return []byte(sign + digits[:cut] + "." + digits[cut:])
}
