package schemaregistry

import (
	"encoding/binary"
	"errors"
	"math"
	"strconv"
	"sync"

	"github.com/hamba/avro/v2"

	"github.com/cdc-relay/cdc-relay/internal/civil"
	"github.com/cdc-relay/cdc-relay/internal/jsontext"
)

// Encoder writes values of one event type for one subject. It is immutable
// and safe for concurrent use.
type Encoder struct {
	// ID is the schema id the registry gave the schema under the subject.
	ID int
	// Schema is the local schema the encoder writes.
	Schema *Schema

	header [5]byte
}

func newEncoder(id int, s *Schema) *Encoder {
	e := &Encoder{ID: id, Schema: s}
	binary.BigEndian.PutUint32(e.header[1:], uint32(id))
	return e
}

// Append appends to dst the Kafka value for payload, the jsonb text of an
// outbox row: the magic byte 0x00, the schema id as 4 big-endian bytes and
// the Avro binary encoding of the payload converted by the package's JSON
// rules. A payload that does not fit the schema gives a *PayloadError and
// dst unchanged.
func (e *Encoder) Append(dst, payload []byte) ([]byte, error) {
	return e.AppendWith(dst, payload, nil)
}

// FieldSink receives the payload members a schema has no field for, which
// the encoder skips (Avro's writer semantics: only the schema's fields are
// written).
type FieldSink interface {
	// UnknownField is called once per such member, at any depth, in the
	// order of the payload: path names the schema fields leading to the
	// record that lacks it (empty for the top-level record), field is the
	// member's name. Neither may be kept after the call.
	UnknownField(path []string, field []byte)
}

// AppendWith is Append that reports to sink, when it is not nil, every
// payload member the schema has no field for. The sink is called while
// encoding, so it may hear of members of a payload that then fails with a
// *PayloadError.
func (e *Encoder) AppendWith(dst, payload []byte, sink FieldSink) ([]byte, error) {
	n := len(dst)
	dst = append(dst, e.header[:]...)
	dst, err := e.Schema.appendBody(dst, payload, sink)
	if err != nil {
		return dst[:n], err
	}
	return dst, nil
}

// AppendBody appends the Avro binary encoding of a JSON payload to dst,
// without the wire-format header. Errors are *PayloadError.
func (s *Schema) AppendBody(dst, payload []byte) ([]byte, error) {
	n := len(dst)
	dst, err := s.appendBody(dst, payload, nil)
	if err != nil {
		return dst[:n], err
	}
	return dst, nil
}

func (s *Schema) appendBody(dst, payload []byte, sink FieldSink) ([]byte, error) {
	if s.root == nil {
		return dst, errors.New("schema " + s.EventType + " was not made by LoadDir or ParseSchema")
	}
	e := encPool.Get().(*enc)
	e.data, e.pos, e.dst, e.sink = payload, 0, dst, sink
	perr := e.top(s.root)
	if perr != nil {
		// The one-pass walk stopped at the first problem in the payload's
		// order, or handed over (restart). Walk again in two passes, which
		// decides and reports what users are told: the payload's JSON
		// syntax first, then its fields in the schema's order. Only this
		// walk calls the sink.
		e.pos, e.dst, e.twoPass, e.restarted = 0, dst, true, false
		e.spans, e.path, e.depth = e.spans[:0], e.path[:0], 0
		perr = e.top(s.root)
		e.twoPass = false
	}
	dst = e.dst
	e.data, e.dst, e.sink = nil, nil, nil
	e.spans, e.path = e.spans[:0], e.path[:0]
	if cap(e.scratch) > maxPooledScratch {
		e.scratch = nil
	}
	encPool.Put(e)
	if perr != nil {
		perr.EventType = s.EventType
		return dst, perr
	}
	return dst, nil
}

var encPool = sync.Pool{New: func() any { return new(enc) }}

// maxOnePassDepth bounds the arrays and objects open in the one-pass walk,
// the whole payload's: at least as strict as the two-pass walk's skip of a
// top-level member (jsontext.MaxDepth levels below the payload's object).
const maxOnePassDepth = jsontext.MaxDepth

// maxPooledScratch caps the unescape buffer an idle enc keeps.
const maxPooledScratch = 64 << 10

// enc converts one JSON text to Avro binary, walking the compiled schema.
//
// It reads a record in one pass (recordOnePass): each member's value is
// encoded where it is read, and the fields are put in the schema's order
// afterwards. When that fails, the payload is encoded again in two passes
// (twoPass), whose errors are the ones reported.
type enc struct {
	data     []byte // the JSON text
	pos      int    // next byte of data to read
	dst      []byte // output
	spans    []int  // where each open record's fields are (recordOnePass, recordTwoPass), a stack
	scratch  []byte // unescaped keys
	defaults bool   // encoding a schema default, not a payload (always in two passes)
	twoPass  bool   // records are read in two passes (recordTwoPass)
	// restarted: the one-pass walk gave up (restart). depth counts the
	// arrays and objects open, which the one-pass walk bounds by
	// maxOnePassDepth.
	restarted bool
	depth     int
	sink      FieldSink // AppendWith's; nil: unknown members go unreported
	path      []string  // with sink: the schema fields above the current record
}

