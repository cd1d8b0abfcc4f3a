package decoder

import (
	"fmt"
	"strings"
	"time"
)

// Kind says what a decoded message means to the relay.
type Kind uint8

const (
	// KindSkip is anything the relay ignores: Update, Delete, Truncate, Type,
	// Origin, logical decoding messages without the configured prefix, stream
	// and two-phase messages, and inserts into tables other than the outbox
	// tables (unless Config.OtherTables is set).
	KindSkip Kind = iota
	// KindRelation means a Relation message was applied to the cache.
	KindRelation
	// KindBegin starts a transaction: FinalLSN, CommitTime and Xid are set.
	KindBegin
	// KindCommit ends a transaction: CommitLSN, EndLSN and CommitTime are set.
	KindCommit
	// KindRow is an INSERT into an outbox table, or a logical decoding
	// message with the configured prefix: Row is set.
	KindRow
	// KindOtherRow is an INSERT into a table that is not an outbox table,
	// with Config.OtherTables set: Row.Other and Row.RelationID are set.
	KindOtherRow
)

var kindNames = [...]string{"skip", "relation", "begin", "commit", "row", "other_row"}

// String returns "skip", "relation", "begin", "commit", "row" or "other_row".
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Message is the result of one Decode. The caller reuses one Message across
// calls. Decode overwrites every field: fields that do not belong to the
// decoded Kind are zero. After an error the contents are unspecified.
type Message struct {
	Kind Kind

	// FinalLSN (Begin) is the LSN of the transaction's commit record.
	FinalLSN uint64
	// CommitLSN (Commit) is the LSN of the commit record; equals the
	// FinalLSN of the matching Begin.
	CommitLSN uint64
	// EndLSN (Commit) is the end of the commit record (pglogrepl's
	// TransactionEndLSN): the only LSN the relay may confirm.
	EndLSN uint64
	// CommitTime (Begin, Commit) is the commit timestamp, in UTC.
	//
	// It is a time.Time rather than pgoutput's int64 microseconds since
	// 2000-01-01: the conversion costs about 1.5 ns per Begin or Commit
	// (BenchmarkDecodeBegin, 5.5 against 4.2 ns), once per transaction.
	CommitTime time.Time
	// Xid (Begin) is the transaction id.
	Xid uint32

	// Row (KindRow) is the outbox insert.
	Row Row
}

// Row is one insert into the outbox table. Byte slices ALIAS the buffer given
// to Decode: they are valid only until the caller reuses that buffer. Their
// capacity is clipped, so appending to one never writes into the buffer.
//
// NULL handling: a NULL value leaves its slice nil and, for the required
// columns, sets the matching ...Null flag; a non-NULL value, even an empty
// string, is a non-nil slice. Decode never fails on NULLs: the relay decides
// (NullField helps it route such a row to the dead-letter topic).
type Row struct {
	ID                []byte // text form of the id column (decimal for bigserial; a uuid also works)
	IDNull            bool   // id is NULL
	AggregateType     []byte
	AggregateTypeNull bool // aggregate_type is NULL
	AggregateID       []byte
	AggregateIDNull   bool // aggregate_id is NULL (a user's table may allow it)
	EventType         []byte
	EventTypeNull     bool   // event_type is NULL
	Payload           []byte // jsonb text form
	PayloadNull       bool   // payload is NULL
	Headers           []byte // jsonb text; nil when NULL or when the table has no headers column
	CreatedAt         []byte // text form of created_at; nil when NULL or absent
	RelationID        uint32 // relation id (pg_class oid) of the outbox table

	// Extra holds the text of each extra column given to New, in that
	// order; an entry is nil when the value is NULL. The slice itself is
	// the decoder's and is overwritten by the next Decode.
	Extra [][]byte
	// ExtraTypes holds each extra column's type oid, from the Relation
	// message (0 for a logical message). It belongs to the decoder: do not
	// modify.
	ExtraTypes []uint32
	// ExtraTypmods holds each extra column's type modifier from the
	// Relation message (-1 when none, e.g. timestamp without a precision).
	// It belongs to the decoder: do not modify.
	ExtraTypmods []int32

	// Message is true for an outbox event written as a logical decoding
	// message (pg_logical_emit_message) rather than a row; the column
	// fields then come from its JSON content, ID from its LSN when the
	// content has no id, and Extra is all NULL.
	Message bool
	// LSN (Message) is the message's LSN.
	LSN uint64
	// Content (Message) is the message's raw content.
	Content []byte
	// NonTransactional (Message) is true for a message emitted with
	// transactional = false: atomic with nothing, so not an outbox event.
	NonTransactional bool
	// Malformed (Message) says why the content is not an outbox event; ""
	// when it is. Content that is not valid JSON (RFC 8259) sets no
	// column: ID is then the LSN's text and the rest is nil.
	Malformed string

	// Other (KindOtherRow) is the insert into a table that is not an outbox
	// table; nil otherwise. Only RelationID is set besides. It points into
	// the decoder and is overwritten by the next Decode.
	Other *OtherRow
}

// OtherRow is an insert into a table that is not an outbox table
// (Config.OtherTables).
type OtherRow struct {
	// Table is the table's "schema.table", as its Relation message names it
	// (unquoted).
	Table string
	// Columns are the table's column names, in order. The slice belongs to
	// the decoder: do not modify.
	Columns []string
	// Values holds each column's value in the order of Columns: its text
	// form, nil for NULL. (A binary value, which proto 1 never sends
	// without the binary option, is kept as sent; an unchanged TOAST value,
	// which an INSERT never has, is nil.) The values alias the buffer given
	// to Decode; the slice is the decoder's and is overwritten by the next
	// Decode.
	Values [][]byte
}

