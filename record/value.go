package record

import (
	"errors"
	"math"
	"strconv"

	"github.com/cdc-relay/cdc-relay/internal/debeziumjson"
	"github.com/cdc-relay/cdc-relay/internal/jsontext"
)

var errNotObject = errors.New("payload is not a JSON object")

// errComplex stops the fast path at a payload Debezium's schema inference
// shapes (an array of objects or arrays, of mixed types, of nulls only, a
// number beyond int64): debeziumjson.AppendPayload writes those.
var errComplex = errors.New("payload needs Debezium's schema inference")

// jsonValue writes the payload as Debezium's outbox router writes it with
// table.expand.json.payload=true and JsonConverter without schemas
// (docs/DEBEZIUM-FORMAT.md): compact, with the members in the payload's
// order (jsonb's), members whose value is null or an empty array left out
// at every depth, strings escaped as Jackson escapes them, integers as they
// are and other numbers as Java's Double.toString prints them.
//
// Most payloads take a streaming path that allocates nothing. One with an
// array Debezium's schema inference reshapes goes to
// debeziumjson.AppendPayload, which builds the tree. Where Debezium fails
// the record (an integer beyond int64, members of one name with different
// types across an array's objects), the relay writes the payload with the
// streaming rules instead of giving it up.
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
	out, err := v.stream(dst, payload, i, true)
	if errors.Is(err, errComplex) {
		out, err = debeziumjson.AppendPayload(dst[:n], payload)
		if errors.Is(err, debeziumjson.ErrUnconvertible) {
			out, err = v.stream(dst[:n], payload, i, false)
		}
	}
	if err != nil {
		return dst[:n], errors.New("payload is not valid JSON: " + err.Error())
	}
	return out, nil
}

// bad is the error for the payload b, in which the writer found a fault:
// the tokenizer's account of the first one.
func bad(b []byte) error {
	if err := jsontext.Check(b); err != nil {
		return err
	}
	return jsontext.ErrSyntax
}

// stream writes the object at payload[i] and checks that nothing follows.
// strict stops at errComplex where Debezium would reshape the payload.
func (v *jsonValue) stream(dst, payload []byte, i int, strict bool) ([]byte, error) {
	out, end, _, err := v.value(dst, payload, i, strict)
	if err == nil && jsontext.SkipSpace(payload, end) != len(payload) {
		err = bad(payload)
	}
	return out, err
}

// kinds of JSON values, numbers split as Jackson parses them; an array's
// elements must share one (nulls aside) for the fast path.
const (
	kindNull = iota
	kindBool
	kindString
	kindInt  // fits int32
	kindLong // fits int64
	kindDouble
	kindObject
	kindArray
)

// value writes the JSON value at b[i] and returns the index after it and
// its kind.
func (v *jsonValue) value(dst, b []byte, i int, strict bool) ([]byte, int, int, error) {
	if i >= len(b) {
		return dst, i, 0, bad(b)
	}
	switch c := b[i]; {
	case c == '{':
		dst, i, err := v.object(dst, b, i, strict)
		return dst, i, kindObject, err
	case c == '[':
		dst, i, err := v.array(dst, b, i, strict)
		return dst, i, kindArray, err
	case c == '"':
		dst, end, err := v.appendString(dst, b, i)
		return dst, end, kindString, err
	case c == '-' || ('0' <= c && c <= '9'):
		num, end, err := jsontext.ScanNumber(b, i)
		if err != nil {
			return dst, i, 0, err
		}
		return appendNumber(dst, &num, end, strict)
	}
	for _, lit := range [...]string{"true", "false", "null"} {
		if len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit {
			kind := kindBool
			if lit == "null" {
				kind = kindNull
			}
			return append(dst, lit...), i + len(lit), kind, nil
		}
	}
	return dst, i, 0, bad(b)
}

// appendString writes the JSON string at b[i] as Jackson escapes it and
// returns the index after it.
func (v *jsonValue) appendString(dst, b []byte, i int) ([]byte, int, error) {
	end, escaped, err := jsontext.ScanString(b, i)
	if err != nil {
		return dst, i, err
	}
	if !escaped {
		return debeziumjson.AppendString(dst, b[i+1:end-1]), end, nil
	}
	if v.scratch, err = jsontext.AppendUnescaped(v.scratch[:0], b[i+1:end-1]); err != nil {
		return dst, i, err
	}
	return debeziumjson.AppendString(dst, v.scratch), end, nil
}

// appendNumber writes a JSON number: an integer as it is (-0 as 0), anything with a
// fraction or an exponent as Java's Double.toString writes the double.
// The tokenizer has checked the number's grammar, which both parsers accept.
func appendNumber(dst []byte, num *jsontext.Number, end int, strict bool) ([]byte, int, int, error) {
	if !num.IsInteger() {
		f, err := strconv.ParseFloat(string(num.Raw), 64)
		switch {
		case errors.Is(err, strconv.ErrRange):
			// Beyond a double (Jackson would print Infinity, which is
			// not JSON): the number as it is.
			return append(dst, num.Raw...), end, kindDouble, nil
		case err != nil:
			return dst, end, 0, err
		}
		return debeziumjson.AppendDouble(dst, f), end, kindDouble, nil
	}
	n, err := strconv.ParseInt(string(num.Raw), 10, 64)
	switch {
	case err == nil && n == 0:
		// -0 too: Jackson reads it as the int 0 and writes 0.
		return append(dst, '0'), end, kindInt, nil
	case err == nil && n >= math.MinInt32 && n <= math.MaxInt32:
		return append(dst, num.Raw...), end, kindInt, nil
	case err == nil:
		return append(dst, num.Raw...), end, kindLong, nil
	case !errors.Is(err, strconv.ErrRange):
		return dst, end, 0, err
	case strict:
		return dst, end, 0, errComplex // Debezium fails on it
	}
	return append(dst, num.Raw...), end, kindLong, nil
}

