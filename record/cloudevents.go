package record

import (
	"fmt"

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

// cloudEvents writes the CloudEvents headers when on.
type cloudEvents struct {
	on          bool
	source      []byte
	contentType []byte
}

func newCloudEvents(source string, vf ValueFormat) cloudEvents {
	ct := "application/avro"
	if vf == ValueJSON {
		ct = "application/json"
	}
	return cloudEvents{on: true, source: []byte(source), contentType: []byte(ct)}
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

var specVersion = []byte("1.0")

// reserved returns an error when the headers jsonb set a header the
// CloudEvents binding owns: a second ce_id would let a consumer that reads
// the last header of a name see the row's value instead of the event's.
func (c *cloudEvents) reserved(fromJSON []publisher.Header) error {
	for _, h := range fromJSON {
		switch h.Key {
		case HeaderCESpecVersion, HeaderCEID, HeaderCESource, HeaderCEType, HeaderCESubject, HeaderCETime, HeaderContentType:
			return fmt.Errorf("headers column sets %q, a CloudEvents header the relay writes (--cloudevents)", h.Key)
		}
	}
	return nil
}

// ceTime is the layout of ce_time: RFC 3339 with milliseconds.
const ceTime = "2006-01-02T15:04:05.000Z07:00"
