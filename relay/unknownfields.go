package relay

import (
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	recordpkg "github.com/cdc-relay/cdc-relay/record"
)

// unknownFields counts the payload members an event type's Avro schema
// has no field for (cdc_relay_unknown_fields_total{event_type}) and logs
// each event type and field once at WARN, under --unknown-fields ignore
// and dlq alike. Builders of every connection share it.
type unknownFields struct {
	total *prometheus.CounterVec
	mode  string // --unknown-fields, for the log line
	log   *slog.Logger
	// deadLetters names where dead letters go, for the log line: the
	// dead-letter topic, or under RabbitMQ the dead-letter stream.
	deadLetters string

	mu   sync.Mutex
	seen map[string]map[string]bool // event type → field
}

func newUnknownFields(reg prometheus.Registerer, deadLetters string) *unknownFields {
	u := &unknownFields{seen: map[string]map[string]bool{}, mode: "ignore", deadLetters: deadLetters,
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cdc_relay_unknown_fields_total",
			Help: "Payload members the event type's Avro schema has no field for, by event type (left out under --unknown-fields ignore; the event dead-lettered under dlq).",
		}, []string{"event_type"})}
	reg.MustRegister(u.total)
	return u
}

// observe counts one unknown field and says whether it is the first of
// its event type and name.
func (u *unknownFields) observe(eventType, field string) bool {
	u.total.WithLabelValues(eventType).Inc()
	u.mu.Lock()
	defer u.mu.Unlock()
	fields := u.seen[eventType]
	if fields == nil {
		fields = map[string]bool{}
		u.seen[eventType] = fields
	}
	if fields[field] {
		return false
	}
	fields[field] = true
	return true
}

// UnknownField implements recordpkg.UnknownFieldObserver for the metrics.
func (m *Metrics) UnknownField(eventType, field string) {
	u := m.unknown
	if !u.observe(eventType, field) {
		return
	}
	log := u.log
	if log == nil {
		log = slog.Default()
	}
	what := "published without it (--unknown-fields ignore: Avro's writer semantics); add the field to the schema, or set --unknown-fields dlq to keep such events until it is"
	if u.mode == "dlq" {
		what = "sent to " + u.deadLetters + " (--unknown-fields dlq, kind unknown_field): deploy a schema with the field, then run cdc-relay dlq redrive"
	}
	log.Warn("payload field not in the event type's schema: "+what+"; counted in cdc_relay_unknown_fields_total, logged once per event type and field",
		"event_type", eventType, "field", field)
}

var _ recordpkg.UnknownFieldObserver = (*Metrics)(nil)

// logUnknownFields gives the metrics the logger and mode of the WARN about
// unknown payload fields.
func (m *Metrics) logUnknownFields(log *slog.Logger, mode string) {
	m.unknown.mu.Lock()
	m.unknown.log, m.unknown.mode = log, mode
	m.unknown.mu.Unlock()
}
