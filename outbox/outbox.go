package outbox

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/schemaregistry"
)

// Event is one outbox event.
type Event struct {
	// ID is the event id, the relay's `id` header and the consumers' dedupe
	// key. "" (the usual case) makes a new UUIDv7 (NewID).
	ID string
	// AggregateType selects the topic (outbox.event.{aggregate_type} by
	// default). Required.
	AggregateType string
	// AggregateID is the Kafka key: one aggregate's events keep their order
	// on one partition. Required.
	AggregateID string
	// EventType names the payload's schema (<event_type>.avsc). Required.
	EventType string
	// Payload is a JSON object: []byte or json.RawMessage are taken as JSON
	// text, any other value is encoded with encoding/json.
	Payload any
	// Headers become Kafka headers (e.g. correlation ids). The names id,
	// event_type and aggregate_type are the relay's own and are refused.
	// Values the Propagator sets are added; a value given here wins.
	Headers map[string]string
}

// Mode is how events are written.
type Mode uint8

const (
	// ModeTable inserts a row into the outbox table (the default).
	ModeTable Mode = iota
	// ModeMessage writes no row: it emits a transactional logical decoding
	// message, pg_logical_emit_message(true, prefix, content), whose content
	// is the JSON object {"id", "aggregate_type", "aggregate_id",
	// "event_type", "payload", "headers"}. It is in the WAL only if the
	// transaction commits, and leaves no table to vacuum or clean up. The
	// relay (PostgreSQL 14+, --message-prefix, default "outbox") publishes it
	// exactly like a row: same topic, key, id and headers, and, per
	// aggregate, in the order of the transaction, rows and messages mixed.
	// A service that writes only messages needs no outbox table: the relay
	// then runs with --table ''.
	ModeMessage
)

// Columns names the outbox table's columns, as the relay's `columns:`
// mapping does. An empty field takes the default name.
type Columns struct {
	ID            string // default "id"; its type must accept a UUID's text (uuid or text)
	AggregateType string // default "aggregate_type"
	AggregateID   string // default "aggregate_id"
	EventType     string // default "event_type"
	Payload       string // default "payload" (jsonb)
	Headers       string // default "headers" (jsonb); "-" when the table has no headers column
}

// Config configures a Writer. The zero value writes rows into
// public.outbox with the default column names.
type Config struct {
	// Mode is ModeTable (default) or ModeMessage.
	Mode Mode
	// Table is the outbox table, optionally schema-qualified. Default
	// "public.outbox". ModeTable only.
	Table string
	// Columns are the table's column names. ModeTable only.
	Columns Columns
	// Prefix is the logical message prefix, the relay's --message-prefix.
	// Default "outbox". ModeMessage only.
	Prefix string
	// Propagator, when set, is called once per event to add trace context
	// (traceparent, tracestate) from ctx to the event's headers. With
	// OpenTelemetry:
	//
	//	Propagator: func(ctx context.Context, h map[string]string) {
	//		otel.GetTextMapPropagator().Inject(ctx, propagation.MapCarrier(h))
	//	}
	//
	// Default nil: no trace headers.
	Propagator func(ctx context.Context, carrier map[string]string)
	// Schemas, when set, validates every payload before it is written with
	// the relay's own JSON-to-Avro encoder: an event type without a schema,
	// or a payload the relay would send to the dead-letter topic, is an
	// ErrInvalidEvent. Load them with schemaregistry.LoadDir on the
	// directory the relay reads (--schemas-dir). Default nil: no validation.
	Schemas map[string]*schemaregistry.Schema
}

// Writer writes events inside the caller's transaction. It is immutable and
// safe for concurrent use.
type Writer struct {
	cfg    Config
	insert string // INSERT INTO t (cols) VALUES
	ncols  int
}

// maxBatchRows bounds the rows of one INSERT: PostgreSQL takes at most
// 65535 parameters per statement.
const maxBatchRows = 65535 / 6

// New checks cfg and returns a Writer.
func New(cfg Config) (*Writer, error) {
	switch cfg.Mode {
	case ModeTable, ModeMessage:
	default:
		return nil, fmt.Errorf("outbox: Config.Mode %d is not ModeTable or ModeMessage", cfg.Mode)
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "outbox"
	}
	if cfg.Table == "" {
		cfg.Table = "public.outbox"
	}
	c := &cfg.Columns
	for _, f := range []struct {
		p   *string
		def string
	}{{&c.ID, "id"}, {&c.AggregateType, "aggregate_type"}, {&c.AggregateID, "aggregate_id"}, {&c.EventType, "event_type"}, {&c.Payload, "payload"}, {&c.Headers, "headers"}} {
		if *f.p == "" {
			*f.p = f.def
		}
	}
	parts := strings.Split(cfg.Table, ".")
	if len(parts) > 2 || slicesContainEmpty(parts) {
		return nil, fmt.Errorf("outbox: Config.Table %q: want table or schema.table", cfg.Table)
	}
	cols := []string{c.ID, c.AggregateType, c.AggregateID, c.EventType, c.Payload}
	if c.Headers != "-" {
		cols = append(cols, c.Headers)
	}
	quoted := make([]string, len(cols))
	for i, col := range cols {
		quoted[i] = pgx.Identifier{col}.Sanitize()
	}
	w := &Writer{cfg: cfg, ncols: len(cols)}
	w.insert = "INSERT INTO " + pgx.Identifier(parts).Sanitize() + " (" + strings.Join(quoted, ", ") + ") VALUES "
	return w, nil
}

