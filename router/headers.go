package router

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/cdc-relay/cdc-relay/internal/jsontext"
	"github.com/cdc-relay/cdc-relay/publisher"
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
func AppendHeaders(dst []publisher.Header, id, eventType, aggregateType, headersJSON []byte) ([]publisher.Header, error) {
	return AppendJSON(AppendBuiltin(dst, AllBuiltin, id, eventType, aggregateType), headersJSON)
}

// AppendBuiltin appends the builtin headers of set, in the order id,
// event_type, aggregate_type. Values alias the arguments.
func AppendBuiltin(dst []publisher.Header, set Builtin, id, eventType, aggregateType []byte) []publisher.Header {
	if set&BuiltinID != 0 {
		dst = append(dst, publisher.Header{Key: HeaderID, Value: id})
	}
	if set&BuiltinEventType != 0 {
		dst = append(dst, publisher.Header{Key: HeaderEventType, Value: eventType})
	}
	if set&BuiltinAggregateType != 0 {
		dst = append(dst, publisher.Header{Key: HeaderAggregateType, Value: aggregateType})
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
func AppendJSON(dst []publisher.Header, headersJSON []byte) ([]publisher.Header, error) {
	obj, _, err := jsontext.OpenObject(headersJSON)
	if err != nil {
		if errors.Is(err, jsontext.ErrSyntax) {
			return dst, badJSON(err)
		}
		return dst, fmt.Errorf("%w: %v", ErrHeadersNotObject, err)
	}
	for {
		key, raw, ok, err := obj.Next()
		if err != nil {
			return dst, badJSON(err)
		}
		if !ok {
			return dst, nil
		}
		switch string(key) {
		case HeaderID, HeaderEventType, HeaderAggregateType:
			// Never a second id/event_type/aggregate_type header (see ErrReservedHeader).
			return dst, fmt.Errorf("headers column sets %q, %w", key, ErrReservedHeader)
		}
		var val []byte
		switch raw[0] {
		case '"':
			if val, err = jsontext.Unquote(raw); err != nil {
				return dst, badJSON(err)
			}
		case 'n':
			val = nil
		default:
			val = raw
		}
		dst = append(dst, publisher.Header{Key: intern(key), Value: val})
	}
}

// badJSON wraps the tokenizer's account of the fault in ErrBadJSON.
func badJSON(err error) error {
	return fmt.Errorf("%w: %v", ErrBadJSON, err)
}
