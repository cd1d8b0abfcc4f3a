package rabbitmq

import (
	"fmt"
	"strings"
)

// The placeholders a routing-key template may use.
const (
	PlaceholderEventType     = "{event_type}"
	PlaceholderAggregateType = "{aggregate_type}"
	PlaceholderAggregateID   = "{aggregate_id}"
)

// DefaultRoutingKey routes by event type, as queues are bound in the
// articles the relay follows.
const DefaultRoutingKey = PlaceholderEventType

// MaxRoutingKeyBytes is the longest routing key AMQP 0-9-1 carries (a
// shortstr); an event whose key is longer is a dead letter.
const MaxRoutingKeyBytes = 255

// RoutingKey is a parsed --routing-key template.
type RoutingKey struct {
	parts []keyPart
}

type keyPart struct {
	lit string
	ph  string // "" for a literal
}

// ParseRoutingKey parses a template over {event_type}, {aggregate_type}
// and {aggregate_id}; any other placeholder, or an unclosed '{', is an
// error.
func ParseRoutingKey(template string) (*RoutingKey, error) {
	rk := &RoutingKey{}
	rest := template
	for rest != "" {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			rk.parts = append(rk.parts, keyPart{lit: rest})
			break
		}
		if i > 0 {
			rk.parts = append(rk.parts, keyPart{lit: rest[:i]})
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return nil, fmt.Errorf("%q: unclosed '{': use %s, %s or %s", template, PlaceholderEventType, PlaceholderAggregateType, PlaceholderAggregateID)
		}
		ph := rest[i : i+j+1]
		switch ph {
		case PlaceholderEventType, PlaceholderAggregateType, PlaceholderAggregateID:
		default:
			return nil, fmt.Errorf("%q: unknown placeholder %s: use %s, %s or %s", template, ph, PlaceholderEventType, PlaceholderAggregateType, PlaceholderAggregateID)
		}
		rk.parts = append(rk.parts, keyPart{ph: ph})
		rest = rest[i+j+1:]
	}
	return rk, nil
}

// Append appends the routing key of an event to dst.
func (rk *RoutingKey) Append(dst []byte, eventType, aggregateType, aggregateID []byte) []byte {
	for _, p := range rk.parts {
		switch p.ph {
		case "":
			dst = append(dst, p.lit...)
		case PlaceholderEventType:
			dst = append(dst, eventType...)
		case PlaceholderAggregateType:
			dst = append(dst, aggregateType...)
		case PlaceholderAggregateID:
			dst = append(dst, aggregateID...)
		}
	}
	return dst
}