func slicesContainEmpty(s []string) bool {
	for _, x := range s {
		if x == "" {
			return true
		}
	}
	return false
}

// defaultWriter is the zero Config: rows into public.outbox.
var defaultWriter, _ = New(Config{})

// Write writes ev into public.outbox (default column names, the table of
// docs/outbox.sql) inside tx and returns its id. See Writer.Write.
func Write(ctx context.Context, tx pgx.Tx, ev Event) (string, error) {
	return defaultWriter.Write(ctx, tx, ev)
}

// WriteBatch writes evs into public.outbox inside tx and returns their ids.
// See Writer.WriteBatch.
func WriteBatch(ctx context.Context, tx pgx.Tx, evs []Event) ([]string, error) {
	return defaultWriter.WriteBatch(ctx, tx, evs)
}

// WriteSQL is Write for database/sql: tx is the *sql.Tx of the business
// change (the pgx stdlib driver or any PostgreSQL driver).
func WriteSQL(ctx context.Context, tx *sql.Tx, ev Event) (string, error) {
	return defaultWriter.WriteSQL(ctx, tx, ev)
}

// WriteBatchSQL is WriteBatch for database/sql.
func WriteBatchSQL(ctx context.Context, tx *sql.Tx, evs []Event) ([]string, error) {
	return defaultWriter.WriteBatchSQL(ctx, tx, evs)
}

// Write writes ev inside tx, the transaction of the business change, and
// returns its id (ev.ID, or a new UUIDv7). The event exists only if tx
// commits. Only a transaction compiles here: a *pgxpool.Pool or *pgx.Conn
// would commit the event on its own. An event the relay would reject is an
// ErrInvalidEvent and nothing is written; a database error leaves tx as
// PostgreSQL does (an aborted transaction must be rolled back).
func (w *Writer) Write(ctx context.Context, tx pgx.Tx, ev Event) (string, error) {
	return first(w.WriteBatch(ctx, tx, []Event{ev}))
}

// WriteSQL is Write for database/sql; a *sql.DB does not compile in place
// of the *sql.Tx.
func (w *Writer) WriteSQL(ctx context.Context, tx *sql.Tx, ev Event) (string, error) {
	return first(w.WriteBatchSQL(ctx, tx, []Event{ev}))
}

func first(ids []string, err error) (string, error) {
	if err != nil {
		return "", err
	}
	return ids[0], nil
}

// WriteBatch writes evs inside tx with one statement (one more per 10922
// events) and returns their ids in order. The relay publishes them in this
// order. If any event is invalid, nothing is written.
func (w *Writer) WriteBatch(ctx context.Context, tx pgx.Tx, evs []Event) ([]string, error) {
	ex, err := pgxExec(tx)
	if err != nil {
		return nil, err
	}
	return w.writeBatch(ctx, ex, evs)
}

// WriteBatchSQL is WriteBatch for database/sql.
func (w *Writer) WriteBatchSQL(ctx context.Context, tx *sql.Tx, evs []Event) ([]string, error) {
	ex, err := sqlExec(tx)
	if err != nil {
		return nil, err
	}
	return w.writeBatch(ctx, ex, evs)
}

