package record

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cdc-relay/cdc-relay/catalog"
	"github.com/cdc-relay/cdc-relay/decoder"
	"github.com/cdc-relay/cdc-relay/publisher"
	"github.com/cdc-relay/cdc-relay/router"
	"github.com/cdc-relay/cdc-relay/schemaregistry"
)

// Config configures a Builder. Fields without a default are required.
type Config struct {
	// Router names topics. Required.
	Router *router.Router
	// Registry hands out Avro encoders and key schema ids. Required with
	// ValueAvro or KeyAvro, unused otherwise.
	Registry *schemaregistry.Registry
	// KeyFormat of the key; default KeyString (--key-format).
	KeyFormat KeyFormat
	// ValueFormat of the value; default ValueAvro (--value-format).
	ValueFormat ValueFormat
	// Builtin is the set of builtin headers written (--builtin-headers);
	// the zero value writes none, the relay's default is router.AllBuiltin.
	Builtin router.Builtin
	// HeaderColumns are columns copied into headers (--header-columns).
	HeaderColumns []HeaderColumn
	// TimestampColumn, when set, is the column the record timestamp comes
	// from (--timestamp-column); default the transaction's commit time.
	TimestampColumn string
	// Tombstones makes a NULL payload a record with a null value
	// (--tombstone-on-null-payload); default false: such a row is invalid.
	Tombstones bool
	// Tables describe the outbox tables' columns, from the catalog
	// (replication.DescribeTable). Without them column types come from the
	// Relation messages alone (a domain then has no header form), and a
	// missing column is found when the first row arrives.
	Tables []Table
	// CloudEvents adds the CloudEvents Kafka binary-mode headers
	// (--cloudevents); default false.
	CloudEvents bool
	// CloudEventsSource is the ce_source attribute, a URI-reference.
	// Required with CloudEvents.
	CloudEventsSource string
	// CloudEventsMode is how CloudEvents writes the attributes
	// (--cloudevents-mode); default CloudEventsBinary. Dead letters are
	// never CloudEvents.
	CloudEventsMode CloudEventsMode
	// MaxRecordBytes: larger records are invalid. Required.
	MaxRecordBytes int
	// DLQTopic receives dead letters. Required.
	DLQTopic string
	// Observer receives per-event figures; default none. One that also
	// implements UnknownFieldObserver hears of unknown payload fields.
	Observer Observer
	// UnknownFields says what becomes of an event whose payload has a
	// member its Avro schema lacks (--unknown-fields); default
	// UnknownIgnore. Unused with ValueJSON.
	UnknownFields UnknownFields
}

// Table is what the catalog says of one outbox table.
type Table struct {
	// Name is "schema.table", for messages.
	Name string
	// OID is its pg_class oid (the Relation messages' relation id), which
	// names the table of a dead letter; 0 when unknown.
	OID uint32
	// AggregateID names its aggregate_id column, whose type decides the
	// JSON form of the key (an integer column gives a number).
	AggregateID string
	// Columns are its columns by name.
	Columns map[string]catalog.Column
}

// Observer receives the builder's per-event figures.
type Observer interface {
	// SchemaLookup is called for every Avro value: hit is false when the
	// (topic, event type) pair needed a registry round trip.
	SchemaLookup(hit bool)
}

type nopObserver struct{}

func (nopObserver) SchemaLookup(bool) {}

// FlagError is a configuration that cannot work with the table, naming the
// flag. The relay exits 2 with it.
type FlagError struct {
	Flag string // without the dashes
	Msg  string
}

func (e *FlagError) Error() string { return "--" + e.Flag + ": " + e.Msg }

// Builder turns outbox rows into Kafka records. Build is called by one
// goroutine at a time (the stream's reader).
type Builder struct {
	cfg   Config
	key   *keyEncoder
	json  jsonValue
	extra []string          // the decoder's extra columns
	heads []headerSlot      // per header column
	ts    int               // index of the timestamp column in extra, or -1
	base  map[uint32]uint32 // a domain's type oid → its base type's
	ce    cloudEvents
	obs   Observer

	unkObs UnknownFieldObserver // obs, when it implements it
	unk    unknownSink          // the current payload's unknown members

	keyMu  sync.Mutex
	keyIDs map[string]*[5]byte // KeyAvro: topic → wire-format header of the key schema

	last lastTopic // the topic of the last valid row
}

