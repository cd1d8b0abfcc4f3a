package record

import (
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/cdc-relay/cdc-relay/internal/debeziumjson"
	"github.com/cdc-relay/cdc-relay/publisher"
)

// The CloudEvents Kafka protocol binding, binary content mode: attributes
// go in headers named ce_<attribute>, the data is the record value, and
// content-type carries datacontenttype.
const (
	HeaderCESpecVersion = "ce_specversion"
	HeaderCEID          = "ce_id"
	HeaderCESource      = "ce_source"
	HeaderCEType        = "ce_type"
	HeaderCESubject     = "ce_subject"
	HeaderCETime        = "ce_time"
	HeaderContentType   = "content-type"
)

// ContentTypeStructured is the content-type header of a structured-mode
// record: the value is a CloudEvent in the JSON event format.
const ContentTypeStructured = "application/cloudevents+json"

// CloudEventsMode is how --cloudevents writes an event's attributes
// (--cloudevents-mode).
type CloudEventsMode uint8

// The CloudEvents content modes.
const (
	// CloudEventsBinary puts the attributes in ce_* headers and leaves the
	// value as it is. The default.
	CloudEventsBinary CloudEventsMode = iota
	// CloudEventsStructured makes the value a CloudEvent in the JSON event
	// format (application/cloudevents+json): the attributes, then the
	// event as "data" (JSON values) or "data_base64" (Avro values, in the
	// Confluent wire format).
	CloudEventsStructured
)

var cloudEventsModes = [...]string{"binary", "structured"}

// String returns the mode's flag value.
func (m CloudEventsMode) String() string { return cloudEventsModes[m] }

// ParseCloudEventsMode parses --cloudevents-mode.
func ParseCloudEventsMode(s string) (CloudEventsMode, error) {
	for i, name := range cloudEventsModes {
		if s == name {
			return CloudEventsMode(i), nil
		}
	}
	return 0, fmt.Errorf("%q is not a CloudEvents mode: use binary or structured", s)
}

// cloudEvents writes the CloudEvents attributes when on.
type cloudEvents struct {
	on          bool
	structured  bool
	avro        bool // the data is Avro: data_base64
	source      []byte
	contentType []byte
}

func newCloudEvents(source string, vf ValueFormat, mode CloudEventsMode) cloudEvents {
	ct := "application/avro"
	if vf == ValueJSON {
		ct = "application/json"
	}
	return cloudEvents{on: true, structured: mode == CloudEventsStructured, avro: vf != ValueJSON,
		source: []byte(source), contentType: []byte(ct)}
}

// append appends the CloudEvents headers of an event: id, type and subject
// from the row, time from the transaction's commit (RFC 3339 with
// milliseconds, UTC), written into arena.
func (c *cloudEvents) append(headers []publisher.Header, arena []byte, r *row) ([]publisher.Header, []byte) {
	start := len(arena)
	arena = r.commitTime.UTC().AppendFormat(arena, ceTime)
	return append(headers,
		publisher.Header{Key: HeaderCESpecVersion, Value: specVersion},
		publisher.Header{Key: HeaderCEID, Value: r.id},
		publisher.Header{Key: HeaderCESource, Value: c.source},
		publisher.Header{Key: HeaderCEType, Value: r.eventType},
		publisher.Header{Key: HeaderCESubject, Value: r.aggID},
		publisher.Header{Key: HeaderCETime, Value: arena[start:len(arena):len(arena)]},
		publisher.Header{Key: HeaderContentType, Value: c.contentType},
	), arena
}

var (
	specVersion       = []byte("1.0")
	structuredContent = []byte(ContentTypeStructured)
)

// reserved returns an error when the headers jsonb set a header the
// CloudEvents binding owns: a second ce_id would let a consumer that reads
// the last header of a name see the row's value instead of the event's.
// In structured mode the relay writes only content-type, but a ce_* header
// beside the envelope would contradict it, so the names stay reserved.
func (c *cloudEvents) reserved(fromJSON []publisher.Header) error {
	for _, h := range fromJSON {
		switch h.Key {
		case HeaderCESpecVersion, HeaderCEID, HeaderCESource, HeaderCEType, HeaderCESubject, HeaderCETime, HeaderContentType:
			if c.structured {
				return fmt.Errorf("headers column sets %q, a CloudEvents header name (--cloudevents-mode structured writes content-type and puts the attributes in the value)", h.Key)
			}
			return fmt.Errorf("headers column sets %q, a CloudEvents header the relay writes (--cloudevents)", h.Key)
		}
	}
	return nil
}

