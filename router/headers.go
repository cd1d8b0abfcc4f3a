package router

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/segmentio/kafka-go"
)

// Header names the relay always sets; they match Debezium's EventRouter "id"
// header so consumers dedupe unchanged.
const (
	HeaderID            = "id"
	HeaderEventType     = "event_type"
	HeaderAggregateType = "aggregate_type"
)

// internedKeys keeps header key strings from allocating per event. A plain
// map under a read lock: m[string(b)] does not allocate, while a sync.Map
// lookup boxes the key.
var (
	internMu     sync.RWMutex
	internedKeys = map[string]string{}
)

// maxInterned bounds internedKeys: header keys come from user rows, and a
// key that differs per event (a hostile or careless row) must not grow the
// process without limit. Past the bound, new keys are allocated per event.
const maxInterned = 4096

func intern(b []byte) string {
	internMu.RLock()
	s, ok := internedKeys[string(b)]
	internMu.RUnlock()
	if ok {
		return s
	}
	s = string(b)
	internMu.Lock()
	if len(internedKeys) < maxInterned {
		internedKeys[s] = s
	}
	internMu.Unlock()
	return s
}

// Builtin is a set of the headers the relay writes from the outbox row's
// own columns: id, event_type and aggregate_type.
type Builtin uint8

// The builtin headers.
const (
	BuiltinID Builtin = 1 << iota
	BuiltinEventType
	BuiltinAggregateType

	// AllBuiltin is every builtin header: the relay's default.
	AllBuiltin = BuiltinID | BuiltinEventType | BuiltinAggregateType
)

// ParseBuiltin parses a comma-separated list of builtin header names
// ("id,event_type,aggregate_type"). An empty list is the empty set.
func ParseBuiltin(list string) (Builtin, error) {
	var b Builtin
	for _, name := range strings.Split(list, ",") {
		switch strings.TrimSpace(name) {
		case "":
		case HeaderID:
			b |= BuiltinID
		case HeaderEventType:
			b |= BuiltinEventType
		case HeaderAggregateType:
			b |= BuiltinAggregateType
		default:
			return 0, fmt.Errorf("unknown builtin header %q: use id, event_type and aggregate_type", strings.TrimSpace(name))
		}
	}
	return b, nil
}

// Has reports whether the header name is one of the builtin headers in b.
func (b Builtin) Has(name string) bool {
	switch name {
	case HeaderID:
		return b&BuiltinID != 0
	case HeaderEventType:
		return b&BuiltinEventType != 0
	case HeaderAggregateType:
		return b&BuiltinAggregateType != 0
	}
	return false
}

// AppendHeaders appends id, event_type and aggregate_type, then the headers
// of headersJSON, as AppendBuiltin and AppendJSON do.
func AppendHeaders(dst []kafka.Header, id, eventType, aggregateType, headersJSON []byte) ([]kafka.Header, error) {
	return AppendJSON(AppendBuiltin(dst, AllBuiltin, id, eventType, aggregateType), headersJSON)
}

// AppendBuiltin appends the builtin headers of set, in the order id,
// event_type, aggregate_type. Values alias the arguments.
func AppendBuiltin(dst []kafka.Header, set Builtin, id, eventType, aggregateType []byte) []kafka.Header {
	if set&BuiltinID != 0 {
		dst = append(dst, kafka.Header{Key: HeaderID, Value: id})
	}
	if set&BuiltinEventType != 0 {
		dst = append(dst, kafka.Header{Key: HeaderEventType, Value: eventType})
	}
	if set&BuiltinAggregateType != 0 {
		dst = append(dst, kafka.Header{Key: HeaderAggregateType, Value: aggregateType})
	}
	return dst
}