// lastTopic remembers the router's answer for the last row's aggregate and
// event types: a backlog mostly repeats them, and the comparison costs less
// than the router's locked map lookup.
type lastTopic struct {
	aggType, eventType []byte
	topic              string // "" until the first (a topic is never empty)
}

// topic is the router's topic for r, through b.last.
func (b *Builder) topic(r *row) (string, error) {
	l := &b.last
	if l.topic != "" && bytes.Equal(r.aggType, l.aggType) && bytes.Equal(r.eventType, l.eventType) {
		return l.topic, nil
	}
	t, err := b.cfg.Router.Topic(r.aggType, r.eventType)
	if err != nil {
		return "", err
	}
	l.aggType, l.eventType = append(l.aggType[:0], r.aggType...), append(l.eventType[:0], r.eventType...)
	l.topic = t
	return t, nil
}

// headerSlot is one header column: its header name, column and index in
// extra.
type headerSlot struct {
	name   string
	column string
	extra  int
}

// New checks cfg against the table and returns a Builder. Errors are
// *FlagError.
func New(cfg Config) (*Builder, error) {
	if (cfg.ValueFormat == ValueAvro || cfg.KeyFormat == KeyAvro) && cfg.Registry == nil {
		return nil, &FlagError{"schema-registry-url", "is required with --value-format avro or --key-format avro"}
	}
	b := &Builder{cfg: cfg, ts: -1, obs: cfg.Observer, keyIDs: map[string]*[5]byte{}, base: map[uint32]uint32{}}
	if b.obs == nil {
		b.obs = nopObserver{}
	}
	b.unkObs, _ = b.obs.(UnknownFieldObserver)
	if cfg.CloudEvents {
		b.ce = newCloudEvents(cfg.CloudEventsSource, cfg.ValueFormat, cfg.CloudEventsMode)
	}
	index := func(col string) int {
		for i, name := range b.extra {
			if name == col {
				return i
			}
		}
		b.extra = append(b.extra, col)
		return len(b.extra) - 1
	}
	for _, hc := range cfg.HeaderColumns {
		b.heads = append(b.heads, headerSlot{name: hc.Header, column: hc.Column, extra: index(hc.Column)})
	}
	if cfg.TimestampColumn != "" {
		b.ts = index(cfg.TimestampColumn)
	}
	var key *catalog.Column
	for i, t := range cfg.Tables {
		for _, hc := range cfg.HeaderColumns {
			col, err := t.column("header-columns", hc.Column)
			if err != nil {
				return nil, err
			}
			if headerConverter(col.BaseOID) == nil {
				return nil, &FlagError{"header-columns", fmt.Sprintf("column %q of %s is of type %s, which has no header form: use a column of type %s, or a generated text column", hc.Column, t.Name, col.Type, HeaderTypes)}
			}
		}
		if cfg.TimestampColumn != "" {
			col, err := t.column("timestamp-column", cfg.TimestampColumn)
			if err != nil {
				return nil, err
			}
			if timestampConverter(col.BaseOID) == nil {
				return nil, &FlagError{"timestamp-column", fmt.Sprintf("column %q of %s is of type %s: use a column of type %s", cfg.TimestampColumn, t.Name, col.Type, TimestampTypes)}
			}
		}
		for _, col := range t.Columns {
			if col.TypeOID != col.BaseOID {
				b.base[col.TypeOID] = col.BaseOID
			}
		}
		if col, ok := t.Columns[t.AggregateID]; ok {
			if i > 0 && key != nil && newKeyEncoder(cfg.KeyFormat, key).differs(newKeyEncoder(cfg.KeyFormat, &col)) {
				return nil, &FlagError{"key-format", fmt.Sprintf("the aggregate id columns of %s and %s have types %s and %s, which give keys of different JSON types: make them the same type", cfg.Tables[0].Name, t.Name, key.Type, col.Type)}
			}
			if key == nil {
				key = &col
			}
		}
	}
	b.key = newKeyEncoder(cfg.KeyFormat, key)
	return b, nil
}

