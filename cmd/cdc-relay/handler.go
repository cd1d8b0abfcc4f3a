package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

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
	pub       *publisher.Session
	maxRecord int
	metrics   *metrics
	log       *slog.Logger
}

var _ replication.Session = (*handler)(nil)

// Row builds the record for one row, or its dead-letter record, and hands it
// to the publisher.
func (h *handler) Row(ctx context.Context, seq uint64, size int, tx *replication.Tx, row *decoder.Row) error {
	rec := &publisher.Record{Seq: seq, Reserved: size}
	// One allocation holds every byte the record keeps from the row.
	arena := make([]byte, 0, len(row.ID)+len(row.EventType)+len(row.AggregateType)+len(row.AggregateID)+len(row.Headers))
	id, arena := keep(arena, row.ID)
	eventType, arena := keep(arena, row.EventType)
	aggType, arena := keep(arena, row.AggregateType)
	aggID, arena := keep(arena, row.AggregateID)
	headersJSON, _ := keep(arena, row.Headers)

	reason, kind, err := h.build(ctx, rec, row, id, eventType, aggType, aggID, headersJSON)
	if err != nil {
		return err
	}
	if reason != "" {
		if h.cfg.OnInvalid == "halt" {
			return replication.Fatal(&InvalidEventError{ID: string(id), EventType: string(eventType), AggregateType: string(aggType), Reason: reason})
		}
		h.deadLetter(rec, row, id, eventType, aggType, aggID, headersJSON, reason)
		h.metrics.dlq.WithLabelValues(kind).Inc()
		h.log.Warn("invalid event sent to the dead-letter topic", "id", string(id), "event_type", string(eventType), "reason", reason, "dlq_topic", h.cfg.DLQTopic)
	}
	return h.pub.Enqueue(rec)
}

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
func (h *handler) build(ctx context.Context, rec *publisher.Record, row *decoder.Row, id, eventType, aggType, aggID, headersJSON []byte) (reason, kind string, err error) {
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
	headers, herr := router.AppendHeaders(make([]kafka.Header, 0, 4), id, eventType, aggType, headersJSON)
	if herr != nil {
		return herr.Error(), reasonHeaders, nil
	}
	enc := h.registry.Cached(topic, eventType)
	var eerr error
	if enc == nil {
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
		}
		return "", "", fmt.Errorf("schema registry: %w", eerr)
	}
	value, perr := enc.Append(make([]byte, 0, len(row.Payload)+5), row.Payload)
	if perr != nil {
		return perr.Error(), reasonSchema, nil
	}
	if n := publisher.Size(aggID, value, headers); n > h.maxRecord {
		return fmt.Sprintf("record is %d bytes, larger than the broker accepts (--max-record-bytes %d)", n, h.maxRecord), reasonTooLarge, nil
	}
	rec.Topic, rec.Key, rec.Value, rec.Headers = topic, aggID, value, headers
	return "", "", nil
}

// deadLetter makes rec the dead-letter record: the raw JSON payload with
// headers id, event_type, aggregate_type and error.
func (h *handler) deadLetter(rec *publisher.Record, row *decoder.Row, id, eventType, aggType, aggID, headersJSON []byte, reason string) {
	payload := append([]byte(nil), row.Payload...)
	headers := []kafka.Header{
		{Key: HeaderError, Value: []byte(reason)},
	}
	// The row's own headers (traceparent, ...) travel too, when they parse;
	// the id, event_type and aggregate_type headers come from the row.
	headers, err := router.AppendHeaders(headers, id, eventType, aggType, headersJSON)
	if err != nil {
		headers = headers[:4]
	}
	if n := publisher.Size(aggID, payload, headers); n > h.maxRecord {
		payload = nil
		headers[0].Value = fmt.Appendf(nil, "%s; the %d-byte payload is omitted because it does not fit in a record", reason, len(row.Payload))
	}
	rec.Topic, rec.Key, rec.Value, rec.Headers = h.cfg.DLQTopic, aggID, payload, headers
}

// Drain waits for Kafka to acknowledge everything handed over.
func (h *handler) Drain(ctx context.Context) error { return h.pub.Drain(ctx) }

// Close drops the session.
func (h *handler) Close() { h.pub.Close() }

// Done is closed when the publisher session stopped on a terminal error.
func (h *handler) Done() <-chan struct{} { return h.pub.Done() }

// Err is the publisher session's terminal error.
func (h *handler) Err() error { return h.pub.Err() }
