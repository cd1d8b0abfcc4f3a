package schemaregistry

import (
	"bytes"
	"encoding/binary"
	"strconv"

	"github.com/cdc-relay/cdc-relay/internal/jsontext"
)

// This file scans JSON text in place: no tokens, no reflection, no
// allocation. Every function starts at e.pos and leaves e.pos after what it
// consumed; errors are PayloadErrors whose reason starts "invalid JSON".

// maxDepth bounds the nesting of skipped JSON values.
const maxDepth = 1000

// JSON value kinds, as a bit set so a schema node can say which it accepts.
const (
	jNull uint8 = 1 << iota
	jBool
	jNumber
	jString
	jObject
	jArray
)

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func jsonKind(c byte) uint8 {
	switch {
	case c == '"':
		return jString
	case c == '{':
		return jObject
	case c == '[':
		return jArray
	case c == 't' || c == 'f':
		return jBool
	case c == 'n':
		return jNull
	case c == '-' || isDigit(c):
		return jNumber
	}
	return 0
}

func jsonKindName(k uint8) string {
	switch k {
	case jString:
		return "string"
	case jObject:
		return "object"
	case jArray:
		return "array"
	case jBool:
		return "boolean"
	case jNull:
		return "null"
	case jNumber:
		return "number"
	}
	return "invalid value"
}

func (e *enc) ws() {
	for e.pos < len(e.data) && isSpace(e.data[e.pos]) {
		e.pos++
	}
}

func (e *enc) syntaxError(what string) *PayloadError {
	if e.pos >= len(e.data) {
		return &PayloadError{Reason: "invalid JSON: unexpected end of input"}
	}
	return &PayloadError{Reason: "invalid JSON: " + what + " at offset " + strconv.Itoa(e.pos)}
}

// expect consumes c after optional white space.
func (e *enc) expect(c byte, what string) *PayloadError {
	e.ws()
	if e.pos >= len(e.data) || e.data[e.pos] != c {
		return e.syntaxError("want " + what)
	}
	e.pos++
	return nil
}

// literal consumes the literal lit (true, false or null).
func (e *enc) literal(lit string) *PayloadError {
	if len(e.data)-e.pos < len(lit) || string(e.data[e.pos:e.pos+len(lit)]) != lit {
		return e.syntaxError("invalid literal")
	}
	e.pos += len(lit)
	return nil
}

// str consumes a JSON string and returns its raw content (between the
// quotes, escapes not decoded) and whether it has escapes.
func (e *enc) str() (raw []byte, escaped bool, err *PayloadError) {
	d := e.data
	i := skipPlain(d, e.pos+1) // most strings have no escape: to the quote eight bytes at a time
	for i < len(d) {
		c := d[i]
		switch {
		case c == '"':
			raw = d[e.pos+1 : i]
			e.pos = i + 1
			return raw, escaped, nil
		case c == '\\':
			escaped = true
			if i+1 >= len(d) {
				e.pos = len(d)
				return nil, false, e.syntaxError("")
			}
			switch d[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if _, ok := jsontext.Hex4(d[i+2:]); !ok {
					e.pos = i
					return nil, false, e.syntaxError(`invalid \u escape`)
				}
				i += 6
			default:
				e.pos = i
				return nil, false, e.syntaxError("invalid escape in string")
			}
		case c < 0x20:
			e.pos = i
			return nil, false, e.syntaxError("control character in string")
		default:
			i++
		}
	}
	e.pos = len(d)
	return nil, false, e.syntaxError("")
}

// SWAR constants: a byte of ones, and the high bit of every byte.
const (
	swarOnes = 0x0101010101010101
	swarHigh = 0x8080808080808080
)

// skipPlain returns the index of the first byte at or after i that needs a
// look inside a JSON string (a quote, a backslash or a control character),
// or a position at most eight bytes before it from which the byte loop goes
// on. Past the first 16 bytes, bytes.IndexByte finds the next quote and backslash with vector
// instructions; control characters are tested eight bytes at a time. A long
// plain string so costs a fraction of a byte-by-byte scan.
func skipPlain(d []byte, i int) int {
	// Most strings are short (ids, enums, timestamps): test the first 16
	// bytes for all three kinds at once, without a call.
	for range 2 {
		if i+8 > len(d) {
			return i
		}
		w := binary.LittleEndian.Uint64(d[i:])
		q := w ^ ('"' * swarOnes)
		b := w ^ ('\\' * swarOnes)
		if ((w-0x20*swarOnes)&^w|(q-swarOnes)&^q|(b-swarOnes)&^b)&swarHigh != 0 {
			return i
		}
		i += 8
	}
	span := d[i:]
	if q := bytes.IndexByte(span, '"'); q >= 0 {
		span = span[:q]
	}
	if b := bytes.IndexByte(span, '\\'); b >= 0 {
		span = span[:b]
	}
	j := 0
	for j+8 <= len(span) {
		w := binary.LittleEndian.Uint64(span[j:])
		// A byte below 0x20 sets its high bit (or one above it); bytes
		// >= 0x80 never do.
		if (w-0x20*swarOnes)&^w&swarHigh != 0 {
			return i + j
		}
		j += 8
	}
	for j < len(span) && span[j] >= 0x20 {
		j++
	}
	return i + j
}

// unescape appends the decoded content of a JSON string whose raw content
// str returned; the reason says why it cannot be decoded (invalid UTF-8,
// an unpaired surrogate).
func unescape(dst, raw []byte) ([]byte, string) {
	dst, err := jsontext.AppendUnescaped(dst, raw)
	if err != nil {
		return dst, err.Error()
	}
	return dst, ""
}

