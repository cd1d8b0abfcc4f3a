package schemaregistry

import (
	"context"
	"errors"
	"strconv"
	"strings"
)

// ErrNoSchema is returned (wrapped, with the event type) by
// Registry.Encoder when the schemas directory has no .avsc file for an
// event type. It is permanent until the relay is restarted with the file.
var ErrNoSchema = errors.New("no schema for event type")

// Permanent reports whether err, returned by Encoder or Preflight, is one
// that retrying cannot fix: ErrNoSchema, an *IncompatibleError, or an answer
// of the registry refusing the request (a 4xx other than 408 and 429: bad
// credentials, a schema or subject the registry considers invalid). Network
// errors, timeouts, 5xx and a cancelled context are not permanent.
func Permanent(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var ie *IncompatibleError
	return errors.Is(err, ErrNoSchema) || errors.As(err, &ie) || !retriable(err)
}

// FileError is an error in one .avsc file; LoadDir returns it (joined with
// the others when several files are bad).
type FileError struct {
	// File is the path of the .avsc file.
	File string
	// Err says what is wrong with it.
	Err error
}

func (e *FileError) Error() string { return e.File + ": " + e.Err.Error() }

// Unwrap returns e.Err.
func (e *FileError) Unwrap() error { return e.Err }

// IncompatibleError is returned when the schema registry refuses to
// register a local schema under a subject because it breaks the subject's
// compatibility level. Retrying does not help: the schema or the subject's
// configuration has to change.
type IncompatibleError struct {
	// Subject is the registry subject that rejected the schema.
	Subject string
	// Level is the subject's compatibility level (BACKWARD, FORWARD, FULL,
	// their _TRANSITIVE forms, NONE), or "unknown" when the registry did not
	// tell it.
	Level string
	// EventType and File name the local schema.
	EventType string
	File      string
	// Reason is what the registry said was incompatible, e.g. the field.
	Reason string
}

func (e *IncompatibleError) Error() string {
	var b strings.Builder
	b.WriteString("schema registry subject ")
	b.WriteString(strconv.Quote(e.Subject))
	b.WriteString(" rejects schema ")
	b.WriteString(e.EventType)
	if e.File != "" {
		b.WriteString(" (")
		b.WriteString(e.File)
		b.WriteString(")")
	}
	b.WriteString(" as incompatible under ")
	level := e.Level
	if level == "" {
		level = "unknown"
	}
	b.WriteString(level)
	b.WriteString(" compatibility")
	if e.Reason != "" {
		b.WriteString(": ")
		b.WriteString(e.Reason)
	}
	return b.String()
}

// PayloadError is returned by Encoder.Append when a payload does not fit
// the event type's schema. It is permanent for that payload.
type PayloadError struct {
	// EventType is the event type whose schema was used.
	EventType string
	// Path locates the offending value: "" for the payload itself, else
	// field names joined by dots with [i] for array items and [key] for map
	// values, e.g. "items[2].qty".
	Path string
	// Reason says what is wrong, e.g. `expected long, got string "12"`.
	Reason string
}

func (e *PayloadError) Error() string {
	var b strings.Builder
	if e.EventType != "" {
		b.WriteString("payload of ")
		b.WriteString(e.EventType)
		b.WriteString(": ")
	}
	if e.Path != "" {
		b.WriteString("field ")
		b.WriteString(strconv.Quote(e.Path))
		b.WriteString(": ")
	}
	b.WriteString(e.Reason)
	return b.String()
}

// under prefixes the path of e with a record field name.
func (e *PayloadError) under(field string) *PayloadError {
	switch {
	case e.Path == "":
		e.Path = field
	case e.Path[0] == '[':
		e.Path = field + e.Path
	default:
		e.Path = field + "." + e.Path
	}
	return e
}

// at prefixes the path of e with an array index or map key.
func (e *PayloadError) at(index string) *PayloadError {
	if e.Path == "" || e.Path[0] == '[' {
		e.Path = "[" + index + "]" + e.Path
	} else {
		e.Path = "[" + index + "]." + e.Path
	}
	return e
}