// column returns the table's column for a flag's setting, or a FlagError.
func (t *Table) column(flag, name string) (catalog.Column, error) {
	col, ok := t.Columns[name]
	if !ok {
		return col, &FlagError{flag, fmt.Sprintf("column %q does not exist in the outbox table %s: use one of its columns (%s)", name, t.Name, columnList(t.Columns))}
	}
	return col, nil
}

// ExtraColumns are the columns the decoder must deliver in Row.Extra
// besides the outbox columns (decoder.New's extra).
func (b *Builder) ExtraColumns() []string { return b.extra }

// Invalid is an event the relay cannot publish: it goes to the dead-letter
// topic, or halts the relay. It is an error naming the event.
type Invalid struct {
	ID, EventType, AggregateType string
	// Table is the "schema.table" of a row of a table that is not an outbox
	// table (ReasonUnconfigured); "" otherwise.
	Table string
	// Reason says what is wrong; it becomes the dead letter's error header.
	Reason string
	// Kind labels cdc_relay_dlq_events_total: ReasonSchema, ...
	Kind string
}

func (e *Invalid) Error() string {
	return fmt.Sprintf("invalid event id=%s event_type=%s aggregate_type=%s: %s; halted with nothing confirmed past it (--on-invalid halt)",
		e.ID, e.EventType, e.AggregateType, e.Reason)
}

// Reasons an event is invalid; they label cdc_relay_dlq_events_total.
const (
	ReasonSchema      = "schema_mismatch"
	ReasonNoSchema    = "no_schema"
	ReasonAggregateID = "empty_aggregate_id"
	ReasonTopic       = "invalid_topic"
	ReasonTooLarge    = "too_large"
	ReasonHeaders     = "invalid_headers"
	ReasonNull        = "null_column"
	ReasonPayload     = "invalid_payload"
	ReasonTimestamp   = "invalid_timestamp"
	ReasonColumn      = "invalid_column"
	// ReasonMessage is a logical message whose content is not an outbox event.
	ReasonMessage = "invalid_message"
	// ReasonNonTransactional is a logical message emitted outside a
	// transaction's atomicity (transactional = false).
	ReasonNonTransactional = "non_transactional"
	// ReasonUnconfigured is a row of a table the publication publishes but
	// that is not a configured outbox table. It always goes to the
	// dead-letter topic, even under --on-invalid halt (see Unconfigured).
	ReasonUnconfigured = "unconfigured_table"
)

// HeaderTable is the dead-letter header that names the table of an
// unconfigured_table row.
const HeaderTable = "table"

// HeaderError is the dead-letter header that carries the reason.
const HeaderError = "error"

// registryTimeout bounds a first registration inside the reader.
const registryTimeout = 20 * time.Second

// row is one row's bytes as the record keeps them: copied into the
// record's buffer, since the decoded row aliases the receive buffer.
type row struct {
	id, eventType, aggType, aggID, headersJSON []byte
	commitTime                                 time.Time
	src                                        *decoder.Row
}

