package debeziumjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/cdc-relay/cdc-relay/internal/jsontext"
)

// ErrNotObject is returned for a payload that is not a JSON object.
// (Debezium writes a scalar's jsonb text as a JSON string and fails on an
// array; the relay treats both as invalid events.)
var ErrNotObject = errors.New("payload is not a JSON object")

// ErrUnconvertible is returned for an object Debezium cannot convert: it
// fails the record (the task, with Connect's default errors.tolerance).
// The cases: an integer beyond int64, or arrays of objects whose members
// of one name have different types (1 and "x", 1 and 2147483648).
var ErrUnconvertible = errors.New("payload cannot be converted as Debezium's outbox router does")

// AppendPayload appends the bytes Debezium's outbox router
// (table.expand.json.payload=true) and JsonConverter
// (schemas.enable=false) write for the jsonb text payload:
//
//   - members in the payload's order (jsonb's), compact;
//   - null members and members holding an empty array left out, at every
//     depth (a null array element stays);
//   - in an array of objects, every object gets the members any of them
//     has, missing ones as null (in the order they first appear; Debezium
//     merges them through a Java HashSet, so with differing objects its
//     order may differ);
//   - integers as they are, other numbers by AppendDouble, strings by
//     AppendString;
//   - where Debezium cannot infer a schema (an array mixing types, or
//     int32 and int64 numbers, or holding only nulls, or whose first
//     element is an empty array), the whole payload text as one JSON
//     string (AppendString of payload).
//
// It returns ErrNotObject or ErrUnconvertible (wrapped) where Debezium
// writes no object.
func AppendPayload(dst, payload []byte) ([]byte, error) {
	// encoding/json would take invalid UTF-8 and unpaired surrogates for
	// U+FFFD: the relay's one tokenizer decides what is JSON.
	if err := jsontext.Check(payload); err != nil {
		return dst, fmt.Errorf("parse payload: %w", err)
	}
	doc, err := parse(payload)
	if err != nil {
		return dst, err
	}
	if doc.kind != kindObject {
		return dst, ErrNotObject
	}
	s, err := schemaOf(doc)
	if errors.Is(err, errFallback) {
		return AppendString(dst, payload), nil
	}
	if err != nil {
		return dst, err
	}
	return appendValue(dst, doc, s)
}

// kind is a JSON value's type, numbers split as Jackson parses them.
type kind uint8

const (
	kindNull kind = iota
	kindBool
	kindString
	kindInt    // fits int32: Jackson's IntNode
	kindLong   // fits int64: LongNode
	kindBig    // a larger integer: BigIntegerNode
	kindDouble // has a fraction or an exponent: DoubleNode
	kindArray
	kindObject
)

// isNumber reports whether k is one of the number kinds.
func (k kind) isNumber() bool { return k >= kindInt && k <= kindDouble }

// node is a parsed JSON value; members keep their order.
type node struct {
	kind  kind
	text  string // a string's value, a number's text
	b     bool
	elems []*node // array elements
	names []string
	vals  []*node // object members
}

// member returns the value of the member called name, nil when absent.
func (n *node) member(name string) *node {
	for i, k := range n.names {
		if k == name {
			return n.vals[i]
		}
	}
	return nil
}

