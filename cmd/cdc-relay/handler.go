package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/segmentio/kafka-go"

	"github.com/cdc-relay/cdc-relay/decoder"
	"github.com/cdc-relay/cdc-relay/publisher"
	"github.com/cdc-relay/cdc-relay/replication"
	"github.com/cdc-relay/cdc-relay/router"
	"github.com/cdc-relay/cdc-relay/schemaregistry"
)

// HeaderError is the dead-letter header that carries the reason.
const HeaderError = "error"

// Reasons an event is invalid; they label cdc_relay_dlq_events_total.
const (
	reasonSchema      = "schema_mismatch"
	reasonNoSchema    = "no_schema"
	reasonAggregateID = "empty_aggregate_id"
	reasonTopic       = "invalid_topic"
	reasonTooLarge    = "too_large"
	reasonHeaders     = "invalid_headers"
	reasonNull        = "null_column"
)

// registryTimeout bounds a first registration inside the reader.
const registryTimeout = 20 * time.Second

// InvalidEventError halts the relay under --on-invalid halt.
type InvalidEventError struct {
	ID, EventType, AggregateType string
	Reason                       string
}

func (e *InvalidEventError) Error() string {
	return fmt.Sprintf("invalid event id=%s event_type=%s aggregate_type=%s: %s; halted with nothing confirmed past it (--on-invalid halt)",
		e.ID, e.EventType, e.AggregateType, e.Reason)
}

// handler turns rows into records: the replication.Session of one connection.
type handler struct {
	ctx       context.Context
	cfg       *Config
	router    *router.Router
	registry  *schemaregistry.Registry
	pub       recordSink
	maxRecord int
	metrics   *metrics
	log       *slog.Logger
}

var _ replication.Session = (*handler)(nil)

// recordSink is what the handler needs of a *publisher.Session.
type recordSink interface {
	Enqueue(*publisher.Record) error
	Drain(context.Context) error
	Close()
	Done() <-chan struct{}
	Err() error
}

