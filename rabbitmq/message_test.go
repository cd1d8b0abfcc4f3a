package rabbitmq

import (
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/cdc-relay/cdc-relay/publisher"
)

func testFormat(t *testing.T, template string, ce bool) *Format {
	t.Helper()
	rk, err := ParseRoutingKey(template)
	if err != nil {
		t.Fatal(err)
	}
	return &Format{Exchange: "outbox", RoutingKey: rk, DLQStream: "outbox.dlq", ContentType: "application/json", CloudEvents: ce}
}

func testRecord(aggID string, headers ...publisher.Header) *publisher.Record {
	return &publisher.Record{Topic: "outbox", Seq: 7, Value: []byte(`{"a":1}`), Time: time.Unix(1700000000, 0),
		ID: []byte("42"), EventType: []byte("OrderCreated"), AggregateType: []byte("Order"), AggregateID: []byte(aggID), Headers: headers}
}

// TestMessage: a record's message carries the properties and headers the
// contract names; ce_* headers become cloudEvents_* under --cloudevents.
func TestMessage(t *testing.T) {
	r := testRecord("o-1", publisher.Header{Key: "id", Value: []byte("42")}, publisher.Header{Key: "traceparent", Value: []byte("00-ab-cd-01")},
		publisher.Header{Key: "nothing"}, publisher.Header{Key: "aggregate_id", Value: []byte("spoofed")})
	m, kind := testFormat(t, "{aggregate_type}.{event_type}.{aggregate_id}", false).Message(r)
	if kind != "" || m.DeadLetter {
		t.Fatalf("a dead letter (%q)", kind)
	}
	p := m.Publishing
	got := []any{m.Seq, m.Exchange, m.RoutingKey, p.DeliveryMode, p.MessageId, p.Type, p.Timestamp.Unix(), p.ContentType, p.AppId, string(p.Body)}
	want := []any{uint64(7), "outbox", "Order.OrderCreated.o-1", amqp.Persistent, "42", "OrderCreated", int64(1700000000), "application/json", "cdc-relay", `{"a":1}`}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("field %d: got %v, want %v", i, got[i], want[i])
		}
	}
	wantHeaders := amqp.Table{"id": "42", "traceparent": "00-ab-cd-01", "nothing": nil, "aggregate_id": "o-1", "aggregate_type": "Order"}
	if len(p.Headers) != len(wantHeaders) {
		t.Errorf("headers %v, want %v", p.Headers, wantHeaders)
	}
	for k, v := range wantHeaders {
		if got, ok := p.Headers[k]; !ok || got != v {
			t.Errorf("header %s: %v, want %v", k, got, v)
		}
	}

	ce := testRecord("o-1", publisher.Header{Key: "ce_specversion", Value: []byte("1.0")}, publisher.Header{Key: "ce_id", Value: []byte("42")},
		publisher.Header{Key: "content-type", Value: []byte("application/avro")})
	m, _ = testFormat(t, "{event_type}", true).Message(ce)
	if m.Publishing.Headers["cloudEvents_specversion"] != "1.0" || m.Publishing.Headers["cloudEvents_id"] != "42" || m.Publishing.ContentType != "application/avro" {
		t.Errorf("cloudevents: headers %v, content type %s", m.Publishing.Headers, m.Publishing.ContentType)
	}
	for k := range m.Publishing.Headers {
		if strings.HasPrefix(k, "ce_") || k == "content-type" {
			t.Errorf("header %s is left", k)
		}
	}
}

// TestMessageDeadLetters: a routing key over 255 bytes makes the message a
// dead letter to the stream, with its reason; so does a return; the
// builder's dead letter goes to the stream as it is, its key the
// aggregate_id header.
func TestMessageDeadLetters(t *testing.T) {
	f := testFormat(t, "{aggregate_id}", false)
	m, kind := f.Message(testRecord(strings.Repeat("x", 300)))
	h := m.Publishing.Headers
	if kind != KindInvalidRouteKey || !m.DeadLetter || m.Exchange != "" || m.RoutingKey != "outbox.dlq" || h[HeaderErrorKind] != KindInvalidRouteKey ||
		!strings.Contains(h[HeaderError].(string), "300 bytes") || len(h[HeaderRoutingKey].(string)) != 255 || h[HeaderExchange] != "outbox" || m.Publishing.MessageId != "42" {
		t.Fatalf("kind %q, %+v", kind, m)
	}
	m, _ = f.Message(testRecord("o-1"))
	dl := f.DeadLetter(m, KindUnroutable, "no route")
	if dl.Exchange != "" || dl.RoutingKey != "outbox.dlq" || !dl.DeadLetter || dl.Publishing.Headers[HeaderErrorKind] != KindUnroutable || dl.Publishing.Headers[HeaderRoutingKey] != "o-1" ||
		m.Publishing.Headers[HeaderErrorKind] != nil {
		t.Fatalf("unroutable: %+v (original %v)", dl, m.Publishing.Headers)
	}
	b := testRecord("o-1", publisher.Header{Key: "error_kind", Value: []byte("schema_mismatch")})
	b.Topic, b.Key = "outbox.dlq", []byte("o-1")
	m, kind = f.Message(b)
	if kind != "" || !m.DeadLetter || m.Exchange != "" || m.RoutingKey != "outbox.dlq" || m.Publishing.Headers[HeaderErrorKind] != "schema_mismatch" ||
		m.Publishing.Headers[HeaderAggregateID] != "o-1" {
		t.Fatalf("builder's dead letter: %+v", m)
	}
}

// TestParseRoutingKey: the three placeholders, and an unknown one refused.
func TestParseRoutingKey(t *testing.T) {
	rk, err := ParseRoutingKey("a.{event_type}.{aggregate_type}-{aggregate_id}")
	if err != nil {
		t.Fatal(err)
	}
	if got := string(rk.Append(nil, []byte("E"), []byte("T"), []byte("I"))); got != "a.E.T-I" {
		t.Errorf("got %q", got)
	}
	for _, bad := range []string{"{topic}", "{event_type", "x.{Event_Type}"} {
		if _, err := ParseRoutingKey(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