// top encodes the whole of e.data as one value of n.
func (e *enc) top(n *node) *PayloadError {
	e.ws()
	if e.pos >= len(e.data) {
		return &PayloadError{Reason: "payload is empty"}
	}
	if n.kind == avro.Record && e.data[e.pos] != '{' {
		k := jsonKind(e.data[e.pos])
		if k == 0 {
			return e.syntaxError("invalid character " + strconv.QuoteRune(rune(e.data[e.pos])))
		}
		return &PayloadError{Reason: "payload is a JSON " + jsonKindName(k) + ", want object"}
	}
	if err := e.value(n); err != nil {
		return err
	}
	e.ws()
	if e.pos != len(e.data) {
		return e.syntaxError("data after the value")
	}
	return nil
}

func (e *enc) typeError(n *node) *PayloadError {
	if jsonKind(e.data[e.pos]) == 0 {
		return e.syntaxError("invalid character " + strconv.QuoteRune(rune(e.data[e.pos])))
	}
	return &PayloadError{Reason: "expected " + n.name + ", got " + e.describe()}
}

// value encodes the JSON value at e.pos as n.
func (e *enc) value(n *node) *PayloadError {
	e.ws()
	if e.pos >= len(e.data) {
		return e.syntaxError("")
	}
	c := e.data[e.pos]
	if n.kind == avro.Union {
		return e.union(n)
	}
	if n.accepts&jsonKind(c) == 0 {
		return e.typeError(n)
	}
	switch n.kind {
	case avro.Null:
		return e.literal("null")
	case avro.Boolean:
		if c == 't' {
			e.dst = append(e.dst, 1)
			return e.literal("true")
		}
		e.dst = append(e.dst, 0)
		return e.literal("false")
	case avro.Int, avro.Long:
		if c == '"' {
			return e.timeString(n)
		}
		if v, end, ok := plainInt(e.data, e.pos); ok && (n.kind == avro.Long || int64(int32(v)) == v) {
			e.pos = end
			e.dst = appendLong(e.dst, v)
			return nil
		}
		num, err := e.num()
		if err != nil {
			return err
		}
		v, st := num.int64()
		if st == intOK && n.kind == avro.Int && (v < math.MinInt32 || v > math.MaxInt32) {
			st = intOverflow
		}
		switch st {
		case intFraction:
			return &PayloadError{Reason: string(num.raw) + " is not an integer"}
		case intOverflow:
			return &PayloadError{Reason: string(num.raw) + " overflows " + string(n.kind)}
		}
		e.dst = appendLong(e.dst, v)
		return nil
	case avro.Float, avro.Double:
		num, err := e.num()
		if err != nil {
			return err
		}
		if n.kind == avro.Float {
			f, perr := strconv.ParseFloat(string(num.raw), 32)
			if perr != nil || math.IsInf(f, 0) {
				return &PayloadError{Reason: string(num.raw) + " overflows float"}
			}
			e.dst = binary.LittleEndian.AppendUint32(e.dst, math.Float32bits(float32(f)))
			return nil
		}
		f, perr := strconv.ParseFloat(string(num.raw), 64)
		if perr != nil || math.IsInf(f, 0) {
			return &PayloadError{Reason: string(num.raw) + " overflows double"}
		}
		e.dst = binary.LittleEndian.AppendUint64(e.dst, math.Float64bits(f))
		return nil
	case avro.String:
		raw, esc, err := e.str()
		if err != nil {
			return err
		}
		if n.logical == avro.UUID && (esc || !isUUID(raw)) {
			return &PayloadError{Reason: "expected uuid, got string \"" + string(raw) + "\""}
		}
		return e.appendString(raw, esc)
	case avro.Bytes, avro.Fixed:
		if n.logical == avro.Decimal && !e.defaults {
			return e.decimal(n)
		}
		if c != '"' {
			return e.typeError(n)
		}
		raw, esc, err := e.str()
		if err != nil {
			return err
		}
		return e.appendBytes(n, raw, esc)
	case avro.Enum:
		raw, esc, err := e.str()
		if err != nil {
			return err
		}
		key := raw
		if esc {
			var reason string
			if e.scratch, reason = unescape(e.scratch[:0], raw); reason != "" {
				return &PayloadError{Reason: reason}
			}
			key = e.scratch
		}
		i, ok := n.syms[string(key)]
		if !ok {
			return &PayloadError{Reason: strconv.Quote(string(key)) + " is not a symbol of enum " + n.name + " (" + n.symbolList + ")"}
		}
		e.dst = appendLong(e.dst, int64(i))
		return nil
	case avro.Array, avro.Map, avro.Record:
		if !e.twoPass && e.depth >= maxOnePassDepth {
			return e.restart("nesting deeper than " + strconv.Itoa(maxOnePassDepth))
		}
		e.depth++
		var err *PayloadError
		switch n.kind {
		case avro.Array:
			err = e.array(n)
		case avro.Map:
			err = e.mapValue(n)
		default:
			err = e.record(n)
		}
		e.depth--
		return err
	}
	return &PayloadError{Reason: "unsupported type " + n.name}
}