// Build makes rec the record for src, a row of a transaction committed at
// commitTime. When the row is invalid it returns the *Invalid and makes rec
// its dead letter instead. An error is a failure that is not the event's
// fault (the registry unreachable, a shutdown, an incompatible schema); rec
// is then unusable. A *HaltError (IsHalt) halts the relay; any other error is
// worth a reconnect.
func (b *Builder) Build(ctx context.Context, rec *publisher.Record, commitTime time.Time, src *decoder.Row) (*Invalid, error) {
	if src.Other != nil {
		return b.unconfigured(rec, commitTime, src.Other), nil
	}
	// One buffer holds every byte the record keeps from the row, then the
	// header columns, the key and the value: a steady stream allocates
	// nothing per event here.
	kept := len(src.ID) + len(src.EventType) + len(src.AggregateType) + len(src.AggregateID) + len(src.Headers)
	for _, v := range src.Extra {
		kept += len(v) + 16
	}
	size := 2*kept + len(src.Payload) + avroSlack
	if b.ce.structured {
		size += b.ce.envelopeSize(src.ID, len(src.Payload)) + len(src.EventType) + len(src.AggregateID)
	}
	arena := rec.Buffer(size)
	if commitTime.IsZero() {
		// A non-transactional message belongs to no transaction.
		commitTime = time.Now()
	}
	r := row{commitTime: commitTime, src: src}
	r.id, arena = keep(arena, src.ID)
	r.eventType, arena = keep(arena, src.EventType)
	r.aggType, arena = keep(arena, src.AggregateType)
	r.aggID, arena = keep(arena, src.AggregateID)
	r.headersJSON, arena = keep(arena, src.Headers)
	rec.Time = commitTime
	rec.ID, rec.EventType, rec.AggregateType, rec.AggregateID = r.id, r.eventType, r.aggType, r.aggID

	reason, kind, err := b.build(ctx, rec, &r, arena)
	if err != nil {
		return nil, err
	}
	if reason == "" {
		return nil, nil
	}
	// A reason may quote the row (a bad uuid, an enum symbol, a map key):
	// keep headers, logs and the halt message a sane size.
	inv := &Invalid{ID: clip(string(r.id), maxNameBytes), EventType: clip(string(r.eventType), maxNameBytes),
		AggregateType: clip(string(r.aggType), maxNameBytes), Reason: clip(reason, maxReasonBytes), Kind: kind}
	b.deadLetter(rec, r, inv.Reason, inv.Kind)
	return inv, nil
}

// avroSlack is room beyond the JSON payload's size for the Avro value:
// the 5-byte wire-format prefix and a little more. The Avro body is almost
// always smaller than its JSON; when it is not, the buffer grows.
const avroSlack = 32

func keep(arena, b []byte) ([]byte, []byte) {
	if b == nil {
		return nil, arena
	}
	start := len(arena)
	arena = append(arena, b...)
	return arena[start:len(arena):len(arena)], arena
}