// AppendJSON appends one header per top-level key of headersJSON (the row's
// headers jsonb; nil or JSON null adds none). String values are unescaped;
// numbers and booleans keep their text; nested objects and arrays become
// their JSON text; null gives a header with a null value. A key id,
// event_type or aggregate_type is an error wrapping ErrReservedHeader,
// whichever builtin headers are written. Values alias headersJSON: copy them
// before the input is reused.
func AppendJSON(dst []kafka.Header, headersJSON []byte) ([]kafka.Header, error) {
	if len(headersJSON) == 0 {
		return dst, nil
	}
	i := skipSpace(headersJSON, 0)
	if i == len(headersJSON) {
		return dst, nil
	}
	if headersJSON[i] != '{' {
		if end, ok := skipValue(headersJSON, i); ok && skipSpace(headersJSON, end) == len(headersJSON) {
			if string(headersJSON[i:end]) == "null" {
				return dst, nil
			}
			return dst, fmt.Errorf("%w: got %s", ErrHeadersNotObject, kindOf(headersJSON[i]))
		}
		return dst, ErrBadJSON
	}
	i = skipSpace(headersJSON, i+1)
	if i < len(headersJSON) && headersJSON[i] == '}' {
		return dst, nil
	}
	for {
		if i >= len(headersJSON) || headersJSON[i] != '"' {
			return dst, ErrBadJSON
		}
		kEnd, ok := skipString(headersJSON, i)
		if !ok {
			return dst, ErrBadJSON
		}
		key, err := unquote(headersJSON[i:kEnd])
		if err != nil {
			return dst, err
		}
		switch string(key) {
		case HeaderID, HeaderEventType, HeaderAggregateType:
			// Never a second id/event_type/aggregate_type header (see ErrReservedHeader).
			return dst, fmt.Errorf("headers column sets %q, %w", key, ErrReservedHeader)
		}
		i = skipSpace(headersJSON, kEnd)
		if i >= len(headersJSON) || headersJSON[i] != ':' {
			return dst, ErrBadJSON
		}
		i = skipSpace(headersJSON, i+1)
		vEnd, ok := skipValue(headersJSON, i)
		if !ok {
			return dst, ErrBadJSON
		}
		raw := headersJSON[i:vEnd]
		var val []byte
		switch raw[0] {
		case '"':
			if val, err = unquote(raw); err != nil {
				return dst, err
			}
		case 'n':
			val = nil
		default:
			val = raw
		}
		dst = append(dst, kafka.Header{Key: intern(key), Value: val})
		i = skipSpace(headersJSON, vEnd)
		if i >= len(headersJSON) {
			return dst, ErrBadJSON
		}
		if headersJSON[i] == '}' {
			if skipSpace(headersJSON, i+1) != len(headersJSON) {
				return dst, ErrBadJSON
			}
			return dst, nil
		}
		if headersJSON[i] != ',' {
			return dst, ErrBadJSON
		}
		i = skipSpace(headersJSON, i+1)
	}
}

func kindOf(c byte) string {
	switch c {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	default:
		return "a number"
	}
}

// unquote returns a JSON string's contents; it allocates only for escapes.
func unquote(q []byte) ([]byte, error) {
	inner := q[1 : len(q)-1]
	for _, c := range inner {
		if c == '\\' {
			var s string
			if err := json.Unmarshal(q, &s); err != nil {
				return nil, fmt.Errorf("%w: %v", ErrBadJSON, err)
			}
			return []byte(s), nil
		}
	}
	return inner, nil
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the closing quote of the string at b[i].
func skipString(b []byte, i int) (int, bool) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1, true
		}
	}
	return 0, false
}

// skipValue returns the index after the JSON value starting at b[i]. It
// checks structure loosely; jsonb text from PostgreSQL is always valid.
func skipValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch c := b[i]; {
	case c == '"':
		return skipString(b, i)
	case c == '{' || c == '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, ok := skipString(b, j)
				if !ok {
					return 0, false
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, true
				}
			}
		}
		return 0, false
	default:
		j := i
		for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
			j++
		}
		lit := string(b[i:j])
		if j == i {
			return 0, false
		}
		if lit == "true" || lit == "false" || lit == "null" || c == '-' || (c >= '0' && c <= '9') {
			return j, true
		}
		return 0, false
	}
}
