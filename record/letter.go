package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cdc-relay/cdc-relay/decoder"
	"github.com/cdc-relay/cdc-relay/router"
)

// Dead-letter headers beyond error_kind and error.
const (
	// HeaderRow carries, as a JSON object (LetterRow), what the dead letter
	// keeps of its row beyond its key, value, timestamp and the id,
	// event_type and aggregate_type headers, so that cdc-relay dlq redrive
	// can build the record again. It comes just before error_kind.
	HeaderRow = "outbox_row"
	// HeaderRedriveAttempts counts the redrives a dead letter has been
	// through: cdc-relay dlq redrive re-appends a letter that still fails
	// with this header one higher (absent: 0).
	HeaderRedriveAttempts = "redrive_attempts"
)

// LetterRow is the JSON of the HeaderRow header.
type LetterRow struct {
	// Table is the row's outbox table ("schema.table"); "" for a logical
	// message.
	Table string `json:"table,omitempty"`
	// Message is true for an event written as a logical decoding message:
	// the letter's value is then the message's whole content.
	Message bool `json:"message,omitempty"`
	// LSN is the message's LSN (PostgreSQL's text form), the id of one
	// whose content has none.
	LSN string `json:"lsn,omitempty"`
	// NonTransactional is a message emitted with transactional = false.
	NonTransactional bool `json:"non_transactional,omitempty"`
	// Null lists the columns among id, aggregate_type, aggregate_id,
	// event_type and payload that are NULL (the key or header is then
	// empty).
	Null []string `json:"null,omitempty"`
	// Headers is the headers column's text; nil when it is NULL or absent.
	Headers *string `json:"headers,omitempty"`
	// Columns holds the header and timestamp columns' text (nil for NULL).
	Columns map[string]*string `json:"columns,omitempty"`
	// Omitted is true when part of the row did not fit in the record: the
	// letter cannot be built again.
	Omitted bool `json:"omitted,omitempty"`
}

// letterRow is the HeaderRow value for row r.
func (b *Builder) letterRow(r row, omitted bool) []byte {
	src := r.src
	lr := LetterRow{Omitted: omitted}
	switch {
	case src.Message:
		lr.Message, lr.NonTransactional = true, src.NonTransactional
		lr.LSN = fmt.Sprintf("%X/%X", src.LSN>>32, uint32(src.LSN))
	default:
		lr.Table = b.tableName(src.RelationID)
		for _, n := range []struct {
			name string
			null bool
		}{{"id", src.IDNull}, {"aggregate_type", src.AggregateTypeNull}, {"aggregate_id", src.AggregateIDNull}, {"event_type", src.EventTypeNull}, {"payload", src.PayloadNull}} {
			if n.null {
				lr.Null = append(lr.Null, n.name)
			}
		}
		if !omitted {
			if r.headersJSON != nil {
				h := string(r.headersJSON)
				lr.Headers = &h
			}
			if len(b.extra) > 0 {
				lr.Columns = make(map[string]*string, len(b.extra))
				for i, name := range b.extra {
					if i < len(src.Extra) && src.Extra[i] != nil {
						v := string(src.Extra[i])
						lr.Columns[name] = &v
					} else {
						lr.Columns[name] = nil
					}
				}
			}
		}
	}
	out, _ := json.Marshal(lr) // strings and bools always marshal
	return out
}

// tableName names the outbox table of relation id, "" when unknown.
func (b *Builder) tableName(id uint32) string {
	for _, t := range b.cfg.Tables {
		if t.OID == id && id != 0 {
			return t.Name
		}
	}
	if len(b.cfg.Tables) == 1 {
		return b.cfg.Tables[0].Name
	}
	return ""
}

// LetterHeader is one header of a dead letter as read back from Kafka.
type LetterHeader struct {
	Key   string
	Value []byte
}

// Letter is a dead letter read back from the dead-letter topic.
type Letter struct {
	Key, Value []byte
	Headers    []LetterHeader
	Time       time.Time // the record's timestamp: the commit time
}

// Header returns the last value of the header named key.
func (l *Letter) Header(key string) ([]byte, bool) {
	for i := len(l.Headers) - 1; i >= 0; i-- {
		if l.Headers[i].Key == key {
			return l.Headers[i].Value, true
		}
	}
	return nil, false
}

// Kind is the letter's error_kind ("" when it has none).
func (l *Letter) Kind() string {
	v, _ := l.Header(HeaderErrorKind)
	return string(v)
}

// Attempts is the letter's redrive_attempts (0 when it has none).
func (l *Letter) Attempts() int {
	v, _ := l.Header(HeaderRedriveAttempts)
	n, _ := strconv.Atoi(string(v))
	return n
}

// ErrNotRedrivable is wrapped by Rebuild's errors: the letter lacks what
// the row → record step needs.
var ErrNotRedrivable = errors.New("the dead letter cannot be built again")

// Rebuilt is a dead letter's row, ready for Builder.Build.
type Rebuilt struct {
	Row decoder.Row
	// Table is the row's outbox table ("" for a message).
	Table string
	// CommitTime is the original commit time (the letter's timestamp).
	CommitTime time.Time
}

