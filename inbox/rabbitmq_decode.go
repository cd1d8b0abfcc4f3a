package inbox

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"strconv"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/cdc-relay/cdc-relay/internal/backoff"
)

// The AMQP headers the relay writes besides the Kafka record's (id,
// event_type, aggregate_type, traceparent, ...): the aggregate, which on
// Kafka is the record key.
const (
	HeaderAggregateID   = "aggregate_id"
	HeaderAggregateType = "aggregate_type"
)

// Content types of a RabbitMQ message's value (its content_type property;
// parameters such as charset are ignored).
const (
	// ContentTypeJSON is the payload's JSON object, decoded into T with
	// encoding/json (numbers into a map as json.Number: never a float).
	// A message without content_type is taken as JSON too.
	ContentTypeJSON = "application/json"
	// ContentTypeAvro is Avro in the Confluent wire format (0x00, a
	// 4-byte schema id, the body), decoded with the writer schema from
	// RabbitMQConfig.RegistryURL.
	ContentTypeAvro = "application/avro"
	// ContentTypeCloudEvents is a structured CloudEvent: a JSON envelope
	// whose data (JSON) or data_base64 (bytes of datacontenttype) is the
	// value. Its id, type and subject stand in for missing properties.
	ContentTypeCloudEvents = "application/cloudevents+json"
)

// amqpHeader returns an AMQP header's value as text ("" when absent).
func amqpHeader(h amqp.Table, key string) string {
	v, ok := h[key]
	if !ok {
		return ""
	}
	return headerText(v)
}

// headerText renders an AMQP table value as a Kafka header's text.
func headerText(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	case nil:
		return ""
	case bool:
		return strconv.FormatBool(v)
	case int8, int16, int32, int64, uint8, uint16, uint32, uint64, int:
		return fmt.Sprint(v)
	case time.Time:
		return v.UTC().Format(time.RFC3339)
	}
	return fmt.Sprint(v)
}

// cloudEventAttr returns a binary-mode CloudEvents attribute of a message:
// the AMQP binding's cloudEvents_ (or cloudEvents:) header, or the Kafka
// binding's ce_ header.
func cloudEventAttr(h amqp.Table, attr string) string {
	for _, k := range [...]string{"cloudEvents_" + attr, "cloudEvents:" + attr, "ce_" + attr} {
		if v := amqpHeader(h, k); v != "" {
			return v
		}
	}
	return ""
}

// deliveryID is the dedupe key of a delivery as far as its properties and
// headers tell: the id header (the relay's event id), else message_id
// (the event id too, unless --builtin-headers leaves the header out), else
// a CloudEvents id. A structured CloudEvent without them gets its id from
// the body (prepare). The relay's placeholder message_id of a row without
// an id ("seq-" and its sequence number, not stable across restarts) is
// none.
func deliveryID(d *amqp.Delivery) string {
	if id := amqpHeader(d.Headers, "id"); id != "" {
		return id
	}
	if d.MessageId != "" && (d.AppId != relayAppID || !strings.HasPrefix(d.MessageId, "seq-")) {
		return d.MessageId
	}
	return cloudEventAttr(d.Headers, "id")
}

// relayAppID is the app_id of the relay's messages.
const relayAppID = "cdc-relay"

// aggregateKey is what orders a delivery: its aggregate type and id, or,
// without an aggregate_id, its id (no order to keep).
func aggregateKey(d *amqp.Delivery) string {
	id := amqpHeader(d.Headers, HeaderAggregateID)
	if id == "" {
		id = cloudEventAttr(d.Headers, "subject")
	}
	if id == "" {
		return "\x00" + deliveryID(d)
	}
	return amqpHeader(d.Headers, HeaderAggregateType) + "\x00" + id
}

// rabbitEvent builds the handler's view of a delivery, without its value.
// Topic is the queue and Offset the delivery tag (channel-scoped).
func rabbitEvent[T any](queue string, d *amqp.Delivery) *Event[T] {
	ev := &Event[T]{Topic: queue, Offset: int64(d.DeliveryTag), Headers: make(map[string]string, len(d.Headers)),
		Attempt: int(deliveryCount(d)) + 1}
	for k, v := range d.Headers {
		ev.Headers[k] = headerText(v)
	}
	ev.ID = deliveryID(d)
	ev.Type = d.Type
	if ev.Type == "" {
		ev.Type = ev.Headers["event_type"]
	}
	if ev.Type == "" {
		ev.Type = cloudEventAttr(d.Headers, "type")
	}
	ev.AggregateType = ev.Headers[HeaderAggregateType]
	ev.AggregateID = ev.Headers[HeaderAggregateID]
	if ev.AggregateID == "" {
		ev.AggregateID = cloudEventAttr(d.Headers, "subject")
	}
	ev.Key = []byte(ev.AggregateID)
	return ev
}

