package router

import (
	"fmt"
	"strings"
	"sync"
)

// DefaultTemplate is Debezium's EventRouter default, so consumers can switch unchanged.
const DefaultTemplate = "outbox.event.{aggregate_type}"

// Placeholders a topic template may use.
const (
	PlaceholderAggregateType = "{aggregate_type}"
	PlaceholderEventType     = "{event_type}"
)

// maxCachedTopics bounds the topic cache; aggregate types are few in practice.
const maxCachedTopics = 10000

// Router maps rows to topics. It is safe for concurrent use.
type Router struct {
	parts []Part

	mu    sync.RWMutex
	cache map[string]string // aggregate_type + "\x00" + event_type → topic (only when the template uses both)
}

// New parses a topic template. It accepts {aggregate_type} and {event_type}.
func New(template string) (*Router, error) {
	if template == "" {
		return nil, fmt.Errorf("--topic-template is empty: set it, e.g. %s", DefaultTemplate)
	}
	parts, err := ParseTemplate(template, PlaceholderAggregateType, PlaceholderEventType)
	if err != nil {
		return nil, fmt.Errorf("--topic-template %w", err)
	}
	return &Router{parts: parts, cache: make(map[string]string)}, nil
}

// Topic returns the topic for a row, validated against Kafka's naming rules.
func (r *Router) Topic(aggregateType, eventType []byte) (string, error) {
	if len(aggregateType) == 0 && r.uses(PlaceholderAggregateType) {
		return "", fmt.Errorf("%w: aggregate_type is empty", ErrInvalidTopic)
	}
	key := cacheKey(aggregateType, eventType, r.uses(PlaceholderEventType))
	r.mu.RLock()
	t, ok := r.cache[string(key)]
	r.mu.RUnlock()
	if ok {
		return t, nil
	}
	var b strings.Builder
	for _, p := range r.parts {
		switch p.Placeholder {
		case "":
			b.WriteString(p.Lit)
		case PlaceholderAggregateType:
			b.Write(aggregateType)
		case PlaceholderEventType:
			b.Write(eventType)
		}
	}
	t = b.String()
	if err := ValidTopic(t); err != nil {
		return "", err
	}
	r.mu.Lock()
	if len(r.cache) < maxCachedTopics {
		r.cache[string(key)] = t
	}
	r.mu.Unlock()
	return t, nil
}

func (r *Router) uses(ph string) bool {
	for _, p := range r.parts {
		if p.Placeholder == ph {
			return true
		}
	}
	return false
}

// cacheKey avoids allocating when only the aggregate type matters: the
// compiler does not allocate for m[string(b)] lookups.
func cacheKey(aggregateType, eventType []byte, both bool) []byte {
	if !both {
		return aggregateType
	}
	k := make([]byte, 0, len(aggregateType)+1+len(eventType))
	k = append(k, aggregateType...)
	k = append(k, 0)
	return append(k, eventType...)
}

// Matcher returns a function reporting whether a topic name could have come
// from the template (the schema registry uses it to find existing subjects).
func (r *Router) Matcher() func(topic string) bool {
	return func(topic string) bool { return matchParts(r.parts, topic) }
}

func matchParts(parts []Part, s string) bool {
	if len(parts) == 0 {
		return s == ""
	}
	p := parts[0]
	if p.Placeholder == "" {
		return strings.HasPrefix(s, p.Lit) && matchParts(parts[1:], s[len(p.Lit):])
	}
	for i := 1; i <= len(s); i++ { // a placeholder matches one or more characters
		if matchParts(parts[1:], s[i:]) {
			return true
		}
	}
	return false
}

// ValidTopic checks Kafka's rules: 1 to 249 characters of [a-zA-Z0-9._-],
// and not "." or "..".
func ValidTopic(t string) error {
	switch {
	case t == "":
		return fmt.Errorf("%w: empty (is aggregate_type empty?)", ErrInvalidTopic)
	case len(t) > 249:
		return fmt.Errorf("%w: %d characters, Kafka allows at most 249", ErrInvalidTopic, len(t))
	case t == "." || t == "..":
		return fmt.Errorf("%w: %q", ErrInvalidTopic, t)
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: %q has character %q; Kafka allows only a-z A-Z 0-9 . _ -", ErrInvalidTopic, t, rune(c))
		}
	}
	return nil
}
