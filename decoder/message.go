package decoder

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cdc-relay/cdc-relay/internal/jsontext"
)

// message is the decoder's scratch space for the last logical message.
type message struct {
	id [len("FFFFFFFF/FFFFFFFF")]byte // the LSN text of an event without an id
}

// decodeMessage decodes 'M' (proto 1): Int8 flags (1 = transactional),
// Int64 LSN, String prefix, Int32 length, content. A message with the
// configured prefix is an outbox event: KindRow, with Row.Message set and
// the columns taken from its JSON content. Other messages are KindSkip.
func (d *Decoder) decodeMessage(data []byte, m *Message) error {
	if err := validateSkipped(data); err != nil {
		return err
	}
	if d.prefix == "" {
		*m = Message{}
		return nil
	}
	prefix, off, _ := cstring(data, 1+1+8)
	if string(prefix) != d.prefix {
		*m = Message{}
		return nil
	}
	n := binary.BigEndian.Uint32(data[off:])
	content := data[off+4 : off+4+int(n) : off+4+int(n)]
	*m = Message{Kind: KindRow}
	d.messageRow(&m.Row, content, binary.BigEndian.Uint64(data[2:]), data[1]&1 == 0)
	return nil
}

// messageRow fills r from a message's content, a JSON object with the
// outbox columns: aggregate_type, aggregate_id, event_type (strings),
// payload (an object, or null for a tombstone), headers (an object,
// optional) and id (a string or number, optional: the message's LSN in
// PostgreSQL's text form, stable across redelivery, when absent), each at
// most once. Content that is not such an object leaves the reason in
// r.Malformed. Content that is not valid JSON at all (RFC 8259, as
// jsontext checks it) names nothing: then every column is left unset and
// the id is the LSN, whatever the text seemed to say before the fault.
func (d *Decoder) messageRow(r *Row, content []byte, lsn uint64, nonTransactional bool) {
	clear(d.extraVals)
	*r = Row{Message: true, LSN: lsn, Content: content, NonTransactional: nonTransactional, Extra: d.extraVals, ExtraTypes: d.noTypes, ExtraTypmods: d.noMods}
	var syntax bool
	r.Malformed, syntax = d.messageColumns(r, content)
	if syntax {
		*r = Row{Message: true, LSN: lsn, Content: content, NonTransactional: nonTransactional, Extra: d.extraVals, ExtraTypes: d.noTypes, ExtraTypmods: d.noMods,
			Malformed: r.Malformed}
	}
	if r.ID == nil {
		r.ID = appendLSN(d.msg.id[:0], lsn)
	}
}

// The outbox columns of a message's content, as bits of a set.
const (
	seenID = 1 << iota
	seenAggregateType
	seenAggregateID
	seenEventType
	seenPayload
	seenHeaders
)

// messageColumns reads the columns of a message's content into r and
// returns why it is not an outbox event, "" when it is; syntax is true
// when the content is not valid JSON.
func (d *Decoder) messageColumns(r *Row, content []byte) (reason string, syntax bool) {
	obj, isNull, err := jsontext.OpenObject(content)
	switch {
	case err != nil && errors.Is(err, jsontext.ErrSyntax):
		return "message content is not valid JSON: " + err.Error(), true
	case err != nil:
		return "message content is not a JSON object: " + err.Error(), false
	case isNull:
		return fmt.Sprintf("message content is not a JSON object: got %q", content), false
	}
	var seen uint8
	for {
		key, raw, ok, err := obj.Next()
		if err != nil {
			return "message content is not valid JSON: " + err.Error(), true
		}
		if !ok {
			break
		}
		var bit uint8
		switch k := string(key); k {
		case "id":
			bit = seenID
			switch raw[0] {
			case '"':
				if r.ID, err = jsontext.Unquote(raw); err != nil {
					return "message id: " + err.Error(), true
				}
			case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
				r.ID = raw
			default:
				return "message id must be a string or a number, got " + jsontext.KindOf(raw[0]), false
			}
		case "aggregate_type", "aggregate_id", "event_type":
			if raw[0] != '"' {
				return "message " + k + " must be a string, got " + jsontext.KindOf(raw[0]), false
			}
			v, err := jsontext.Unquote(raw)
			if err != nil {
				return "message " + k + ": " + err.Error(), true
			}
			switch k {
			case "aggregate_type":
				bit, r.AggregateType = seenAggregateType, v
			case "aggregate_id":
				bit, r.AggregateID = seenAggregateID, v
			default:
				bit, r.EventType = seenEventType, v
			}
		case "payload":
			bit = seenPayload
			switch raw[0] {
			case '{':
				r.Payload = raw
			case 'n':
				r.PayloadNull = true
			default:
				return "message payload must be a JSON object, got " + jsontext.KindOf(raw[0]), false
			}
		case "headers":
			bit = seenHeaders
			switch raw[0] {
			case '{':
				r.Headers = raw
			case 'n':
			default:
				return "message headers must be a JSON object, got " + jsontext.KindOf(raw[0]), false
			}
		}
		if seen&bit != 0 {
			// Which one would a consumer take? jsonb keeps the last, the
			// Avro encoder refuses a field given twice: so does the relay.
			return "message content has " + string(key) + " twice", false
		}
		seen |= bit
	}
	switch {
	case r.AggregateType == nil:
		return "message content has no aggregate_type", false
	case r.AggregateID == nil:
		return "message content has no aggregate_id", false
	case r.EventType == nil:
		return "message content has no event_type", false
	case seen&seenPayload == 0:
		return "message content has no payload", false
	}
	return "", false
}

// appendLSN appends lsn in PostgreSQL's text form, %X/%X.
func appendLSN(dst []byte, lsn uint64) []byte {
	dst = appendHex(dst, uint32(lsn>>32))
	dst = append(dst, '/')
	return appendHex(dst, uint32(lsn))
}

func appendHex(dst []byte, v uint32) []byte {
	const digits = "0123456789ABCDEF"
	var b [8]byte
	i := len(b)
	for {
		i--
		b[i] = digits[v&0xF]
		v >>= 4
		if v == 0 {
			break
		}
	}
	return append(dst, b[i:]...)
}
