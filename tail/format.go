package tail

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	recordpkg "github.com/cdc-relay/cdc-relay/record"
	"github.com/cdc-relay/cdc-relay/schemaregistry"
)

// tail's output: what one record becomes, by the rules of `cdc-relay tail
// --help`. No I/O but the registry lookups, through lookup.

// tailTimeLayout is the record timestamp's form: RFC 3339 in UTC, to the
// millisecond Kafka keeps.
const tailTimeLayout = "2006-01-02T15:04:05.000Z07:00"

// tailFormatter turns records into tail's JSON lines. It is used by one
// goroutine.
type tailFormatter struct {
	// keyFormat is how the relay writes keys: with KeyString, a key that
	// is UTF-8 stays a string even when it reads as JSON (a key 42 is "42").
	keyFormat recordpkg.KeyFormat
	// lookup fetches a writer schema by id; nil without a registry.
	lookup func(ctx context.Context, id int) (*schemaregistry.WriterSchema, error)
	log    *slog.Logger

	schemas map[int]*schemaregistry.WriterSchema // ids are immutable: kept for good
	missing map[int]bool                         // ids the registry does not have
	warned  map[string]bool                      // warnings given once
}

func newTailFormatter(keyFormat recordpkg.KeyFormat, lookup func(context.Context, int) (*schemaregistry.WriterSchema, error), log *slog.Logger) *tailFormatter {
	return &tailFormatter{keyFormat: keyFormat, lookup: lookup, log: log,
		schemas: map[int]*schemaregistry.WriterSchema{}, missing: map[int]bool{}, warned: map[string]bool{}}
}

// warnOnce logs msg at WARN the first time key is seen.
func (f *tailFormatter) warnOnce(key, msg string, args ...any) {
	if f.warned[key] {
		return
	}
	f.warned[key] = true
	f.log.Warn(msg, args...)
}

// decoded is a key or value in JSON, with the schema that framed it.
type decoded struct {
	json     []byte
	schemaID int    // 0 when not Confluent-framed
	framed   bool   // Confluent-framed: schemaID is the id it names
	subject  string // "" when unknown
}

// data decodes a key or value. textKey: a UTF-8 key written as a string
// (KeyString) is a JSON string, never parsed as JSON. Only a registry
// failure (not an unknown id) is an error.
func (f *tailFormatter) data(ctx context.Context, topic string, b []byte, textKey bool) (decoded, error) {
	if b == nil {
		return decoded{json: []byte("null")}, nil
	}
	if len(b) >= 5 && b[0] == 0 {
		return f.framed(ctx, topic, b)
	}
	return decoded{json: plainJSON(nil, b, textKey)}, nil
}

// plainJSON is the rule for bytes that are not Confluent-framed: JSON
// embedded (compacted, so that a record stays on one line), other UTF-8 a
// string, anything else {"base64": ...}. textOnly skips the JSON case.
func plainJSON(dst, b []byte, textOnly bool) []byte {
	if !textOnly && json.Valid(b) {
		var buf bytes.Buffer
		json.Compact(&buf, b) // valid: cannot fail
		return append(dst, buf.Bytes()...)
	}
	if utf8.Valid(b) {
		return schemaregistry.AppendQuoted(dst, string(b))
	}
	return schemaregistry.AppendBase64(dst, b)
}

// framed decodes a value in the Confluent wire format: 0x00, the schema id
// in 4 big-endian bytes, the body. An id the registry does not know, a
// body the schema does not decode, a Protobuf schema, or no registry at
// all: the whole value is {"base64": ...}, with a warning.
func (f *tailFormatter) framed(ctx context.Context, topic string, b []byte) (decoded, error) {
	id := int(binary.BigEndian.Uint32(b[1:5]))
	d := decoded{schemaID: id, framed: true}
	raw := func() (decoded, error) {
		d.json = schemaregistry.AppendBase64(nil, b)
		return d, nil
	}
	if f.lookup == nil {
		f.warnOnce("no registry", "a value is in the Confluent wire format but no registry is set: it is printed as base64; set --schema-registry-url to decode it", "topic", topic, "schema_id", id)
		return raw()
	}
	w := f.schemas[id]
	if w == nil && !f.missing[id] {
		var err error
		w, err = f.lookup(ctx, id)
		switch {
		case errors.Is(err, schemaregistry.ErrSchemaNotFound):
			f.missing[id] = true
			f.warnOnce("missing "+strconv.Itoa(id), "the registry has no schema with the id a value names: it is printed as base64", "topic", topic, "schema_id", id)
		case err != nil:
			return d, fmt.Errorf("fetch schema id %d: %w", id, err)
		default:
			f.schemas[id] = w
		}
	}
	if w == nil {
		return raw()
	}
	d.subject = w.SubjectFor(topic)
	body := b[5:]
	switch {
	case w.Avro != nil:
		out, err := schemaregistry.AppendJSON(nil, w.Avro, body)
		if err != nil {
			f.warnOnce("undecodable "+strconv.Itoa(id), "a value does not decode with the schema its id names: it is printed as base64", "topic", topic, "schema_id", id, "error", err)
			return raw()
		}
		d.json = out
	case w.Type == "JSON" && json.Valid(body):
		d.json = plainJSON(nil, body, false)
	default:
		f.warnOnce("type "+w.Type, "values of this schema type are not decoded: they are printed as base64", "schema_type", w.Type, "schema_id", id)
		return raw()
	}
	return d, nil
}

