package record

import (
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cdc-relay/cdc-relay/publisher"
	"github.com/cdc-relay/cdc-relay/router"
)

// HeaderErrorKind is the dead-letter header that carries the reason's
// code, the reason label of cdc_relay_dlq_events_total (ReasonSchema, ...):
// the header for programs, as HeaderError is for people. Every dead
// letter has both, error_kind just before error, the last two headers.
const HeaderErrorKind = "error_kind"

// deadLetter makes rec the dead-letter record: the raw payload with the
// headers id, event_type and aggregate_type, the row's own headers, then
// outbox_row (what redrive needs besides: LetterRow), error_kind (kind)
// and error (reason), and the commit time as its timestamp. When the record would be larger than
// MaxRecordBytes, it drops the largest of the payload, the row's own
// headers and the key until the record fits (then, if need be, the tail of
// the id, event_type and aggregate_type values), and says so in the error
// header: a dead letter the broker refuses would stop the relay instead.
func (b *Builder) deadLetter(rec *publisher.Record, r row, reason, kind string) {
	raw := r.src.Payload
	if r.src.Message {
		raw = r.src.Content // the whole message, as the application wrote it
	}
	payload := append([]byte(nil), raw...)
	// The row's own headers (traceparent, ...) travel too, when they parse;
	// the id, event_type and aggregate_type headers come from the row.
	headers, err := router.AppendHeaders(make([]publisher.Header, 0, 8), r.id, r.eventType, r.aggType, r.headersJSON)
	rowHeaders := len(r.headersJSON)
	if err != nil {
		headers, rowHeaders = headers[:3], 0
	}
	// Then what redrive needs of the row (HeaderRow), and the error_kind
	// and error headers last: a row header also named "error" must not
	// mask the reason for consumers that read the last header of a name
	// (Java's Headers.lastHeader).
	headers = append(headers, publisher.Header{Key: HeaderRow, Value: b.letterRow(r, false)},
		publisher.Header{Key: HeaderErrorKind, Value: []byte(kind)}, publisher.Header{Key: HeaderError, Value: []byte(reason)})
	key := r.aggID
	var omitted []string
	fits := func() bool {
		headers[len(headers)-1].Value = omittedReason(reason, omitted)
		if len(omitted) > 0 {
			headers[len(headers)-3].Value = b.letterRow(r, true)
		}
		return publisher.Size(key, payload, headers) <= b.cfg.MaxRecordBytes
	}
	parts := []struct {
		size int
		drop func()
	}{
		{len(payload), func() {
			payload = nil
			omitted = append(omitted, fmt.Sprintf("the %d-byte payload", len(raw)))
		}},
		{rowHeaders, func() {
			headers = append(headers[:3], headers[len(headers)-3:]...)
			omitted = append(omitted, fmt.Sprintf("the %d-byte headers column", len(r.headersJSON)))
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
	rec.Topic, rec.Key, rec.Value, rec.Headers, rec.Time = b.cfg.DLQTopic, key, payload, headers, r.commitTime
}

// Rejected handles a record the broker refused (publisher.Config.Reject):
// as too large (its topic's max.message.bytes is below --max-record-bytes)
// or for its timestamp. It returns the event as Invalid and its dead
// letter, which carries no value: the value cannot fit, or is not what is
// wrong. The dead letter keeps the record's timestamp unless that was what
// the broker refused. The dead letter goes to dlqTopic (--dlq-topic). It
// needs no Builder: the publisher, which calls it, exists before one.
func Rejected(dlqTopic string, r *publisher.Record, err error) (*publisher.Record, *Invalid) {
	inv := &Invalid{ID: headerOf(r, router.HeaderID), EventType: headerOf(r, router.HeaderEventType),
		AggregateType: headerOf(r, router.HeaderAggregateType), Kind: ReasonTooLarge}
	when := r.Time
	if publisher.TimestampRefused(err) {
		inv.Kind, when = ReasonTimestamp, time.Time{}
		inv.Reason = fmt.Sprintf("the broker refused the record for topic %s for its timestamp %s (%v: see the topic's message.timestamp.after.max.ms and before.max.ms); the value is omitted",
			r.Topic, r.Time.UTC().Format(time.RFC3339Nano), err)
	} else {
		inv.Reason = fmt.Sprintf("the broker refused the %d-byte record for topic %s as too large (%v); the value is omitted", publisher.Size(r.Key, r.Value, r.Headers), r.Topic, err)
	}
	headers := make([]publisher.Header, 0, len(r.Headers)+2)
	for _, h := range r.Headers {
		if h.Key != HeaderError && h.Key != HeaderErrorKind {
			headers = append(headers, h)
		}
	}
	headers = append(headers, publisher.Header{Key: HeaderErrorKind, Value: []byte(inv.Kind)}, publisher.Header{Key: HeaderError, Value: []byte(inv.Reason)})
	return &publisher.Record{Topic: dlqTopic, Key: r.Key, Headers: headers, Time: when, Seq: r.Seq, Reserved: r.Reserved}, inv
}

func headerOf(r *publisher.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
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