// Row builds the record for one row, or its dead-letter record, and hands it
// to the publisher.
func (h *handler) Row(ctx context.Context, seq uint64, size int, tx *replication.Tx, row *decoder.Row) error {
	// A pooled record: its one buffer holds every byte it keeps from the
	// row and then the Avro value, so a steady stream allocates nothing
	// per event here.
	rec := publisher.NewRecord()
	rec.Seq, rec.Reserved = seq, size
	kept := len(row.ID) + len(row.EventType) + len(row.AggregateType) + len(row.AggregateID) + len(row.Headers)
	arena := rec.Buffer(kept + len(row.Payload) + avroSlack)
	id, arena := keep(arena, row.ID)
	eventType, arena := keep(arena, row.EventType)
	aggType, arena := keep(arena, row.AggregateType)
	aggID, arena := keep(arena, row.AggregateID)
	headersJSON, arena := keep(arena, row.Headers)

	reason, kind, err := h.build(ctx, rec, row, id, eventType, aggType, aggID, headersJSON, arena[len(arena):])
	if err != nil {
		return err
	}
	if reason != "" {
		// A reason may quote the row (a bad uuid, an enum symbol, a map
		// key): keep headers, logs and the halt message a sane size.
		reason = clip(reason, maxReasonBytes)
		if h.cfg.OnInvalid == "halt" {
			return replication.Fatal(&InvalidEventError{ID: clip(string(id), maxNameBytes), EventType: clip(string(eventType), maxNameBytes),
				AggregateType: clip(string(aggType), maxNameBytes), Reason: reason})
		}
		h.deadLetter(rec, row, id, eventType, aggType, aggID, headersJSON, reason)
		h.metrics.dlq.WithLabelValues(kind).Inc()
		h.log.Warn("invalid event sent to the dead-letter topic", "id", string(id), "event_type", string(eventType), "reason", reason, "dlq_topic", h.cfg.DLQTopic)
	}
	return h.pub.Enqueue(rec)
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

// build fills rec for a valid row. It returns a reason (and its metric kind)
// when the row is invalid, and an error only for failures that are not the
// event's fault (the registry unreachable, a shutdown).
//
// The value is appended to valueBuf, the free end of the record's buffer.
func (h *handler) build(ctx context.Context, rec *publisher.Record, row *decoder.Row, id, eventType, aggType, aggID, headersJSON, valueBuf []byte) (reason, kind string, err error) {
	if col := row.NullField(); col != "" {
		return col + " is NULL", reasonNull, nil
	}
	switch {
	case row.AggregateIDNull:
		return "aggregate_id is NULL", reasonAggregateID, nil
	case len(aggID) == 0:
		return "aggregate_id is empty", reasonAggregateID, nil
	case len(eventType) == 0:
		return "event_type is empty", reasonNoSchema, nil
	}
	topic, terr := h.router.Topic(aggType, eventType)
	if terr != nil {
		return terr.Error(), reasonTopic, nil
	}
	headers, herr := router.AppendHeaders(rec.HeaderBuffer(), id, eventType, aggType, headersJSON)
	if herr != nil {
		return herr.Error(), reasonHeaders, nil
	}
	enc := h.registry.Cached(topic, eventType)
	var eerr error
	if enc != nil {
		h.metrics.cacheHit.Inc()
	} else {
		h.metrics.cacheMiss.Inc()
		// A new (topic, event type): one registration. Bound it, so a registry
		// outage turns into a reconnect instead of a reader that stops
		// answering PostgreSQL.
		rctx, cancel := context.WithTimeout(ctx, registryTimeout)
		enc, eerr = h.registry.Encoder(rctx, topic, eventType)
		cancel()
	}
	if eerr != nil {
		var incompatible *schemaregistry.IncompatibleError
		switch {
		case errors.Is(eerr, schemaregistry.ErrNoSchema):
			return fmt.Sprintf("no schema for event_type %q: add %s.avsc to --schemas-dir", eventType, eventType), reasonNoSchema, nil
		case errors.As(eerr, &incompatible):
			return "", "", replication.Fatal(eerr)
		case schemaregistry.Permanent(eerr):
			// The registry refuses the request (bad credentials, a schema or
			// subject it considers invalid): every event of this type would
			// hit it, and reconnecting would retry it forever without a
			// word beyond "reconnect". Halt and say why.
			return "", "", replication.Fatal(fmt.Errorf("schema registry refused to register event_type %q for topic %q: %w", eventType, topic, eerr))
		}
		return "", "", fmt.Errorf("schema registry: %w", eerr)
	}
	value, perr := enc.Append(valueBuf, row.Payload)
	if perr != nil {
		return perr.Error(), reasonSchema, nil
	}
	if cap(value) != cap(valueBuf) {
		rec.KeepBuffer(value) // it grew: start the next use larger
	}
	if n := publisher.Size(aggID, value, headers); n > h.maxRecord {
		return fmt.Sprintf("record is %d bytes, larger than the broker accepts (--max-record-bytes %d)", n, h.maxRecord), reasonTooLarge, nil
	}
	rec.Topic, rec.Key, rec.Value, rec.Headers = topic, aggID, value, headers
	return "", "", nil
}

// deadLetter makes rec the dead-letter record: the raw JSON payload with
// the row's headers, then id, event_type, aggregate_type and error. When the
// record would be larger than --max-record-bytes, it drops the largest of
// the payload, the row's own headers and the key until the record fits (then,
// if need be, the tail of the id, event_type and aggregate_type values), and
// says so in the error header: a dead letter the broker refuses would stop
// the relay instead.
func (h *handler) deadLetter(rec *publisher.Record, row *decoder.Row, id, eventType, aggType, aggID, headersJSON []byte, reason string) {
	payload := append([]byte(nil), row.Payload...)
	// The row's own headers (traceparent, ...) travel too, when they parse;
	// the id, event_type and aggregate_type headers come from the row.
	headers, err := router.AppendHeaders(make([]kafka.Header, 0, 8), id, eventType, aggType, headersJSON)
	rowHeaders := len(headersJSON)
	if err != nil {
		headers, rowHeaders = headers[:3], 0
	}
	// The error header goes last: a row header also named "error" must not
	// mask the reason for consumers that read the last header of a name
	// (Java's Headers.lastHeader).
	headers = append(headers, kafka.Header{Key: HeaderError, Value: []byte(reason)})
	key := aggID
	var omitted []string
	fits := func() bool {
		headers[len(headers)-1].Value = omittedReason(reason, omitted)
		return publisher.Size(key, payload, headers) <= h.maxRecord
	}
	parts := []struct {
		size int
		drop func()
	}{
		{len(payload), func() {
			payload = nil
			omitted = append(omitted, fmt.Sprintf("the %d-byte payload", len(row.Payload)))
		}},
		{rowHeaders, func() {
			headers = append(headers[:3], headers[len(headers)-1])
			omitted = append(omitted, fmt.Sprintf("the %d-byte headers column", len(headersJSON)))
		}},
		{len(key), func() {
			omitted = append(omitted, fmt.Sprintf("the %d-byte key", len(key)))
			key = nil
		}},
	}
	sort.SliceStable(parts, func(i, j int) bool { return parts[i].size > parts[j].size })
	for _, p := range parts {
		if fits() {
			break
		}
		if p.size > 0 {
			p.drop()
		}
	}
	if !fits() {
		for i := range headers[:3] {
			headers[i].Value = []byte(clip(string(headers[i].Value), maxNameBytes))
		}
		omitted = append(omitted, "the end of the id, event_type and aggregate_type headers")
		fits()
	}
	rec.Topic, rec.Key, rec.Value, rec.Headers = h.cfg.DLQTopic, key, payload, headers
}

// Size caps for what the relay quotes from a row in messages.
const (
	maxReasonBytes = 1024 // the error header and the halt reason
	maxNameBytes   = 256  // an id, event_type or aggregate_type in a message
)

// clip cuts s to at most n bytes on a UTF-8 boundary, marking the cut with "…".
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n -= len("…")
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// omittedReason is the dead-letter error header: the reason, and what of
// the row was left out to make the record fit.
func omittedReason(reason string, omitted []string) []byte {
	switch len(omitted) {
	case 0:
		return []byte(reason)
	case 1:
		return fmt.Appendf(nil, "%s; %s is omitted because it does not fit in a record", reason, omitted[0])
	}
	return fmt.Appendf(nil, "%s; %s and %s are omitted because they do not fit in a record",
		reason, strings.Join(omitted[:len(omitted)-1], ", "), omitted[len(omitted)-1])
}

// Drain waits for Kafka to acknowledge everything handed over.
func (h *handler) Drain(ctx context.Context) error { return h.pub.Drain(ctx) }

// Close drops the session.
func (h *handler) Close() { h.pub.Close() }

// Done is closed when the publisher session stopped on a terminal error.
func (h *handler) Done() <-chan struct{} { return h.pub.Done() }

// Err is the publisher session's terminal error.
func (h *handler) Err() error { return h.pub.Err() }

// rejected handles a record the broker refused as too large (its topic's
// max.message.bytes is below --max-record-bytes): under --on-invalid dlq it
// becomes a dead letter without its value, which cannot fit; under halt the
// relay stops naming the event.
func rejected(cfg *Config, m *metrics, log *slog.Logger) func(*publisher.Record, error) (*publisher.Record, error) {
	return func(r *publisher.Record, err error) (*publisher.Record, error) {
		id, eventType, aggType := headerOf(r, router.HeaderID), headerOf(r, router.HeaderEventType), headerOf(r, router.HeaderAggregateType)
		reason := fmt.Sprintf("the broker refused the %d-byte record for topic %s as too large (%v); the value is omitted", publisher.Size(r.Key, r.Value, r.Headers), r.Topic, err)
		if cfg.OnInvalid == "halt" {
			return nil, replication.Fatal(&InvalidEventError{ID: id, EventType: eventType, AggregateType: aggType, Reason: reason})
		}
		headers := make([]kafka.Header, 0, len(r.Headers)+1)
		for _, h := range r.Headers {
			if h.Key != HeaderError {
				headers = append(headers, h)
			}
		}
		headers = append(headers, kafka.Header{Key: HeaderError, Value: []byte(reason)})
		m.dlq.WithLabelValues(reasonTooLarge).Inc()
		log.Warn("invalid event sent to the dead-letter topic", "id", id, "event_type", eventType, "reason", reason, "dlq_topic", cfg.DLQTopic)
		return &publisher.Record{Topic: cfg.DLQTopic, Key: r.Key, Headers: headers, Seq: r.Seq, Reserved: r.Reserved}, nil
	}
}

func headerOf(r *publisher.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}
