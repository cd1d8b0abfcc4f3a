package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"
)

// render writes a value hamba/avro decoded (into an any) with the Avro
// schema schemaJSON as one line of JSON a human reads easily: record fields
// in schema order (a decoded record is a Go map, which has none), union
// values unwrapped, fixed values as base64 like bytes, and timestamps as
// RFC 3339 text.
func render(schemaJSON string, native any) (string, error) {
	var schema any
	if err := json.Unmarshal([]byte(schemaJSON), &schema); err != nil {
		return "", fmt.Errorf("parse schema: %w", err)
	}
	r := &renderer{names: map[string]any{}}
	if err := r.value(schema, "", native); err != nil {
		return "", err
	}
	return r.buf.String(), nil
}

// renderer holds the output and the named types seen so far, by full name.
type renderer struct {
	buf   bytes.Buffer
	names map[string]any
}

// value writes v, which has schema s; ns is the enclosing namespace.
func (r *renderer) value(s any, ns string, v any) error {
	switch s := s.(type) {
	case string: // a primitive, or a reference to a named type
		if def, ok := r.names[fullName(s, ns)]; ok {
			return r.value(def, ns, v)
		}
		return r.scalar(v)
	case []any: // a union: hamba/avro gives nil, a primitive or logical branch's
		// value bare, or {"branch name": value} (a named type, a map, an array,
		// and every branch of a union that has one of those)
		m, ok := v.(map[string]any)
		if v == nil || !ok || len(m) != 1 {
			return r.scalar(v)
		}
		for name, inner := range m {
			for _, branch := range s {
				if r.branchName(branch, ns) == name {
					return r.value(branch, ns, inner)
				}
			}
			return r.scalar(inner)
		}
	case map[string]any:
		typ, _ := s["type"].(string)
		switch typ {
		case "record", "error":
			name := r.define(s, ns)
			return r.record(s, namespaceOf(name), v)
		case "enum":
			r.define(s, ns)
			return r.scalar(v)
		case "fixed": // hamba/avro gives a [size]byte array
			r.define(s, ns)
			if a := reflect.ValueOf(v); a.Kind() == reflect.Array && a.Type().Elem().Kind() == reflect.Uint8 {
				b := make([]byte, a.Len())
				reflect.Copy(reflect.ValueOf(b), a)
				v = b
			}
			return r.scalar(v)
		case "array":
			items, ok := v.([]any)
			if !ok {
				return r.scalar(v)
			}
			r.buf.WriteByte('[')
			for i, it := range items {
				if i > 0 {
					r.buf.WriteByte(',')
				}
				if err := r.value(s["items"], ns, it); err != nil {
					return err
				}
			}
			r.buf.WriteByte(']')
			return nil
		case "map":
			m, ok := v.(map[string]any)
			if !ok {
				return r.scalar(v)
			}
			keys := make([]string, 0, len(m))
			for k := range m {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			r.buf.WriteByte('{')
			for i, k := range keys {
				if i > 0 {
					r.buf.WriteByte(',')
				}
				r.scalar(k)
				r.buf.WriteByte(':')
				if err := r.value(s["values"], ns, m[k]); err != nil {
					return err
				}
			}
			r.buf.WriteByte('}')
			return nil
		}
		return r.value(s["type"], ns, v) // a primitive with a logicalType
	}
	return r.scalar(v)
}

// record writes a record's fields in the order the schema lists them.
func (r *renderer) record(s map[string]any, ns string, v any) error {
	m, ok := v.(map[string]any)
	fields, _ := s["fields"].([]any)
	if !ok {
		return r.scalar(v)
	}
	r.buf.WriteByte('{')
	for i, f := range fields {
		field, _ := f.(map[string]any)
		name, _ := field["name"].(string)
		if i > 0 {
			r.buf.WriteByte(',')
		}
		r.scalar(name)
		r.buf.WriteByte(':')
		if err := r.value(field["type"], ns, m[name]); err != nil {
			return fmt.Errorf("field %s: %w", name, err)
		}
	}
	r.buf.WriteByte('}')
	return nil
}

// scalar writes v as JSON; a time.Time becomes RFC 3339 text in UTC.
func (r *renderer) scalar(v any) error {
	if t, ok := v.(time.Time); ok {
		v = t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	r.buf.Write(b)
	return nil
}

// define records a named type under its full name and returns that name.
func (r *renderer) define(s map[string]any, ns string) string {
	name, _ := s["name"].(string)
	if space, ok := s["namespace"].(string); ok && !strings.Contains(name, ".") {
		ns = space
	}
	full := fullName(name, ns)
	r.names[full] = s
	return full
}

// branchName is the key hamba/avro uses for a union branch: the full name
// of a named type, else the type's name (with ".logicalType" when it has
// one).
func (r *renderer) branchName(s any, ns string) string {
	switch s := s.(type) {
	case string:
		if _, ok := r.names[fullName(s, ns)]; ok {
			return fullName(s, ns)
		}
		return s
	case map[string]any:
		if name, ok := s["name"].(string); ok {
			if space, ok := s["namespace"].(string); ok && !strings.Contains(name, ".") {
				ns = space
			}
			return fullName(name, ns)
		}
		typ, _ := s["type"].(string)
		if lt, ok := s["logicalType"].(string); ok {
			return typ + "." + lt
		}
		return typ
	}
	return ""
}

// fullName qualifies name with ns unless it already has a namespace.
func fullName(name, ns string) string {
	if ns == "" || strings.Contains(name, ".") {
		return name
	}
	return ns + "." + name
}

// namespaceOf is the namespace part of a full name.
func namespaceOf(full string) string {
	if i := strings.LastIndexByte(full, '.'); i >= 0 {
		return full[:i]
	}
	return ""
}