// envelopeSlack is room for a structured envelope beyond its data and the
// row's bytes: the member names, specversion, the time and the content
// type.
const envelopeSlack = 160

// envelopeSize estimates the bytes of a structured envelope around a
// payload of n JSON bytes, for sizing the record's buffer.
func (c *cloudEvents) envelopeSize(src []byte, n int) int {
	size := envelopeSlack + len(c.source) + len(src)
	if c.avro {
		// The Avro bytes come first (in the buffer's share of n), then
		// their base64 in the envelope, 4/3 as long: the Avro body is
		// almost always smaller than its JSON.
		size += n*4/3 + 4
	}
	return size
}

// appendHead appends a structured envelope up to its data member's value:
// {"specversion":"1.0","id":…,"source":…,"type":…,"subject":…,"time":…,
// "datacontenttype":…,"data": (or "data_base64":" for Avro).
func (c *cloudEvents) appendHead(dst []byte, r *row) []byte {
	dst = append(dst, `{"specversion":"1.0","id":`...)
	dst = debeziumjson.AppendString(dst, r.id)
	dst = append(dst, `,"source":`...)
	dst = debeziumjson.AppendString(dst, c.source)
	dst = append(dst, `,"type":`...)
	dst = debeziumjson.AppendString(dst, r.eventType)
	dst = append(dst, `,"subject":`...)
	dst = debeziumjson.AppendString(dst, r.aggID)
	dst = append(dst, `,"time":"`...)
	dst = r.commitTime.UTC().AppendFormat(dst, ceTime)
	dst = append(dst, `","datacontenttype":"`...)
	dst = append(dst, c.contentType...)
	if c.avro {
		return append(dst, `","data_base64":"`...)
	}
	return append(dst, `","data":`...)
}

// appendAvroEnvelope appends the structured envelope of an Avro value.
func (c *cloudEvents) appendAvroEnvelope(dst []byte, r *row, value []byte) []byte {
	dst = c.appendHead(dst, r)
	dst = base64.StdEncoding.AppendEncode(dst, value)
	return append(dst, `"}`...)
}

// ceTime is the layout of ce_time: RFC 3339 with milliseconds.
const ceTime = "2006-01-02T15:04:05.000Z07:00"

// The CloudEvents AMQP protocol binding, binary content mode: attributes
// go in application properties named cloudEvents_<attribute>, and
// datacontenttype in the message's content-type property.
const (
	AMQPCEPrefix    = "cloudEvents_"
	AMQPContentType = "content_type" // the AMQP 0-9-1 basic property
)

// AMQPBinaryName maps a header key of the CloudEvents Kafka binding to its
// AMQP binary-mode name, for a sink that turns the record's headers into
// AMQP ones: ce_<attribute> becomes the application property (header)
// cloudEvents_<attribute>; content-type becomes the content_type property
// (property true). Any other key is not a CloudEvents header: ok is false.
// The relay's own attributes map without allocating.
func AMQPBinaryName(kafkaKey string) (name string, property, ok bool) {
	if name, ok := amqpNames[kafkaKey]; ok {
		return name, kafkaKey == HeaderContentType, true
	}
	if attr, found := strings.CutPrefix(kafkaKey, "ce_"); found && attr != "" {
		return AMQPCEPrefix + attr, false, true // an extension attribute
	}
	return "", false, false
}

// amqpNames are the AMQP names of the headers the relay writes.
var amqpNames = map[string]string{
	HeaderCESpecVersion: AMQPCEPrefix + "specversion",
	HeaderCEID:          AMQPCEPrefix + "id",
	HeaderCESource:      AMQPCEPrefix + "source",
	HeaderCEType:        AMQPCEPrefix + "type",
	HeaderCESubject:     AMQPCEPrefix + "subject",
	HeaderCETime:        AMQPCEPrefix + "time",
	HeaderContentType:   AMQPContentType,
}
