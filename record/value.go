package record

import (
	"errors"
	"strconv"

	"github.com/cdc-relay/cdc-relay/internal/jsontext"
)

var errNotObject = errors.New("payload is not a JSON object")

// jsonValue writes the payload as Debezium's outbox router writes it with
// table.expand.json.payload=true and JsonConverter without schemas
// (docs/DEBEZIUM-FORMAT.md): compact, with the members in the order the
// payload has them (jsonb's order), members whose value is null or an empty
// array left out at every depth (array elements are kept), strings escaped
// as Jackson escapes them, integers as they are and other numbers as Java's
// Double.toString prints them (1.5, 1.0, 1.0E7, 1.5E-7).
//
// Debezium's schema inference also gives the objects of one array the union
// of their members (missing ones as null) and falls back to a JSON string
// for arrays of mixed types; the relay writes such arrays as they are.
//
// It is used by the reader goroutine only: scratch is reused from event to
// event.
type jsonValue struct {
	scratch []byte // unescaped string contents
}

// append appends payload to dst. A payload that is not valid JSON, or not
// an object, is an error and leaves dst unchanged.
func (v *jsonValue) append(dst, payload []byte) ([]byte, error) {
	i := jsontext.SkipSpace(payload, 0)
	if i == len(payload) || payload[i] != '{' {
		return dst, errNotObject
	}
	n := len(dst)
	out, end, err := v.value(dst, payload, i)
	if err == nil && jsontext.SkipSpace(payload, end) != len(payload) {
		err = jsontext.ErrSyntax
	}
	if err != nil {
		return dst[:n], errors.New("payload is not valid JSON: " + err.Error())
	}
	return out, nil
}

// value writes the JSON value at b[i] and returns the index after it.
func (v *jsonValue) value(dst, b []byte, i int) ([]byte, int, error) {
	if i >= len(b) {
		return dst, i, jsontext.ErrSyntax
	}
	switch c := b[i]; {
	case c == '{':
		return v.object(dst, b, i)
	case c == '[':
		return v.array(dst, b, i)
	case c == '"':
		end, ok := jsontext.SkipString(b, i)
		if !ok {
			return dst, i, jsontext.ErrSyntax
		}
		var err error
		if v.scratch, err = jsontext.AppendUnquoted(v.scratch[:0], b[i:end]); err != nil {
			return dst, i, err
		}
		return appendJSONString(dst, v.scratch), end, nil
	case c == '-' || ('0' <= c && c <= '9'):
		end, ok := jsontext.SkipValue(b, i)
		if !ok {
			return dst, i, jsontext.ErrSyntax
		}
		out, err := appendNumber(dst, b[i:end])
		return out, end, err
	default:
		for _, lit := range [...]string{"true", "false", "null"} {
			if len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit {
				return append(dst, lit...), i + len(lit), nil
			}
		}
		return dst, i, jsontext.ErrSyntax
	}
}

// object writes the object at b[i], leaving out null and empty-array
// members.
func (v *jsonValue) object(dst, b []byte, i int) ([]byte, int, error) {
	dst = append(dst, '{')
	i = jsontext.SkipSpace(b, i+1)
	first := true
	if i < len(b) && b[i] == '}' {
		return append(dst, '}'), i + 1, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return dst, i, jsontext.ErrSyntax
		}
		kEnd, ok := jsontext.SkipString(b, i)
		if !ok {
			return dst, i, jsontext.ErrSyntax
		}
		key := b[i:kEnd]
		i = jsontext.SkipSpace(b, kEnd)
		if i >= len(b) || b[i] != ':' {
			return dst, i, jsontext.ErrSyntax
		}
		i = jsontext.SkipSpace(b, i+1)
		if dropped(b, i) {
			end, ok := jsontext.SkipValue(b, i)
			if !ok {
				return dst, i, jsontext.ErrSyntax
			}
			i = end
		} else {
			mark := len(dst)
			if !first {
				dst = append(dst, ',')
			}
			var err error
			if v.scratch, err = jsontext.AppendUnquoted(v.scratch[:0], key); err != nil {
				return dst, i, err
			}
			dst = appendJSONString(dst, v.scratch)
			dst = append(dst, ':')
			if dst, i, err = v.value(dst, b, i); err != nil {
				return dst[:mark], i, err
			}
			first = false
		}
		i = jsontext.SkipSpace(b, i)
		switch {
		case i >= len(b):
			return dst, i, jsontext.ErrSyntax
		case b[i] == '}':
			return append(dst, '}'), i + 1, nil
		case b[i] != ',':
			return dst, i, jsontext.ErrSyntax
		}
		i = jsontext.SkipSpace(b, i+1)
	}
}