// build fills rec for a valid row, appending what it writes to arena. It
// returns a reason (and its metric kind) when the row is invalid.
func (b *Builder) build(ctx context.Context, rec *publisher.Record, r *row, arena []byte) (reason, kind string, err error) {
	src := r.src
	if src.Message {
		switch {
		case src.NonTransactional:
			return "a non-transactional logical message is atomic with no transaction, so it is not an outbox event: emit it with pg_logical_emit_message(true, ...)", ReasonNonTransactional, nil
		case src.Malformed != "":
			return src.Malformed, ReasonMessage, nil
		}
	}
	tombstone := src.PayloadNull && b.cfg.Tombstones
	if col := src.NullField(); col != "" && !(col == "payload" && tombstone) {
		return col + " is NULL", ReasonNull, nil
	}
	switch {
	case src.AggregateIDNull:
		return "aggregate_id is NULL", ReasonAggregateID, nil
	case len(r.aggID) == 0:
		return "aggregate_id is empty", ReasonAggregateID, nil
	case len(r.eventType) == 0 && b.cfg.ValueFormat == ValueAvro && !tombstone:
		return "event_type is empty", ReasonNoSchema, nil
	}
	if b.ts >= 0 {
		if v := src.Extra[b.ts]; v != nil {
			ms, reason := b.timestamp(src, v)
			if reason != "" {
				return reason, ReasonTimestamp, nil
			}
			rec.Time = time.UnixMilli(ms)
		}
	}
	topic, terr := b.topic(r)
	if terr != nil {
		return terr.Error(), ReasonTopic, nil
	}
	headers := router.AppendBuiltin(rec.HeaderBuffer(), b.cfg.Builtin, r.id, r.eventType, r.aggType)
	for i := range b.heads {
		h := &b.heads[i]
		v := src.Extra[h.extra]
		if v == nil {
			headers = append(headers, publisher.Header{Key: h.name})
			continue
		}
		conv, reason := b.headerConv(h, src)
		if reason != "" {
			return reason, ReasonColumn, nil
		}
		start := len(arena)
		if arena, err = conv(arena, v, src.ExtraTypmods[h.extra]); err != nil {
			return fmt.Sprintf("header column %s: %v", h.column, err), ReasonColumn, nil
		}
		headers = append(headers, publisher.Header{Key: h.name, Value: arena[start:len(arena):len(arena)]})
	}
	// Structured mode names the envelope's content type; a tombstone has no
	// envelope (compaction needs the null value), so it keeps binary mode's
	// headers: every record is a CloudEvent either way.
	structured := b.ce.structured && !tombstone
	switch {
	case structured:
		headers = append(headers, publisher.Header{Key: HeaderContentType, Value: structuredContent})
	case b.ce.on:
		headers, arena = b.ce.append(headers, arena, r)
	}
	fromJSON := len(headers)
	headers, herr := router.AppendJSON(headers, r.headersJSON)
	if herr == nil && b.ce.on {
		herr = b.ce.reserved(headers[fromJSON:])
	}
	if herr != nil {
		return herr.Error(), ReasonHeaders, nil
	}
	key := r.aggID
	if b.key.format != KeyString {
		var header *[5]byte
		if b.key.format == KeyAvro {
			if header, err = b.keyHeader(ctx, topic); err != nil {
				return "", "", err
			}
		}
		start := len(arena)
		arena = b.key.append(arena, r.aggID, header)
		key = arena[start:len(arena):len(arena)]
	}
	var value []byte
	switch {
	case tombstone:
	case b.cfg.ValueFormat == ValueJSON:
		start := len(arena)
		if structured {
			arena = b.ce.appendHead(arena, r)
		}
		if arena, err = b.json.append(arena, src.Payload); err != nil {
			return err.Error(), ReasonPayload, nil
		}
		if structured {
			arena = append(arena, '}')
			rec.KeepBuffer(arena) // when it grew: start the next use larger
		}
		value = arena[start:]
	default:
		var reason, kind string
		if value, reason, kind, err = b.avro(ctx, topic, r.eventType, arena, src.Payload); reason != "" || err != nil {
			return reason, kind, err
		}
		if cap(value) != cap(arena) {
			rec.KeepBuffer(value) // it grew: start the next use larger
		}
		if structured {
			// The envelope follows the Avro bytes it encodes.
			value = b.ce.appendAvroEnvelope(value[len(value):], r, value)
			rec.KeepBuffer(value)
		}
	}
	if n := publisher.Size(key, value, headers); n > b.cfg.MaxRecordBytes {
		return fmt.Sprintf("record is %d bytes, larger than the broker accepts (--max-record-bytes %d)", n, b.cfg.MaxRecordBytes), ReasonTooLarge, nil
	}
	rec.Topic, rec.Key, rec.Value, rec.Headers = topic, key, value, headers
	return "", "", nil
}