// Rebuild turns a dead letter written by Build back into its row, with
// extra as the builder's extra columns (ExtraColumns) whose values it
// fills. Message content is parsed again by dec, a decoder with the
// relay's message prefix and extra columns. Errors wrap ErrNotRedrivable.
func Rebuild(l *Letter, extra []string, dec *decoder.Decoder, prefix string) (*Rebuilt, error) {
	if kind := l.Kind(); kind == ReasonUnconfigured {
		return nil, fmt.Errorf("%w: an unconfigured_table letter holds a row of another table, not an outbox event", ErrNotRedrivable)
	}
	raw, ok := l.Header(HeaderRow)
	if !ok {
		return nil, fmt.Errorf("%w: it has no %s header (written by the broker's refusal, which keeps no payload, or by a relay older than dlq redrive)", ErrNotRedrivable, HeaderRow)
	}
	var lr LetterRow
	if err := json.Unmarshal(raw, &lr); err != nil {
		return nil, fmt.Errorf("%w: its %s header is not JSON: %v", ErrNotRedrivable, HeaderRow, err)
	}
	if lr.Omitted {
		return nil, fmt.Errorf("%w: part of the row did not fit in the dead letter (see its error header)", ErrNotRedrivable)
	}
	rb := &Rebuilt{Table: lr.Table, CommitTime: l.Time}
	if lr.Message {
		if l.Value == nil {
			return nil, fmt.Errorf("%w: the message content is missing", ErrNotRedrivable)
		}
		var hi, lo uint64
		if _, err := fmt.Sscanf(lr.LSN, "%X/%X", &hi, &lo); err != nil {
			return nil, fmt.Errorf("%w: the message LSN %q: %v", ErrNotRedrivable, lr.LSN, err)
		}
		// The content goes through the decoder as a pgoutput message, so
		// that it is read exactly as the stream reads it.
		msg := []byte{'M', 1}
		if lr.NonTransactional {
			msg[1] = 0
		}
		msg = append(msg, byte(hi>>24), byte(hi>>16), byte(hi>>8), byte(hi), byte(lo>>24), byte(lo>>16), byte(lo>>8), byte(lo))
		msg = append(msg, prefix...)
		msg = append(msg, 0, byte(len(l.Value)>>24), byte(len(l.Value)>>16), byte(len(l.Value)>>8), byte(len(l.Value)))
		msg = append(msg, l.Value...)
		var m decoder.Message
		if err := dec.Decode(msg, &m); err != nil || m.Kind != decoder.KindRow {
			return nil, fmt.Errorf("%w: the message content does not decode (%v)", ErrNotRedrivable, err)
		}
		rb.Row = m.Row
		rb.Row.Extra = append([][]byte(nil), m.Row.Extra...)
		return rb, nil
	}
	null := map[string]bool{}
	for _, n := range lr.Null {
		null[n] = true
	}
	r := &rb.Row
	// The builtin headers come first in every dead letter Build writes.
	r.ID, r.IDNull = firstHeader(l, router.HeaderID, null["id"])
	r.EventType, r.EventTypeNull = firstHeader(l, router.HeaderEventType, null["event_type"])
	r.AggregateType, r.AggregateTypeNull = firstHeader(l, router.HeaderAggregateType, null["aggregate_type"])
	r.AggregateID, r.AggregateIDNull = l.Key, null["aggregate_id"]
	if r.AggregateID == nil && !r.AggregateIDNull {
		r.AggregateID = []byte{}
	}
	r.Payload, r.PayloadNull = l.Value, null["payload"]
	if r.Payload == nil && !r.PayloadNull {
		return nil, fmt.Errorf("%w: the payload is missing", ErrNotRedrivable)
	}
	if lr.Headers != nil {
		r.Headers = []byte(*lr.Headers)
	}
	r.Extra = make([][]byte, len(extra))
	for i, name := range extra {
		v, ok := lr.Columns[name]
		if !ok {
			return nil, fmt.Errorf("%w: it does not keep column %q, which --header-columns or --timestamp-column now need (the letter was written without that setting)", ErrNotRedrivable, name)
		}
		if v != nil {
			r.Extra[i] = []byte(*v)
		}
	}
	return rb, nil
}

// firstHeader is the value of the first header named key (the builtin
// headers precede the row's own), or nil when null.
func firstHeader(l *Letter, key string, null bool) ([]byte, bool) {
	if null {
		return nil, true
	}
	for _, h := range l.Headers {
		if h.Key == key {
			if h.Value == nil {
				return []byte{}, false
			}
			return h.Value, false
		}
	}
	return []byte{}, false
}

// LetterTable checks that a rebuilt row's table is one of names; "" (a
// message, or a single-table letter) always is.
func LetterTable(rb *Rebuilt, names []string) error {
	if rb.Table == "" {
		return nil
	}
	for _, n := range names {
		if strings.EqualFold(n, rb.Table) || n == rb.Table {
			return nil
		}
	}
	return fmt.Errorf("%w: its table %s is not a configured outbox table (--table %s)", ErrNotRedrivable, rb.Table, strings.Join(names, ","))
}
