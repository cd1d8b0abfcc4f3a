package schemaregistry

import (
	"errors"
	"strconv"

	"github.com/cdc-relay/cdc-relay/internal/jsontext"
)

// This file reads JSON text in place through jsontext, the relay's one
// tokenizer: no tokens, no reflection, no allocation. Every function starts
// at e.pos and leaves e.pos after what it consumed; errors are
// PayloadErrors whose reason starts "invalid JSON".

// JSON value kinds, as a bit set so a schema node can say which it accepts.
const (
	jNull uint8 = 1 << iota
	jBool
	jNumber
	jString
	jObject
	jArray
)

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

func (e *enc) ws() { e.pos = jsontext.SkipSpace(e.data, e.pos) }

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
		return e.syntaxError("invalid literal, want " + lit)
	}
	e.pos += len(lit)
	return nil
}

// str consumes a JSON string and returns its raw content (between the
// quotes, escapes not decoded, valid UTF-8 when it has none) and whether
// it has escapes.
func (e *enc) str() (raw []byte, escaped bool, err *PayloadError) {
	end, escaped, serr := jsontext.ScanString(e.data, e.pos)
	if serr != nil {
		return nil, false, e.jsonError(serr)
	}
	raw = e.data[e.pos+1 : end-1]
	e.pos = end
	return raw, escaped, nil
}

// jsonError is the PayloadError of a jsontext error, which moves e.pos
// to where it was found.
func (e *enc) jsonError(err error) *PayloadError {
	var se *jsontext.SyntaxError
	if errors.As(err, &se) {
		e.pos = se.Offset
		if se.Err != jsontext.ErrSyntax {
			return &PayloadError{Reason: "invalid JSON: " + se.Err.Error() + " at offset " + strconv.Itoa(se.Offset)}
		}
		if se.Offset >= len(e.data) {
			return &PayloadError{Reason: "invalid JSON: unexpected end of input"}
		}
		return &PayloadError{Reason: "invalid JSON: " + se.Error()}
	}
	return &PayloadError{Reason: "invalid JSON: " + err.Error()}
}

// unescape appends the decoded content of a JSON string whose raw content
// str returned.
func unescape(dst, raw []byte) ([]byte, string) {
	dst, err := jsontext.AppendUnescaped(dst, raw)
	if err != nil {
		return dst, "invalid JSON: " + err.Error()
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
	exp int    // clamped to ±jsontext.MaxExp
}

// scanNumber reads the JSON number at b[i:] and returns its parts and the
// index after it, or ok=false.
func scanNumber(b []byte, i int) (n number, end int, ok bool) {
	jn, end, err := jsontext.ScanNumber(b, i)
	if err != nil {
		return n, i, false
	}
	return number{raw: jn.Raw, neg: jn.Neg, ip: jn.Int, fp: jn.Frac, exp: jn.Exp}, end, true
}

// num consumes a JSON number.
func (e *enc) num() (number, *PayloadError) {
	jn, end, err := jsontext.ScanNumber(e.data, e.pos)
	if err != nil {
		return number{}, e.jsonError(err)
	}
	e.pos = end
	return number{raw: jn.Raw, neg: jn.Neg, ip: jn.Int, fp: jn.Frac, exp: jn.Exp}, nil
}

// plainInt reads the JSON number at b[i:] if it is an integer of at most
// 18 digits with neither fraction nor exponent, the common case, which
// then needs none of number's general rules; ok is false for any other
// number, and for invalid JSON, which num then reads and reports.
func plainInt(b []byte, i int) (v int64, end int, ok bool) {
	neg := i < len(b) && b[i] == '-'
	if neg {
		i++
	}
	start := i
	for i < len(b) && i-start < 18 && '0' <= b[i] && b[i] <= '9' {
		v = v*10 + int64(b[i]-'0')
		i++
	}
	switch {
	case i == start, b[start] == '0' && i-start > 1:
		return 0, 0, false
	case i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E' || '0' <= b[i] && b[i] <= '9'):
		return 0, 0, false
	}
	if neg {
		v = -v
	}
	return v, i, true
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

// skip consumes one JSON value of any kind, checking it.
func (e *enc) skip() *PayloadError {
	e.ws()
	end, err := jsontext.SkipValue(e.data, e.pos)
	if err != nil {
		return e.jsonError(err)
	}
	e.pos = end
	return nil
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
