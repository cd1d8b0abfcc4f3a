package record

import (
	"fmt"
	"strconv"
	"strings"
)

// UnknownFields says what becomes of an event whose payload has members
// that its Avro schema has no field for (--unknown-fields).
type UnknownFields int

const (
	// UnknownIgnore publishes the event without them: Avro's writer
	// semantics, the default.
	UnknownIgnore UnknownFields = iota
	// UnknownDLQ makes the event invalid (ReasonUnknownField), so that a
	// field shipped before its schema is kept in the dead-letter topic
	// until cdc-relay dlq redrive sends it on with the new schema.
	UnknownDLQ
)

// ParseUnknownFields parses --unknown-fields: ignore or dlq.
func ParseUnknownFields(s string) (UnknownFields, error) {
	switch s {
	case "", "ignore":
		return UnknownIgnore, nil
	case "dlq":
		return UnknownDLQ, nil
	}
	return 0, fmt.Errorf("%q is not ignore or dlq", s)
}

// ReasonUnknownField is an event whose payload has a member its schema
// lacks, under --unknown-fields dlq.
const ReasonUnknownField = "unknown_field"

// UnknownFieldObserver is implemented by an Observer that wants to hear of
// every payload member an event type's schema has no field for, whatever
// UnknownFields says (cdc_relay_unknown_fields_total, the WARN).
type UnknownFieldObserver interface {
	// UnknownField is called once per such member of each event whose
	// payload otherwise fits the schema: field is the member's name,
	// prefixed by the schema fields above it ("address.zip").
	UnknownField(eventType, field string)
}

// unknownSink collects one payload's unknown members, reused across events
// (schemaregistry.FieldSink).
type unknownSink struct {
	names []byte
	ends  []int
}

func (u *unknownSink) reset() { u.names, u.ends = u.names[:0], u.ends[:0] }

// UnknownField implements schemaregistry.FieldSink.
func (u *unknownSink) UnknownField(path []string, field []byte) {
	for _, p := range path {
		u.names = append(u.names, p...)
		u.names = append(u.names, '.')
	}
	u.names = append(u.names, field...)
	u.ends = append(u.ends, len(u.names))
}

// fields returns the collected names.
func (u *unknownSink) fields() []string {
	out := make([]string, len(u.ends))
	start := 0
	for i, end := range u.ends {
		out[i] = string(u.names[start:end])
		start = end
	}
	return out
}

// unknownFields reports the payload's unknown members to the observer and,
// under UnknownDLQ, returns the reason the event is invalid.
func (b *Builder) unknownFields(eventType []byte) string {
	if len(b.unk.ends) == 0 {
		return ""
	}
	fields := b.unk.fields()
	if b.unkObs != nil {
		et := string(eventType)
		for _, f := range fields {
			b.unkObs.UnknownField(et, f)
		}
	}
	if b.cfg.UnknownFields != UnknownDLQ {
		return ""
	}
	quoted := make([]string, len(fields))
	for i, f := range fields {
		quoted[i] = strconv.Quote(f)
	}
	what := "field " + quoted[0] + " is"
	if len(fields) > 1 {
		what = "fields " + strings.Join(quoted, ", ") + " are"
	}
	return fmt.Sprintf("payload %s not in the schema of event_type %q (--unknown-fields dlq): deploy a schema with the field, then send the event on with cdc-relay dlq redrive",
		what, eventType)
}