func (w *Writer) writeBatch(ctx context.Context, tx execer, evs []Event) ([]string, error) {
	if len(evs) == 0 {
		return nil, nil
	}
	rows := make([]row, len(evs))
	ids := make([]string, len(evs))
	for i := range evs {
		r, err := w.prepare(ctx, &evs[i])
		if err != nil {
			if len(evs) > 1 {
				err = fmt.Errorf("event %d: %w", i, err)
			}
			return nil, err
		}
		rows[i], ids[i] = r, r.id
	}
	if w.cfg.Mode == ModeMessage {
		return ids, w.emit(ctx, tx, rows)
	}
	for start := 0; start < len(rows); start += maxBatchRows {
		end := min(start+maxBatchRows, len(rows))
		if err := w.insertRows(ctx, tx, rows[start:end]); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// row is a checked event, ready to write.
type row struct {
	id, aggType, aggID, eventType string
	payload                       json.RawMessage
	headers                       map[string]string
}

func (w *Writer) prepare(ctx context.Context, ev *Event) (row, error) {
	r := row{id: ev.ID, aggType: ev.AggregateType, aggID: ev.AggregateID, eventType: ev.EventType}
	switch {
	case ev.AggregateType == "":
		return r, fmt.Errorf("%w: AggregateType is empty", ErrInvalidEvent)
	case ev.AggregateID == "":
		return r, fmt.Errorf("%w: AggregateID is empty (it is the Kafka key)", ErrInvalidEvent)
	case ev.EventType == "":
		return r, fmt.Errorf("%w: EventType is empty", ErrInvalidEvent)
	}
	var err error
	switch p := ev.Payload.(type) {
	case json.RawMessage:
		r.payload = p
	case []byte:
		r.payload = p
	default:
		if r.payload, err = json.Marshal(p); err != nil {
			return r, fmt.Errorf("%w: payload of %s: %v", ErrInvalidEvent, ev.EventType, err)
		}
	}
	if !json.Valid(r.payload) {
		return r, fmt.Errorf("%w: payload of %s is not valid JSON", ErrInvalidEvent, ev.EventType)
	}
	if t := bytes.TrimLeft(r.payload, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return r, fmt.Errorf("%w: payload of %s is not a JSON object", ErrInvalidEvent, ev.EventType)
	}
	if w.cfg.Schemas != nil {
		s := w.cfg.Schemas[ev.EventType]
		if s == nil {
			return r, fmt.Errorf("%w: no schema for event type %q", ErrInvalidEvent, ev.EventType)
		}
		if _, err := s.AppendBody(nil, r.payload); err != nil {
			return r, fmt.Errorf("%w: %w", ErrInvalidEvent, err)
		}
	}
	if w.cfg.Propagator != nil || len(ev.Headers) > 0 {
		r.headers = make(map[string]string, len(ev.Headers)+2)
		if w.cfg.Propagator != nil {
			w.cfg.Propagator(ctx, r.headers)
		}
		for k, v := range ev.Headers {
			r.headers[k] = v
		}
		for _, reserved := range []string{"id", "event_type", "aggregate_type"} {
			if _, ok := r.headers[reserved]; ok {
				return r, fmt.Errorf("%w: header %q is the relay's own", ErrInvalidEvent, reserved)
			}
		}
		if len(r.headers) == 0 {
			r.headers = nil
		}
	}
	if len(r.headers) > 0 && w.cfg.Mode == ModeTable && w.cfg.Columns.Headers == "-" {
		return r, fmt.Errorf("%w: event has headers but Config.Columns.Headers is \"-\" (no headers column)", ErrInvalidEvent)
	}
	if r.id == "" {
		r.id = NewID()
	}
	return r, nil
}

func (w *Writer) insertRows(ctx context.Context, tx execer, rows []row) error {
	var b strings.Builder
	b.Grow(len(w.insert) + len(rows)*8*w.ncols)
	b.WriteString(w.insert)
	args := make([]any, 0, len(rows)*w.ncols)
	for i, r := range rows {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		args = append(args, r.id, r.aggType, r.aggID, r.eventType, string(r.payload))
		if w.ncols == 6 {
			h := []byte("{}")
			if len(r.headers) > 0 {
				h, _ = json.Marshal(r.headers) // a map[string]string always encodes
			}
			args = append(args, string(h))
		}
		for j := 0; j < w.ncols; j++ {
			if j > 0 {
				b.WriteString(", ")
			}
			n := len(args) - w.ncols + j + 1
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			if j >= 4 { // payload, headers: text that the server casts to the column's json type
				b.WriteString("::text::jsonb")
			}
		}
		b.WriteByte(')')
	}
	if err := tx(ctx, b.String(), args); err != nil {
		return fmt.Errorf("outbox: insert %d events: %w", len(rows), err)
	}
	return nil
}

// message is the content of a logical decoding message, in the key order
// issue 12 specifies.
type message struct {
	ID            string            `json:"id"`
	AggregateType string            `json:"aggregate_type"`
	AggregateID   string            `json:"aggregate_id"`
	EventType     string            `json:"event_type"`
	Payload       json.RawMessage   `json:"payload"`
	Headers       map[string]string `json:"headers,omitempty"`
}

// emitSQL emits one transactional message per array element, in order.
const emitSQL = `SELECT count(pg_logical_emit_message(true, $1::text, m.content)) FROM unnest($2::text[]) WITH ORDINALITY AS m(content, n)`

func (w *Writer) emit(ctx context.Context, tx execer, rows []row) error {
	contents := make([]string, len(rows))
	for i, r := range rows {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		// The payload is compacted so the content is one line of JSON.
		compact := new(bytes.Buffer)
		if err := json.Compact(compact, r.payload); err != nil {
			return fmt.Errorf("%w: payload of %s: %v", ErrInvalidEvent, r.eventType, err)
		}
		if err := enc.Encode(message{ID: r.id, AggregateType: r.aggType, AggregateID: r.aggID, EventType: r.eventType, Payload: compact.Bytes(), Headers: r.headers}); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidEvent, err)
		}
		contents[i] = strings.TrimSuffix(buf.String(), "\n")
	}
	if err := tx(ctx, emitSQL, []any{w.cfg.Prefix, contents}); err != nil {
		return fmt.Errorf("outbox: emit %d messages: %w", len(rows), err)
	}
	return nil
}