// NullField returns the logical name ("id", "aggregate_type", "event_type" or
// "payload") of the first of those columns that is NULL in r, or "" if none
// is. aggregate_id is not considered: see AggregateIDNull.
func (r *Row) NullField() string {
	switch {
	case r.IDNull:
		return "id"
	case r.AggregateTypeNull:
		return "aggregate_type"
	case r.EventTypeNull:
		return "event_type"
	case r.PayloadNull:
		return "payload"
	}
	return ""
}

// Decoder decodes one pgoutput stream. It caches, per relation id, whether
// the relation is an outbox table and how its columns map to Row fields.
// Use New or NewDecoder; a zero Decoder matches no table.
type Decoder struct {
	tables    []table
	extra     []string // extra column names (Config.Extra)
	extraVals [][]byte // Row.Extra's backing array
	noTypes   []uint32 // Row.ExtraTypes of a message: no column types
	noMods    []int32  // Row.ExtraTypmods of a message
	prefix    string   // Config.MessagePrefix
	other     bool     // Config.OtherTables
	otherVals [][]byte // OtherRow.Values's backing array
	otherRow  OtherRow // what Row.Other points to

	rels map[uint32]*relation
	// last is the relation of the previous Insert: outbox inserts come in
	// runs, so this skips the map lookup.
	last *relation

	msg message // the parsed content of the last logical message
}

// table is one outbox table as the decoder matches it.
type table struct {
	schema, name string
	qualified    string // "schema.table", for errors
	names        [numFields]string
}

// Table names one outbox table and its columns.
type Table struct {
	// Name is "schema.table"; an unqualified name means schema "public".
	// Either part may be written in double quotes ("My Schema"."Outbox",
	// with "" for a quote); otherwise the text is used as is, without case
	// folding, since pgoutput sends names as stored in the catalog.
	Name string
	// Columns names its columns (see DefaultColumns).
	Columns Columns
}

// Config configures a Decoder.
type Config struct {
	// Tables are the outbox tables. Inserts into other tables are skipped.
	Tables []Table
	// Extra names further columns whose text the relay needs (header
	// columns, a timestamp column): Row.Extra carries their values in this
	// order. Like the required columns, a Relation of an outbox table that
	// lacks one of them makes the table's inserts fail with a
	// *MissingColumnError. At most 64.
	Extra []string
	// MessagePrefix selects the logical decoding messages that are outbox
	// events (pg_logical_emit_message with this prefix); other messages are
	// skipped. "" skips every message.
	MessagePrefix string
	// OtherTables makes an insert into a table that is not an outbox table
	// a KindOtherRow carrying the table's name and the row's column values,
	// so that the caller sees every row the publication sends. Default
	// false: such inserts are checked and return KindSkip.
	OtherTables bool
}

// New returns a decoder for one outbox table, "schema.table" (see
// Table.Name), with its column names and extra columns (see Config.Extra).
func New(name string, cols Columns, extra ...string) *Decoder {
	return NewDecoder(Config{Tables: []Table{{Name: name, Columns: cols}}, Extra: extra})
}

// NewDecoder returns a decoder configured by cfg.
func NewDecoder(cfg Config) *Decoder {
	d := &Decoder{
		extra:     cfg.Extra,
		extraVals: make([][]byte, len(cfg.Extra)),
		noTypes:   make([]uint32, len(cfg.Extra)),
		noMods:    make([]int32, len(cfg.Extra)),
		prefix:    cfg.MessagePrefix,
		other:     cfg.OtherTables,
		rels:      make(map[uint32]*relation),
	}
	for _, t := range cfg.Tables {
		schema, name := splitTable(t.Name)
		d.tables = append(d.tables, table{schema: schema, name: name, qualified: schema + "." + name, names: t.Columns.names()})
	}
	return d
}

// Decode decodes one pgoutput message (the WALData of an XLogData message)
// into m. It never panics, whatever data holds; malformed input returns an
// error wrapping one of the sentinel errors, or a *MissingColumnError or
// *ColumnError.
func (d *Decoder) Decode(data []byte, m *Message) error {
	if len(data) == 0 {
		return short("message type")
	}
	switch data[0] {
	case 'I':
		return d.decodeInsert(data, m)
	case 'B':
		return decodeBegin(data, m)
	case 'C':
		return decodeCommit(data, m)
	case 'R':
		if err := d.decodeRelation(data); err != nil {
			return err
		}
		*m = Message{Kind: KindRelation}
		return nil
	case 'M':
		return d.decodeMessage(data, m)
	case 'U', 'D', 'T', 'Y', 'O', // update, delete, truncate, type, origin
		'S', 'E', 'c', 'A', 'p', // stream start/stop/commit/abort/prepare (proto 2+)
		'b', 'P', 'K', 'r': // two-phase begin prepare/prepare/commit prepared/rollback prepared (proto 3+)
		if err := validateSkipped(data); err != nil {
			return err
		}
		*m = Message{}
		return nil
	}
	return fmt.Errorf("decode: type byte 0x%02x: %w", data[0], ErrUnknownMessage)
}

// splitTable splits "schema.table" at the first dot outside double quotes
// and removes the quotes of each part. No dot means schema "public".
func splitTable(s string) (schema, table string) {
	inQuote := false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			inQuote = !inQuote
		case '.':
			if !inQuote {
				return unquote(s[:i]), unquote(s[i+1:])
			}
		}
	}
	return "public", unquote(s)
}

// unquote removes surrounding double quotes and undoubles inner ones.
func unquote(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return strings.ReplaceAll(s[1:len(s)-1], `""`, `"`)
	}
	return s
}
