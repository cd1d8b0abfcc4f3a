// Package jsontext walks JSON text without decoding it into values: the
// members of an object, string unquoting and value skipping, on bytes,
// allocating only to unescape a string. The relay uses it for the headers
// jsonb column and the content of logical decoding messages; the JSON it
// reads comes from PostgreSQL's json/jsonb output or from applications, and
// structure is checked loosely (the Avro encoder checks values strictly).
package jsontext

import (
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// ErrSyntax means the text is not valid JSON.
var ErrSyntax = errors.New("not valid JSON")

// Object iterates over the members of a JSON object.
type Object struct {
	b    []byte
	i    int
	done bool
}

// OpenObject starts iterating over the object b holds (surrounding space
// allowed). null and empty text give an object without members (isNull
// true); another JSON value gives an error naming its kind.
func OpenObject(b []byte) (o Object, isNull bool, err error) {
	i := SkipSpace(b, 0)
	if i == len(b) {
		return Object{done: true}, true, nil
	}
	if b[i] != '{' {
		if end, ok := SkipValue(b, i); ok && SkipSpace(b, end) == len(b) {
			if string(b[i:end]) == "null" {
				return Object{done: true}, true, nil
			}
			return Object{done: true}, false, fmt.Errorf("got %s", KindOf(b[i]))
		}
		return Object{done: true}, false, ErrSyntax
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		if SkipSpace(b, i+1) != len(b) {
			return Object{done: true}, false, ErrSyntax
		}
		return Object{done: true}, false, nil
	}
	return Object{b: b, i: i}, false, nil
}

// Next returns the next member: its key, unquoted (aliasing the input
// unless it has escapes), and its raw value text. ok is false after the
// last member, or with err after malformed text.
func (o *Object) Next() (key, raw []byte, ok bool, err error) {
	if o.done {
		return nil, nil, false, nil
	}
	key, raw, err = o.member()
	if err != nil {
		o.done = true
		return nil, nil, false, err
	}
	return key, raw, true, nil
}

func (o *Object) member() (key, raw []byte, err error) {
	b, i := o.b, o.i
	if i >= len(b) || b[i] != '"' {
		return nil, nil, ErrSyntax
	}
	kEnd, ok := SkipString(b, i)
	if !ok {
		return nil, nil, ErrSyntax
	}
	if key, err = Unquote(b[i:kEnd]); err != nil {
		return nil, nil, err
	}
	i = SkipSpace(b, kEnd)
	if i >= len(b) || b[i] != ':' {
		return nil, nil, ErrSyntax
	}
	i = SkipSpace(b, i+1)
	vEnd, ok := SkipValue(b, i)
	if !ok {
		return nil, nil, ErrSyntax
	}
	raw = b[i:vEnd]
	i = SkipSpace(b, vEnd)
	switch {
	case i >= len(b):
		return nil, nil, ErrSyntax
	case b[i] == '}':
		if SkipSpace(b, i+1) != len(b) {
			return nil, nil, ErrSyntax
		}
		o.done = true
	case b[i] == ',':
		o.i = SkipSpace(b, i+1)
	default:
		return nil, nil, ErrSyntax
	}
	return key, raw, nil
}

// KindOf names the JSON value starting with c, for messages: "an array",
// "a string", "a boolean" or "a number".
func KindOf(c byte) string {
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

// Unquote returns a JSON string's contents; it allocates only for escapes.
func Unquote(q []byte) ([]byte, error) {
	inner := q[1 : len(q)-1]
	for _, c := range inner {
		if c == '\\' {
			var s string
			if err := json.Unmarshal(q, &s); err != nil {
				return nil, fmt.Errorf("%w: %v", ErrSyntax, err)
			}
			return []byte(s), nil
		}
	}
	return inner, nil
}

// SkipSpace returns the index of the first non-space byte at or after i.
func SkipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// SkipString returns the index after the closing quote of the string at b[i].
func SkipString(b []byte, i int) (int, bool) {
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

// SkipValue returns the index after the JSON value starting at b[i]. It
// checks structure loosely; jsonb text from PostgreSQL is always valid.
func SkipValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch c := b[i]; {
	case c == '"':
		return SkipString(b, i)
	case c == '{' || c == '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, ok := SkipString(b, j)
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

// Errors of AppendUnescaped besides ErrSyntax.
var (
	// ErrBadUTF8 means a string is not valid UTF-8.
	ErrBadUTF8 = errors.New("string is not valid UTF-8")
	// ErrSurrogate means a \u escape is half of a surrogate pair without
	// the other half.
	ErrSurrogate = errors.New(`string has an unpaired \u surrogate`)
)

// AppendUnquoted appends the contents of the JSON string literal q (quotes
// included) to dst, resolving its escapes (see AppendUnescaped).
func AppendUnquoted(dst, q []byte) ([]byte, error) {
	if len(q) < 2 || q[0] != '"' || q[len(q)-1] != '"' {
		return dst, ErrSyntax
	}
	return AppendUnescaped(dst, q[1:len(q)-1])
}

// AppendUnescaped appends the decoded content of a JSON string, raw being
// what stands between its quotes. A control character, a bad escape
// (ErrSyntax), invalid UTF-8 (ErrBadUTF8) or an unpaired surrogate
// (ErrSurrogate) is an error. It allocates nothing beyond dst's growth and
// copies runs without escapes at once.
func AppendUnescaped(dst, raw []byte) ([]byte, error) {
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			j := i
			for j < len(raw) && raw[j] != '\\' {
				if raw[j] < 0x20 {
					return dst, ErrSyntax
				}
				j++
			}
			if !utf8.Valid(raw[i:j]) {
				return dst, ErrBadUTF8
			}
			dst = append(dst, raw[i:j]...)
			i = j
			continue
		}
		if i+1 >= len(raw) {
			return dst, ErrSyntax
		}
		switch raw[i+1] {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case '"', '\\', '/':
			dst = append(dst, raw[i+1])
		case 'u':
			r, ok := Hex4(raw[i+2:])
			if !ok {
				return dst, ErrSyntax
			}
			i += 6
			if utf16.IsSurrogate(r) {
				if r >= 0xdc00 || i+6 > len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
					return dst, ErrSurrogate
				}
				r2, ok := Hex4(raw[i+2:])
				if !ok {
					return dst, ErrSyntax
				}
				if r = utf16.DecodeRune(r, r2); r == utf8.RuneError {
					return dst, ErrSurrogate
				}
				i += 6
			}
			dst = utf8.AppendRune(dst, r)
			continue
		default:
			return dst, ErrSyntax
		}
		i += 2
	}
	return dst, nil
}

// Hex4 reads the four hex digits at the start of b.
func Hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