// structuredEvent is the part of a structured CloudEvent the inbox reads.
type structuredEvent struct {
	SpecVersion     string          `json:"specversion"`
	ID              string          `json:"id"`
	Type            string          `json:"type"`
	Subject         string          `json:"subject"`
	DataContentType string          `json:"datacontenttype"`
	Data            json.RawMessage `json:"data"`
	DataBase64      *string         `json:"data_base64"`
}

// prepare builds the event of d and decodes its value. A delivery that
// can never be processed gives a reason (it is dead-lettered); a registry
// outage is waited out until ctx ends (the caller checks ctx).
func (r *RabbitMQConsumer[T]) prepare(ctx context.Context, d *amqp.Delivery) (ev *Event[T], reason string) {
	ev = rabbitEvent[T](r.cfg.Queue, d)
	ct, body := mediaType(d.ContentType), d.Body
	if ct == ContentTypeCloudEvents {
		var se structuredEvent
		if err := json.Unmarshal(body, &se); err != nil {
			return ev, ReasonUndecodable + ": the structured CloudEvent is not a JSON object: " + err.Error()
		}
		if se.SpecVersion == "" {
			return ev, ReasonUndecodable + ": the structured CloudEvent has no specversion"
		}
		ev.ID = firstOf(ev.ID, se.ID)
		ev.Type = firstOf(ev.Type, se.Type)
		ev.AggregateID = firstOf(ev.AggregateID, se.Subject)
		ev.Key = []byte(ev.AggregateID)
		ct, body = mediaType(se.DataContentType), se.Data
		if se.DataBase64 != nil {
			b, err := base64.StdEncoding.DecodeString(*se.DataBase64)
			if err != nil {
				return ev, ReasonUndecodable + ": the CloudEvent's data_base64: " + err.Error()
			}
			body = b
		} else if len(bytes.TrimSpace(body)) == 0 || string(body) == "null" {
			body = nil
		}
	}
	if ev.ID == "" {
		return ev, ReasonNoID + ": the message has no message_id (nor id header) to deduplicate on"
	}
	if len(body) == 0 {
		ev.Null = true
		return ev, ""
	}
	switch {
	case ct == "" || ct == ContentTypeJSON || ct == "text/json" || strings.HasSuffix(ct, "+json"):
		if err := decodeJSON(body, &ev.Value); err != nil {
			return ev, ReasonUndecodable + ": " + err.Error()
		}
		return ev, ""
	case ct == ContentTypeAvro || ct == "avro/binary" || ct == "application/vnd.apache.avro+binary":
		if r.core.schemas == nil {
			return ev, ReasonUnknownSchema + ": an Avro value, and RegistryURL is not set"
		}
		b := backoff.Backoff{Min: r.core.cfg.RetryMin, Max: r.core.cfg.RetryMax}
		for {
			id, err := decode(ctx, r.core.schemas, body, &ev.Value)
			if err == nil {
				ev.SchemaID = int(id)
				return ev, ""
			}
			var de *decodeError
			if errors.As(err, &de) {
				return ev, err.Error()
			}
			r.log.Warn("schema registry unavailable; retrying", "error", err, "consecutive_errors", b.Attempts()+1)
			if b.Wait(ctx) != nil {
				return ev, ""
			}
		}
	}
	return ev, ReasonUndecodable + ": content_type " + strconv.Quote(d.ContentType) + " is not " +
		ContentTypeJSON + ", " + ContentTypeAvro + " or " + ContentTypeCloudEvents
}

// decodeJSON decodes one JSON value into out, numbers as json.Number where
// out leaves the type open, with nothing after it.
func decodeJSON[T any](b []byte, out *T) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("the JSON value does not decode into %T: %w", *out, err)
	}
	if dec.More() {
		return errors.New("bytes left after the JSON value")
	}
	return nil
}

// mediaType is a content type without its parameters, lower case.
func mediaType(ct string) string {
	if ct == "" {
		return ""
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return strings.ToLower(strings.TrimSpace(ct))
	}
	return mt
}

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