// object writes the object at b[i], leaving out null and empty-array
// members.
func (v *jsonValue) object(dst, b []byte, i int, strict bool) ([]byte, int, error) {
	dst = append(dst, '{')
	i = jsontext.SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return append(dst, '}'), i + 1, nil
	}
	first := true
	for {
		if i >= len(b) || b[i] != '"' {
			return dst, i, bad(b)
		}
		key := i
		kEnd, _, err := jsontext.ScanString(b, i)
		if err != nil {
			return dst, i, err
		}
		i = jsontext.SkipSpace(b, kEnd)
		if i >= len(b) || b[i] != ':' {
			return dst, i, bad(b)
		}
		i = jsontext.SkipSpace(b, i+1)
		if dropped(b, i) {
			if i, err = jsontext.SkipValue(b, i); err != nil {
				return dst, i, err
			}
		} else {
			if !first {
				dst = append(dst, ',')
			}
			if dst, _, err = v.appendString(dst, b, key); err != nil {
				return dst, i, err
			}
			dst = append(dst, ':')
			if dst, i, _, err = v.value(dst, b, i, strict); err != nil {
				return dst, i, err
			}
			first = false
		}
		i = jsontext.SkipSpace(b, i)
		switch {
		case i >= len(b):
			return dst, i, bad(b)
		case b[i] == '}':
			return append(dst, '}'), i + 1, nil
		case b[i] != ',':
			return dst, i, bad(b)
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
		j := jsontext.SkipSpace(b, i+1)
		return j < len(b) && b[j] == ']'
	}
	return false
}

// array writes the array at b[i], every element kept. Strictly, its
// elements must be scalars of one kind besides nulls, at least one of
// them not null: anything else Debezium's schema inference reshapes.
func (v *jsonValue) array(dst, b []byte, i int, strict bool) ([]byte, int, error) {
	dst = append(dst, '[')
	open := i
	i = jsontext.SkipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return append(dst, ']'), i + 1, nil
	}
	elem := kindNull
	if strict && i < len(b) && b[i] == '{' {
		if !uniformObjects(b, open) {
			return dst, i, errComplex
		}
		elem = kindObject // checked: written as they are
	}
	for n := 0; ; n++ {
		if n > 0 {
			dst = append(dst, ',')
		}
		var kind int
		var err error
		if dst, i, kind, err = v.value(dst, b, i, strict); err != nil {
			return dst, i, err
		}
		if strict {
			switch {
			case kind == kindObject && elem == kindObject:
			case kind == kindObject || kind == kindArray:
				return dst, i, errComplex
			case kind == kindNull:
			case elem == kindNull:
				elem = kind
			case kind != elem:
				return dst, i, errComplex
			}
		}
		i = jsontext.SkipSpace(b, i)
		switch {
		case i >= len(b):
			return dst, i, bad(b)
		case b[i] == ']':
			if strict && elem == kindNull {
				return dst, i, errComplex // nulls only
			}
			return append(dst, ']'), i + 1, nil
		case b[i] != ',':
			return dst, i, bad(b)
		}
		i = jsontext.SkipSpace(b, i+1)
	}
}

// maxUniformMembers bounds the members uniformObjects compares without
// allocating; objects with more take Debezium's schema inference.
const maxUniformMembers = 32

// uniformObjects reports whether the array at b[i] holds only objects with the same members in the same order, each a
// string, boolean or number of the same Jackson kind in every object, none
// null. Debezium writes such an array as it is (the union of the members
// is each object's own), so the streaming path can too; any other array of
// objects goes through its schema inference.
func uniformObjects(b []byte, i int) bool {
	end, err := jsontext.SkipValue(b, i)
	if err != nil {
		return false
	}
	var keys [maxUniformMembers][]byte
	var kinds [maxUniformMembers]int
	count := -1
	j := jsontext.SkipSpace(b, i+1)
	for j < end-1 {
		elemEnd, err := jsontext.SkipValue(b, j)
		if err != nil || b[j] != '{' {
			return false
		}
		obj, _, err := jsontext.OpenObject(b[j:elemEnd])
		if err != nil {
			return false
		}
		n := 0
		for {
			key, raw, more, err := obj.Next()
			if err != nil {
				return false
			}
			if !more {
				break
			}
			kind := scalarKind(raw)
			if kind < 0 || n == maxUniformMembers {
				return false
			}
			if count < 0 {
				keys[n], kinds[n] = key, kind
			} else if n >= count || string(keys[n]) != string(key) || kinds[n] != kind {
				return false
			}
			n++
		}
		if count < 0 {
			count = n
		} else if n != count {
			return false
		}
		j = jsontext.SkipSpace(b, elemEnd)
		if j < len(b) && b[j] == ',' {
			j = jsontext.SkipSpace(b, j+1)
		}
	}
	return count >= 0
}

// scalarKind is the kind of a non-null scalar JSON value, -1 for anything
// else.
func scalarKind(raw []byte) int {
	switch c := raw[0]; {
	case c == '"':
		return kindString
	case c == 't' || c == 'f':
		return kindBool
	case c == '-' || ('0' <= c && c <= '9'):
		for _, d := range raw {
			if d == '.' || d == 'e' || d == 'E' {
				return kindDouble
			}
		}
		n, err := strconv.ParseInt(string(raw), 10, 64)
		switch {
		case err != nil:
			return -1
		case n >= math.MinInt32 && n <= math.MaxInt32:
			return kindInt
		}
		return kindLong
	}
	return -1
}