// dropped reports whether the member value at b[i] is one Debezium leaves
// out: null, or an empty array.
func dropped(b []byte, i int) bool {
	if len(b)-i >= 4 && string(b[i:i+4]) == "null" {
		return true
	}
	if i < len(b) && b[i] == '[' {
		return jsontext.SkipSpace(b, i+1) < len(b) && b[jsontext.SkipSpace(b, i+1)] == ']'
	}
	return false
}

// array writes the array at b[i], every element kept.
func (v *jsonValue) array(dst, b []byte, i int) ([]byte, int, error) {
	dst = append(dst, '[')
	i = jsontext.SkipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return append(dst, ']'), i + 1, nil
	}
	for n := 0; ; n++ {
		if n > 0 {
			dst = append(dst, ',')
		}
		var err error
		if dst, i, err = v.value(dst, b, i); err != nil {
			return dst, i, err
		}
		i = jsontext.SkipSpace(b, i)
		switch {
		case i >= len(b):
			return dst, i, jsontext.ErrSyntax
		case b[i] == ']':
			return append(dst, ']'), i + 1, nil
		case b[i] != ',':
			return dst, i, jsontext.ErrSyntax
		}
		i = jsontext.SkipSpace(b, i+1)
	}
}

// appendNumber writes a JSON number: an integer as it is, anything with a
// fraction or an exponent as Java's Double.toString writes the double.
func appendNumber(dst, num []byte) ([]byte, error) {
	integer := true
	for _, c := range num {
		if c == '.' || c == 'e' || c == 'E' {
			integer = false
		}
	}
	if integer {
		if _, err := strconv.ParseFloat(string(num), 64); err != nil && !errors.Is(err, strconv.ErrRange) {
			return dst, jsontext.ErrSyntax
		}
		return append(dst, num...), nil
	}
	f, err := strconv.ParseFloat(string(num), 64)
	if err != nil {
		return dst, jsontext.ErrSyntax
	}
	return appendJavaDouble(dst, f), nil
}

// appendJavaDouble writes f as Java's Double.toString does (Java 19+: the
// shortest digits that read back as f): plain decimal notation with at
// least one fraction digit for 10^-3 ≤ |f| < 10^7, else d.ddd…E±n.
func appendJavaDouble(dst []byte, f float64) []byte {
	if f == 0 {
		return append(dst, "0.0"...) // Debezium writes -0.0 as 0.0 too (jsonb keeps 0.0)
	}
	var buf [32]byte
	e := strconv.AppendFloat(buf[:0], f, 'e', -1, 64) // -d.ddde±XX
	neg := e[0] == '-'
	if neg {
		e = e[1:]
	}
	mant, exp := e, 0
	for k := 0; k < len(e); k++ {
		if e[k] == 'e' {
			mant = e[:k]
			exp, _ = strconv.Atoi(string(e[k+1:]))
			break
		}
	}
	var digits [24]byte
	nd := 0
	for _, c := range mant {
		if c != '.' {
			digits[nd] = c
			nd++
		}
	}
	if neg {
		dst = append(dst, '-')
	}
	abs := f
	if abs < 0 {
		abs = -abs
	}
	if abs >= 1e-3 && abs < 1e7 {
		// Plain: the point after exp+1 digits.
		point := exp + 1
		switch {
		case point <= 0:
			dst = append(dst, '0', '.')
			for k := 0; k < -point; k++ {
				dst = append(dst, '0')
			}
			return append(dst, digits[:nd]...)
		case point >= nd:
			dst = append(dst, digits[:nd]...)
			for k := nd; k < point; k++ {
				dst = append(dst, '0')
			}
			return append(dst, '.', '0')
		default:
			dst = append(dst, digits[:point]...)
			dst = append(dst, '.')
			return append(dst, digits[point:nd]...)
		}
	}
	dst = append(dst, digits[0], '.')
	if nd == 1 {
		dst = append(dst, '0')
	} else {
		dst = append(dst, digits[1:nd]...)
	}
	dst = append(dst, 'E')
	return strconv.AppendInt(dst, int64(exp), 10)
}
