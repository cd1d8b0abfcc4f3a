package rabbitmq

import (
	"fmt"
	"strconv"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/cdc-relay/cdc-relay/publisher"
	"github.com/cdc-relay/cdc-relay/record"
)

// AppID is every message's app_id.
const AppID = "cdc-relay"

// The headers a message carries besides the Kafka record's.
const (
	HeaderAggregateID   = "aggregate_id"
	HeaderAggregateType = "aggregate_type"
	// HeaderErrorKind and HeaderError are the dead letters' reason, as on
	// Kafka (record.HeaderErrorKind, record.HeaderError).
	HeaderErrorKind = "error_kind"
	HeaderError     = "error"
	// HeaderExchange and HeaderRoutingKey name where a dead letter the
	// sink made (unroutable, invalid_routing_key) was to go.
	HeaderExchange   = "exchange"
	HeaderRoutingKey = "routing_key"
)

// The error kinds of the dead letters the sink makes, labels of
// cdc_relay_dlq_events_total as the record builder's are.
const (
	KindUnroutable      = "unroutable"
	KindInvalidRouteKey = "invalid_routing_key"
)

// Format says how records become messages: the exchange, the routing key
// and the dead-letter stream, and what the values are.
type Format struct {
	Exchange   string
	RoutingKey *RoutingKey
	// DLQStream is the stream dead letters go to, through the default
	// exchange; a record whose Topic is DLQStream is a dead letter.
	DLQStream string
	// ContentType names the value format (application/json,
	// application/avro).
	ContentType string
	// CloudEvents renames the ce_* headers to cloudEvents_* and makes the
	// content-type header the content_type property (--cloudevents).
	CloudEvents bool
}

// Message is r as the message to publish, and the kind of dead letter it
// became ("" when it is none the sink made). It copies what it keeps of r,
// which the caller may release.
func (f *Format) Message(r *publisher.Record) (*Message, string) {
	m := &Message{Seq: r.Seq}
	p := &m.Publishing
	p.DeliveryMode = amqp.Persistent
	p.AppId = AppID
	p.MessageId = string(r.ID)
	if p.MessageId == "" {
		// A record without an id (the relay's handler gives every row
		// one; dlq redrive and replay do not): a return is matched by
		// message id, so it gets one of its own.
		p.MessageId = "seq-" + strconv.FormatUint(r.Seq, 10)
	}
	p.Type = string(r.EventType)
	p.Timestamp = r.Time
	p.Body = append([]byte(nil), r.Value...)
	p.Headers = make(amqp.Table, len(r.Headers)+2)
	p.ContentType = f.ContentType
	for _, h := range r.Headers {
		key := h.Key
		if f.CloudEvents {
			// The CloudEvents Kafka binding's ce_<attribute> headers are
			// the AMQP binding's cloudEvents_<attribute>, and its
			// content-type header the content_type property.
			if name, property, ok := record.AMQPBinaryName(key); property {
				p.ContentType = string(h.Value)
				continue
			} else if ok {
				key = name
			}
		}
		if h.Value == nil {
			p.Headers[key] = nil
		} else {
			p.Headers[key] = string(h.Value)
		}
	}
	if r.Topic == f.DLQStream {
		// The builder's dead letter: the row's payload as it was written,
		// and its key (the aggregate id, which a Kafka dead letter keeps
		// as its key) for dlq redrive to build the event again with.
		if r.Key != nil {
			p.Headers[HeaderAggregateID] = string(r.Key)
		}
		p.ContentType = "application/json"
		m.RoutingKey, m.DeadLetter = f.DLQStream, true
		return m, ""
	}
	p.Headers[HeaderAggregateType] = string(r.AggregateType)
	p.Headers[HeaderAggregateID] = string(r.AggregateID)
	m.Exchange = f.Exchange
	key := f.RoutingKey.Append(nil, r.EventType, r.AggregateType, r.AggregateID)
	if len(key) > MaxRoutingKeyBytes {
		m.RoutingKey = string(key[:MaxRoutingKeyBytes])
		return f.DeadLetter(m, KindInvalidRouteKey, fmt.Sprintf("the routing key is %d bytes, and AMQP takes at most %d: shorten the values --routing-key puts in it", len(key), MaxRoutingKeyBytes)), KindInvalidRouteKey
	}
	m.RoutingKey = string(key)
	return m, ""
}

// DeadLetter is the dead letter of m, for the reason of kind: the same
// message, with m's exchange and routing key (cut to 255 bytes) and the
// error_kind and error headers, to the dead-letter stream.
func (f *Format) DeadLetter(m *Message, kind, reason string) *Message {
	dl := &Message{Seq: m.Seq, RoutingKey: f.DLQStream, Publishing: m.Publishing, DeadLetter: true}
	headers := make(amqp.Table, len(m.Publishing.Headers)+4)
	for k, v := range m.Publishing.Headers {
		headers[k] = v
	}
	headers[HeaderExchange] = m.Exchange
	headers[HeaderRoutingKey] = m.RoutingKey
	headers[HeaderErrorKind] = kind
	headers[HeaderError] = reason
	dl.Publishing.Headers = headers
	if dl.Publishing.Timestamp.IsZero() {
		dl.Publishing.Timestamp = time.Now()
	}
	return dl
}