func (e *enc) appendString(raw []byte, esc bool) *PayloadError {
	if !esc { // str checked that it is UTF-8
		e.dst = appendLong(e.dst, int64(len(raw)))
		e.dst = append(e.dst, raw...)
		return nil
	}
	var reason string
	if e.scratch, reason = unescape(e.scratch[:0], raw); reason != "" {
		return &PayloadError{Reason: reason}
	}
	e.dst = appendLong(e.dst, int64(len(e.scratch)))
	e.dst = append(e.dst, e.scratch...)
	return nil
}

// appendBytes writes a bytes or fixed value from a JSON string: its UTF-8
// bytes for a payload, code points 0-255 as bytes for a schema default.
func (e *enc) appendBytes(n *node, raw []byte, esc bool) *PayloadError {
	b := raw
	if esc {
		var reason string
		if e.scratch, reason = unescape(e.scratch[:0], raw); reason != "" {
			return &PayloadError{Reason: reason}
		}
		b = e.scratch
	}
	if e.defaults {
		out := make([]byte, 0, len(b))
		for _, r := range string(b) {
			if r > 255 {
				return &PayloadError{Reason: "bytes default has a code point above U+00FF"}
			}
			out = append(out, byte(r))
		}
		b = out
	}
	if n.kind == avro.Fixed {
		if len(b) != n.size {
			return &PayloadError{Reason: "expected " + strconv.Itoa(n.size) + " bytes for fixed " + n.name + ", got " + strconv.Itoa(len(b))}
		}
		e.dst = append(e.dst, b...)
		return nil
	}
	e.dst = appendLong(e.dst, int64(len(b)))
	e.dst = append(e.dst, b...)
	return nil
}

func (e *enc) decimal(n *node) *PayloadError {
	var num number
	if e.data[e.pos] == '"' {
		raw, esc, err := e.str()
		if err != nil {
			return err
		}
		var end int
		var ok bool
		num, end, ok = scanNumber(raw, 0)
		if esc || !ok || end != len(raw) {
			return &PayloadError{Reason: "expected " + n.name + ", got string \"" + string(raw) + "\""}
		}
	} else {
		var err *PayloadError
		if num, err = e.num(); err != nil {
			return err
		}
	}
	size := 0
	if n.kind == avro.Fixed {
		size = n.size
	}
	var reason string
	if e.dst, reason = e.appendDecimal(e.dst, &num, n.precision, n.scale, size); reason != "" {
		return &PayloadError{Reason: reason}
	}
	return nil
}

// timeString writes a date, time or timestamp given as a string.
func (e *enc) timeString(n *node) *PayloadError {
	raw, esc, err := e.str()
	if err != nil {
		return err
	}
	bad := func(want string) *PayloadError {
		return &PayloadError{Reason: "expected " + want + ", got string \"" + string(raw) + "\""}
	}
	if esc {
		return bad(string(n.logical))
	}
	switch n.logical {
	case avro.Date:
		days, ok := civil.Date(raw)
		if !ok || len(raw) != 10 {
			return bad(`date "YYYY-MM-DD" or days since 1970-01-01`)
		}
		e.dst = appendLong(e.dst, days)
	case avro.TimeMillis, avro.TimeMicros:
		nanos, ok := parseTimeOfDay(raw)
		if !ok {
			return bad(`time "HH:MM:SS[.fraction]" or an integer`)
		}
		if n.logical == avro.TimeMillis {
			e.dst = appendLong(e.dst, nanos/1e6)
		} else {
			e.dst = appendLong(e.dst, nanos/1e3)
		}
	default:
		local := n.logical == avro.LocalTimestampMillis || n.logical == avro.LocalTimestampMicros
		sec, nsec, hasOffset, ok := parseTimestamp(raw)
		switch {
		case !ok:
			return bad("RFC 3339 timestamp or an integer")
		case local && hasOffset:
			return bad("local timestamp without a UTC offset")
		case !local && !hasOffset:
			return bad("RFC 3339 timestamp with a UTC offset (Z or ±hh:mm)")
		}
		if n.logical == avro.TimestampMillis || n.logical == avro.LocalTimestampMillis {
			e.dst = appendLong(e.dst, sec*1e3+nsec/1e6)
		} else {
			e.dst = appendLong(e.dst, sec*1e6+nsec/1e3)
		}
	}
	return nil
}

// appendLong appends v zig-zag varint encoded, as Avro writes int and long.
func appendLong(dst []byte, v int64) []byte {
	u := uint64(v<<1) ^ uint64(v>>63)
	for u >= 0x80 {
		dst = append(dst, byte(u)|0x80)
		u >>= 7
	}
	return append(dst, byte(u))
}