// number is a JSON number split into its parts; the value is
// ±(int digits . frac digits) × 10^exp, exactly.
type number struct {
	raw []byte
	neg bool
	ip  []byte // integer digits
	fp  []byte // fraction digits
	exp int    // clamped to ±maxExp
}

const maxExp = 1_000_000

// scanNumber parses the JSON number grammar at b[i:] and returns the parts
// and the index after the number, or ok=false.
func scanNumber(b []byte, i int) (n number, end int, ok bool) {
	start := i
	if i < len(b) && b[i] == '-' {
		n.neg = true
		i++
	}
	j := i
	if i < len(b) && b[i] == '0' {
		i++
	} else {
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i == j {
		return n, i, false
	}
	n.ip = b[j:i]
	if i < len(b) && b[i] == '.' {
		i++
		j = i
		for i < len(b) && isDigit(b[i]) {
			i++
		}
		if i == j {
			return n, i, false
		}
		n.fp = b[j:i]
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		eneg := false
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			eneg = b[i] == '-'
			i++
		}
		j = i
		x := 0
		for i < len(b) && isDigit(b[i]) {
			if x < maxExp {
				x = x*10 + int(b[i]-'0')
			}
			i++
		}
		if i == j {
			return n, i, false
		}
		x = min(x, maxExp)
		if eneg {
			x = -x
		}
		n.exp = x
	}
	n.raw = b[start:i]
	return n, i, true
}

// num consumes a JSON number.
func (e *enc) num() (number, *PayloadError) {
	n, end, ok := scanNumber(e.data, e.pos)
	if !ok {
		e.pos = end
		return n, e.syntaxError("invalid number")
	}
	e.pos = end
	return n, nil
}

func (n *number) digit(k int) byte {
	if k < len(n.ip) {
		return n.ip[k] - '0'
	}
	return n.fp[k-len(n.ip)] - '0'
}

// significant returns the index range [first, last] of the significant
// digits in ip+fp and the power of ten that scales them to the value; ok is
// false when the number is zero.
func (n *number) significant() (first, last, pow int, ok bool) {
	total := len(n.ip) + len(n.fp)
	first, last = -1, -1
	for k := range total {
		if n.digit(k) != 0 {
			if first < 0 {
				first = k
			}
			last = k
		}
	}
	if first < 0 {
		return 0, 0, 0, false
	}
	pow = n.exp - len(n.fp) + (total - 1 - last)
	return first, last, pow, true
}

type intStatus uint8

const (
	intOK intStatus = iota
	intFraction
	intOverflow
)

// int64 returns the number as an int64 if it is integral and in range,
// computed from the digits (never through float64).
func (n *number) int64() (int64, intStatus) {
	first, last, pow, ok := n.significant()
	if !ok {
		return 0, intOK
	}
	if pow < 0 {
		return 0, intFraction
	}
	if last-first+1+pow > 19 {
		return 0, intOverflow
	}
	var m uint64
	for k := first; k <= last; k++ {
		m = m*10 + uint64(n.digit(k))
	}
	for range pow {
		m *= 10
	}
	limit := uint64(1<<63 - 1)
	if n.neg {
		limit++
	}
	if m > limit {
		return 0, intOverflow
	}
	if n.neg {
		return -int64(m), intOK
	}
	return int64(m), intOK
}

// skip consumes one JSON value of any kind, validating its syntax.
func (e *enc) skip(depth int) *PayloadError {
	e.ws()
	if e.pos >= len(e.data) {
		return e.syntaxError("")
	}
	switch c := e.data[e.pos]; c {
	case '"':
		_, _, err := e.str()
		return err
	case '{', '[':
		if depth >= maxDepth {
			return e.syntaxError("nesting too deep")
		}
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		e.pos++
		e.ws()
		if e.pos < len(e.data) && e.data[e.pos] == closer {
			e.pos++
			return nil
		}
		for {
			if c == '{' {
				e.ws()
				if e.pos >= len(e.data) || e.data[e.pos] != '"' {
					return e.syntaxError("want object key")
				}
				if _, _, err := e.str(); err != nil {
					return err
				}
				if err := e.expect(':', "':'"); err != nil {
					return err
				}
			}
			if err := e.skip(depth + 1); err != nil {
				return err
			}
			e.ws()
			if e.pos < len(e.data) && e.data[e.pos] == ',' {
				e.pos++
				continue
			}
			if e.pos < len(e.data) && e.data[e.pos] == closer {
				e.pos++
				return nil
			}
			return e.syntaxError("want ',' or '" + string(closer) + "'")
		}
	case 't':
		return e.literal("true")
	case 'f':
		return e.literal("false")
	case 'n':
		return e.literal("null")
	default:
		_, err := e.num()
		return err
	}
}

// describe names the JSON value at e.pos for an error message, e.g.
// `string "12"` or `number 1.5`, without moving e.pos.
func (e *enc) describe() string {
	const maxShown = 40
	if e.pos >= len(e.data) {
		return "end of input"
	}
	c := e.data[e.pos]
	switch k := jsonKind(c); k {
	case jString:
		save := e.pos
		raw, _, err := e.str()
		e.pos = save
		if err != nil {
			return "invalid string"
		}
		if len(raw) > maxShown {
			return `string "` + string(raw[:maxShown]) + `…"`
		}
		return `string "` + string(raw) + `"`
	case jNumber:
		n, _, ok := scanNumber(e.data, e.pos)
		if !ok {
			return "invalid number"
		}
		if len(n.raw) > maxShown {
			return "number " + string(n.raw[:maxShown]) + "…"
		}
		return "number " + string(n.raw)
	case jBool:
		if c == 't' {
			return "boolean true"
		}
		return "boolean false"
	default:
		return jsonKindName(k)
	}
}