// headersJSON is the headers as an object in the order the names first
// appear; a name that repeats gets an array of its values. A value is a
// string when UTF-8, null when null, else {"base64": ...}.
func headersJSON(dst []byte, hs []kgo.RecordHeader) []byte {
	var order []string
	byName := map[string][][]byte{}
	for _, h := range hs {
		if _, seen := byName[h.Key]; !seen {
			order = append(order, h.Key)
		}
		byName[h.Key] = append(byName[h.Key], h.Value)
	}
	value := func(dst, v []byte) []byte {
		switch {
		case v == nil:
			return append(dst, "null"...)
		case utf8.Valid(v):
			return schemaregistry.AppendQuoted(dst, string(v))
		}
		return schemaregistry.AppendBase64(dst, v)
	}
	dst = append(dst, '{')
	for i, name := range order {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = schemaregistry.AppendQuoted(dst, name)
		dst = append(dst, ':')
		vals := byName[name]
		if len(vals) == 1 {
			dst = value(dst, vals[0])
			continue
		}
		dst = append(dst, '[')
		for j, v := range vals {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = value(dst, v)
		}
		dst = append(dst, ']')
	}
	return append(dst, '}')
}

// appendLine appends r's line: one JSON object with the members topic,
// partition, offset, timestamp, key, headers, value, schema_id and subject
// (the value's; null when it is not framed or the subject is unknown), and
// a newline. With pretty, the layout for people instead.
func (f *tailFormatter) appendLine(ctx context.Context, dst []byte, r *kgo.Record, pretty bool) ([]byte, error) {
	key, err := f.data(ctx, r.Topic, r.Key, f.keyFormat == recordpkg.KeyString)
	if err != nil {
		return dst, err
	}
	val, err := f.data(ctx, r.Topic, r.Value, false)
	if err != nil {
		return dst, err
	}
	headers := headersJSON(nil, r.Headers)
	ts := r.Timestamp.UTC().Format(tailTimeLayout)
	if pretty {
		return appendPretty(dst, r, ts, key.json, headers, val), nil
	}
	dst = append(dst, `{"topic":`...)
	dst = schemaregistry.AppendQuoted(dst, r.Topic)
	dst = append(dst, `,"partition":`...)
	dst = strconv.AppendInt(dst, int64(r.Partition), 10)
	dst = append(dst, `,"offset":`...)
	dst = strconv.AppendInt(dst, r.Offset, 10)
	dst = append(dst, `,"timestamp":"`...)
	dst = append(dst, ts...)
	dst = append(dst, '"')
	dst = appendContent(dst, key.json, headers, val)
	return append(dst, "}\n"...), nil
}

// appendContent appends the members of a line after its timestamp: key,
// headers, value, schema_id and subject (null when the value is not framed
// or its subject is unknown).
func appendContent(dst, key, headers []byte, val decoded) []byte {
	dst = append(dst, `,"key":`...)
	dst = append(dst, key...)
	dst = append(dst, `,"headers":`...)
	dst = append(dst, headers...)
	dst = append(dst, `,"value":`...)
	dst = append(dst, val.json...)
	dst = append(dst, `,"schema_id":`...)
	if val.framed {
		dst = strconv.AppendInt(dst, int64(val.schemaID), 10)
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"subject":`...)
	if val.subject != "" {
		return schemaregistry.AppendQuoted(dst, val.subject)
	}
	return append(dst, "null"...)
}

// appendIndented appends a value's JSON indented, for --pretty; as it is
// when it does not parse.
func appendIndented(dst, v []byte) []byte {
	var buf bytes.Buffer
	if json.Indent(&buf, v, "", "  ") == nil {
		return append(dst, buf.Bytes()...)
	}
	return append(dst, v...)
}

// appendPretty is --pretty: a line naming the record, then its key, its
// headers one per line and its value indented, and a blank line.
func appendPretty(dst []byte, r *kgo.Record, ts string, key, headers []byte, val decoded) []byte {
	dst = fmt.Appendf(dst, "%s partition %d offset %d  %s", r.Topic, r.Partition, r.Offset, ts)
	if val.framed {
		dst = fmt.Appendf(dst, "  schema %d", val.schemaID)
		if val.subject != "" {
			dst = fmt.Appendf(dst, " (%s)", val.subject)
		}
	}
	dst = append(dst, "\nkey: "...)
	dst = append(dst, key...)
	dst = append(dst, '\n')
	var hs map[string]json.RawMessage
	if err := json.Unmarshal(headers, &hs); err == nil && len(hs) > 0 {
		dst = append(dst, "headers:\n"...)
		// In the order of the record: walk the names as headersJSON wrote them.
		seen := map[string]bool{}
		for _, h := range r.Headers {
			if seen[h.Key] {
				continue
			}
			seen[h.Key] = true
			dst = append(dst, "  "...)
			dst = append(dst, h.Key...)
			dst = append(dst, ": "...)
			dst = append(dst, hs[h.Key]...)
			dst = append(dst, '\n')
		}
	}
	dst = append(dst, "value: "...)
	dst = appendIndented(dst, val.json)
	return append(dst, "\n\n"...)
}
