package decoder

import (
	"errors"
	"fmt"
)

// Sentinel errors returned (usually wrapped) by Decode. Test with errors.Is.
var (
	// ErrShort means the message ended before a field it announces: a
	// truncated or corrupt message.
	ErrShort = errors.New("decoder: message truncated")

	// ErrTrailingBytes means bytes follow the last field of a message. Proto
	// version 1 messages have no optional tail, so the message is corrupt or
	// of another protocol version.
	ErrTrailingBytes = errors.New("decoder: trailing bytes after message")

	// ErrUnknownMessage means the first byte is not a pgoutput message type.
	ErrUnknownMessage = errors.New("decoder: unknown pgoutput message type")

	// ErrUnknownRelation means an Insert names a relation id that no Relation
	// message announced on this stream. pgoutput always sends the Relation
	// first, so the stream was not read from the start of a session.
	ErrUnknownRelation = errors.New("decoder: insert into a relation never announced")

	// ErrColumnCount means an outbox Insert carries a different number of
	// columns than its Relation message announced.
	ErrColumnCount = errors.New("decoder: tuple column count differs from its relation")

	// ErrTupleFormat means a tuple is malformed: an Insert without the 'N'
	// new-tuple marker, or a column with an unknown data kind byte.
	ErrTupleFormat = errors.New("decoder: malformed tuple data")

	// ErrUnchangedToast means a column of an outbox Insert holds the
	// "unchanged TOAST value" placeholder ('u'). PostgreSQL only sends it for
	// UPDATE, so the stream is corrupt. Returned inside a *ColumnError.
	ErrUnchangedToast = errors.New("decoder: unchanged TOAST value in an insert")

	// ErrBinaryColumn means a column of an outbox Insert is in binary format
	// ('b'). The relay never asks for binary output, so this is unexpected.
	// Returned inside a *ColumnError.
	ErrBinaryColumn = errors.New("decoder: binary column value (binary output was not requested)")

	// ErrMissingColumn is what a *MissingColumnError unwraps to.
	ErrMissingColumn = errors.New("decoder: outbox table lacks a required column")
)

// MissingColumnError is returned when an Insert into the outbox table arrives
// while the table's current Relation message lacks a required column (id,
// aggregate_type, aggregate_id, event_type or payload as configured in
// Columns). It happens after a DROP or RENAME of such a column, or when the
// column-name configuration does not match the table.
type MissingColumnError struct {
	Table  string // "schema.table"
	Column string // the configured column name that is missing
	// ID is the text of the row's id column, so the message can name the
	// row; "" when the id column is the missing one or the tuple is corrupt.
	ID string
}

func (e *MissingColumnError) Error() string {
	row := ""
	if e.ID != "" {
		row = " (row id=" + e.ID + ")"
	}
	return fmt.Sprintf("decoder: outbox table %s has no column %q%s: was it dropped or renamed? Restore it, or map the new name in the column-name configuration (columns: in --config)",
		e.Table, e.Column, row)
}

// Unwrap returns ErrMissingColumn.
func (e *MissingColumnError) Unwrap() error { return ErrMissingColumn }

// ColumnError reports a column of an outbox Insert whose value cannot be
// used. Err is ErrUnchangedToast or ErrBinaryColumn.
type ColumnError struct {
	Table  string // "schema.table"
	Column string // column name as sent in the Relation message
	Err    error
}

func (e *ColumnError) Error() string {
	return fmt.Sprintf("decoder: table %s column %q: %v", e.Table, e.Column, e.Err)
}

// Unwrap returns Err.
func (e *ColumnError) Unwrap() error { return e.Err }

// short wraps ErrShort with the message being decoded.
func short(what string) error { return fmt.Errorf("decode %s: %w", what, ErrShort) }

// trailing wraps ErrTrailingBytes with the message being decoded.
func trailing(what string, n int) error {
	return fmt.Errorf("decode %s: %d extra bytes: %w", what, n, ErrTrailingBytes)
}