// avro appends the Avro value of payload to arena's free end.
func (b *Builder) avro(ctx context.Context, topic string, eventType, arena, payload []byte) (value []byte, reason, kind string, err error) {
	enc := b.cfg.Registry.Cached(topic, eventType)
	var eerr error
	b.obs.SchemaLookup(enc != nil)
	if enc == nil {
		// A new (topic, event type): one registration. Bound it, so a
		// registry outage turns into a reconnect instead of a reader that
		// stops answering PostgreSQL.
		rctx, cancel := context.WithTimeout(ctx, registryTimeout)
		enc, eerr = b.cfg.Registry.Encoder(rctx, topic, eventType)
		cancel()
	}
	if eerr != nil {
		var incompatible *schemaregistry.IncompatibleError
		switch {
		case errors.Is(eerr, schemaregistry.ErrNoSchema):
			return nil, fmt.Sprintf("no schema for event_type %q: add %s.avsc to --schemas-dir", eventType, eventType), ReasonNoSchema, nil
		case errors.As(eerr, &incompatible):
			return nil, "", "", halt(eerr)
		case schemaregistry.Permanent(eerr):
			// The registry refuses the request (bad credentials, a schema or
			// subject it considers invalid): every event of this type would
			// hit it, and reconnecting would retry it forever without a
			// word beyond "reconnect". Halt and say why.
			return nil, "", "", halt(fmt.Errorf("schema registry refused to register event_type %q for topic %q: %w", eventType, topic, eerr))
		}
		return nil, "", "", fmt.Errorf("schema registry: %w", eerr)
	}
	var sink schemaregistry.FieldSink
	if b.unkObs != nil || b.cfg.UnknownFields == UnknownDLQ {
		b.unk.reset()
		sink = &b.unk
	}
	value, perr := enc.AppendWith(arena[len(arena):], payload, sink)
	if perr != nil {
		return nil, perr.Error(), ReasonSchema, nil
	}
	if sink != nil {
		if reason := b.unknownFields(eventType); reason != "" {
			return nil, reason, ReasonUnknownField, nil
		}
	}
	return value, "", "", nil
}

// keyHeader returns the wire-format header of the key schema for topic,
// registering the schema on the topic's first event.
func (b *Builder) keyHeader(ctx context.Context, topic string) (*[5]byte, error) {
	b.keyMu.Lock()
	h := b.keyIDs[topic]
	b.keyMu.Unlock()
	if h != nil {
		return h, nil
	}
	rctx, cancel := context.WithTimeout(ctx, registryTimeout)
	id, err := b.cfg.Registry.KeyID(rctx, topic)
	cancel()
	if err != nil {
		var incompatible *schemaregistry.IncompatibleError
		if errors.As(err, &incompatible) || schemaregistry.Permanent(err) {
			return nil, halt(err)
		}
		return nil, fmt.Errorf("schema registry: %w", err)
	}
	h = &[5]byte{0, byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id)}
	b.keyMu.Lock()
	b.keyIDs[topic] = h
	b.keyMu.Unlock()
	return h, nil
}

// baseOID returns the oid of the type a column of type oid is stored as:
// a domain's base type, from the catalog.
func (b *Builder) baseOID(oid uint32) uint32 {
	if base, ok := b.base[oid]; ok {
		return base
	}
	return oid
}

// headerConv returns the converter for a header column of this row, by
// the type the Relation message sends.
func (b *Builder) headerConv(h *headerSlot, src *decoder.Row) (headerConv, string) {
	oid := src.ExtraTypes[h.extra]
	if conv := headerConverter(b.baseOID(oid)); conv != nil {
		return conv, ""
	}
	return nil, fmt.Sprintf("header column %s has type oid %d, which has no header form (it changed since the relay started?): use a column of type %s", h.column, oid, HeaderTypes)
}

// timestamp converts the timestamp column's value to epoch milliseconds.
func (b *Builder) timestamp(src *decoder.Row, v []byte) (int64, string) {
	oid := src.ExtraTypes[b.ts]
	conv := timestampConverter(b.baseOID(oid))
	if conv == nil {
		return 0, fmt.Sprintf("timestamp column %s has type oid %d: use a column of type %s", b.cfg.TimestampColumn, oid, TimestampTypes)
	}
	ms, err := conv(v)
	if err != nil {
		return 0, fmt.Sprintf("timestamp column %s: %v", b.cfg.TimestampColumn, err)
	}
	if ms < 0 {
		return 0, fmt.Sprintf("timestamp column %s: %s is before 1970, which a Kafka timestamp cannot be", b.cfg.TimestampColumn, v)
	}
	return ms, ""
}

// columnList names the table's columns for messages.
func columnList(table map[string]catalog.Column) string {
	names := make([]string, 0, len(table))
	for name := range table {
		names = append(names, name)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