// parse reads one JSON value.
func parse(b []byte) (*node, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	n, err := parseValue(dec)
	if err != nil {
		return nil, fmt.Errorf("parse payload: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("parse payload: data after the value")
	}
	return n, nil
}

func parseValue(dec *json.Decoder) (*node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case nil:
		return &node{kind: kindNull}, nil
	case bool:
		return &node{kind: kindBool, b: t}, nil
	case string:
		return &node{kind: kindString, text: t}, nil
	case json.Number:
		return &node{kind: numberKind(string(t)), text: string(t)}, nil
	case json.Delim:
		n := &node{kind: kindArray}
		if t == '{' {
			n.kind = kindObject
		}
		for dec.More() {
			if n.kind == kindObject {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				n.names = append(n.names, k.(string))
			}
			v, err := parseValue(dec)
			if err != nil {
				return nil, err
			}
			if n.kind == kindObject {
				n.vals = append(n.vals, v)
			} else {
				n.elems = append(n.elems, v)
			}
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return nil, err
		}
		return n, nil
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}

// numberKind classifies a JSON number as Jackson does.
func numberKind(s string) kind {
	if strings.ContainsAny(s, ".eE") {
		return kindDouble
	}
	v, err := strconv.ParseInt(s, 10, 64)
	switch {
	case err != nil:
		return kindBig
	case v >= math.MinInt32 && v <= math.MaxInt32:
		return kindInt
	}
	return kindLong
}

// schemaType is a Kafka Connect schema type.
type schemaType uint8

const (
	typeString schemaType = iota
	typeBool
	typeInt32
	typeInt64
	typeFloat64
	typeArray
	typeStruct
)

// schema is the Connect schema Debezium infers for a value.
type schema struct {
	typ    schemaType
	elem   *schema // typeArray
	fields []field // typeStruct, in order
}

type field struct {
	name   string
	schema *schema
}

// errFallback: Debezium cannot infer a schema and writes the payload text
// as a string.
var errFallback = errors.New("no schema: the payload is written as a string")

// schemaOf infers n's schema as Debezium does; nil for a value that gets
// none (null, an empty array), so that its member is left out.
func schemaOf(n *node) (*schema, error) {
	switch n.kind {
	case kindString:
		return &schema{typ: typeString}, nil
	case kindBool:
		return &schema{typ: typeBool}, nil
	case kindInt:
		return &schema{typ: typeInt32}, nil
	case kindLong:
		return &schema{typ: typeInt64}, nil
	case kindBig, kindDouble:
		return &schema{typ: typeFloat64}, nil
	case kindArray:
		if len(n.elems) == 0 {
			return nil, nil
		}
		elem, err := elementSchema(n)
		if err != nil {
			return nil, err
		}
		return &schema{typ: typeArray, elem: elem}, nil
	case kindObject:
		s := &schema{typ: typeStruct}
		for i, name := range n.names {
			fs, err := schemaOf(n.vals[i])
			if err != nil {
				return nil, err
			}
			if fs != nil {
				s.fields = append(s.fields, field{name, fs})
			}
		}
		return s, nil
	}
	return nil, nil
}

// elementSchema is the schema of a non-empty array's elements: the first
// non-null element's, after checking that every non-null element has its
// JSON type (and, for numbers, its schema); for objects the union of all
// elements' members.
func elementSchema(n *node) (*schema, error) {
	var ref *node
	var refSchema *schema
	for _, e := range n.elems {
		if e.kind == kindNull {
			continue
		}
		if ref == nil {
			ref = e
		}
		if jsonType(e.kind) != jsonType(ref.kind) {
			return nil, errFallback
		}
		if ref.kind.isNumber() {
			if refSchema == nil {
				refSchema, _ = schemaOf(ref)
			}
			es, _ := schemaOf(e)
			if es.typ != refSchema.typ {
				return nil, errFallback
			}
		}
	}
	if ref == nil {
		return nil, errFallback // only nulls
	}
	if ref.kind != kindObject {
		s, err := schemaOf(ref)
		if err != nil {
			return nil, err
		}
		if s == nil {
			return nil, errFallback // e.g. the first element is []
		}
		return s, nil
	}
	var merged *schema
	for _, e := range n.elems {
		if e.kind != kindObject {
			continue
		}
		s, err := schemaOf(e)
		if err != nil {
			return nil, err
		}
		if merged == nil {
			merged = s
			continue
		}
		for _, f := range s.fields {
			if !hasField(merged, f.name) {
				merged.fields = append(merged.fields, f)
			}
		}
	}
	return merged, nil
}

// jsonType folds the number kinds into one, as Jackson's node types do.
func jsonType(k kind) kind {
	if k.isNumber() {
		return kindInt
	}
	return k
}

func hasField(s *schema, name string) bool {
	for _, f := range s.fields {
		if f.name == name {
			return true
		}
	}
	return false
}

// appendValue writes n (nil: absent) under schema s, failing where Kafka
// Connect's Struct validation fails.
func appendValue(dst []byte, n *node, s *schema) ([]byte, error) {
	if n == nil || n.kind == kindNull {
		return append(dst, "null"...), nil
	}
	mismatch := func() ([]byte, error) {
		return dst, fmt.Errorf("%w: a %s value where the inferred schema says %s", ErrUnconvertible, kindName(n.kind), typeName(s.typ))
	}
	switch s.typ {
	case typeString:
		if n.kind != kindString {
			return mismatch()
		}
		return AppendString(dst, []byte(n.text)), nil
	case typeBool:
		if n.kind != kindBool {
			return mismatch()
		}
		return strconv.AppendBool(dst, n.b), nil
	case typeInt32, typeInt64:
		if (s.typ == typeInt32 && n.kind != kindInt) || (s.typ == typeInt64 && n.kind != kindLong) {
			return mismatch()
		}
		v, _ := strconv.ParseInt(n.text, 10, 64)
		return strconv.AppendInt(dst, v, 10), nil
	case typeFloat64:
		if n.kind != kindDouble {
			return mismatch() // an integer, or one beyond int64 (a BigDecimal)
		}
		f, err := strconv.ParseFloat(n.text, 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return dst, fmt.Errorf("%w: number %s: %v", ErrUnconvertible, n.text, err)
		}
		return AppendDouble(dst, f), nil
	case typeArray:
		if n.kind != kindArray {
			return mismatch()
		}
		dst = append(dst, '[')
		for i, e := range n.elems {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendValue(dst, e, s.elem); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	case typeStruct:
		if n.kind != kindObject {
			return mismatch()
		}
		dst = append(dst, '{')
		for i, f := range s.fields {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendString(dst, []byte(f.name))
			dst = append(dst, ':')
			var err error
			if dst, err = appendValue(dst, n.member(f.name), f.schema); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	}
	return mismatch()
}

func kindName(k kind) string {
	return [...]string{"null", "boolean", "string", "int32", "int64", "big integer", "double", "array", "object"}[k]
}

func typeName(t schemaType) string {
	return [...]string{"STRING", "BOOLEAN", "INT32", "INT64", "FLOAT64", "ARRAY", "STRUCT"}[t]
}
