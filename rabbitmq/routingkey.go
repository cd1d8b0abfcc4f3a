package rabbitmq

import "github.com/cdc-relay/cdc-relay/router"

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
	parts []router.Part
}

// ParseRoutingKey parses a template over {event_type}, {aggregate_type}
// and {aggregate_id}; any other placeholder, or an unclosed '{', is an
// error.
func ParseRoutingKey(template string) (*RoutingKey, error) {
	parts, err := router.ParseTemplate(template, PlaceholderEventType, PlaceholderAggregateType, PlaceholderAggregateID)
	if err != nil {
		return nil, err
	}
	return &RoutingKey{parts: parts}, nil
}

// Append appends the routing key of an event to dst.
func (rk *RoutingKey) Append(dst []byte, eventType, aggregateType, aggregateID []byte) []byte {
	for _, p := range rk.parts {
		switch p.Placeholder {
		case "":
			dst = append(dst, p.Lit...)
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
