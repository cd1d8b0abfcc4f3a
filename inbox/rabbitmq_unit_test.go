package inbox

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	amqp "github.com/rabbitmq/amqp091-go"
)

// TestParseInequivalent reads the 406 reasons RabbitMQ 3.10 gave here
// (see TestRabbitMQQueueArguments) for each way a value can be written.
func TestParseInequivalent(t *testing.T) {
	for _, tc := range []struct {
		reason string
		like   any
		name   string
		want   any
	}{
		{"PRECONDITION_FAILED - inequivalent arg 'x-delivery-limit' for queue 'q' in vhost '/': received '5' but current is '3'", int64(5), "x-delivery-limit", int64(3)},
		{"PRECONDITION_FAILED - inequivalent arg 'x-dead-letter-exchange' for queue 'q' in vhost '/': received 'other' but current is 'dlx'", "other", "x-dead-letter-exchange", "dlx"},
		{"PRECONDITION_FAILED - inequivalent arg 'x-dead-letter-exchange' for queue 'q' in vhost '/': received none but current is the value 'dlx' of type 'longstr'", nil, "x-dead-letter-exchange", "dlx"},
		{"PRECONDITION_FAILED - inequivalent arg 'x-max-length' for queue 'q' in vhost '/': received the value '10' of type 'long' but current is none", int64(10), "x-max-length", nil},
		{"PRECONDITION_FAILED - inequivalent arg 'x-delivery-limit' for queue 'q' in vhost '/': received the value '5' of type 'long' but current is the value '20' of type 'signedint'", int64(5), "x-delivery-limit", int64(20)},
		{"PRECONDITION_FAILED - inequivalent arg 'durable' for queue 'q' in vhost '/': received 'true' but current is 'false'", nil, "durable", false},
		{"PRECONDITION_FAILED - inequivalent arg 'x-single-active-consumer' for queue 'q' in vhost '/': received 'true' but current is 'false'", true, "x-single-active-consumer", false},
	} {
		name, got, ok := parseInequivalent(tc.reason, tc.like)
		if !ok || name != tc.name || got != tc.want {
			t.Errorf("%s:\ngot %q %#v %v, want %q %#v", tc.reason, name, got, ok, tc.name, tc.want)
		}
	}
	if _, _, ok := parseInequivalent("PRECONDITION_FAILED - something else", nil); ok {
		t.Error("an unknown reason parsed")
	}
}

func TestFormatTable(t *testing.T) {
	got := formatTable(amqp.Table{"x-overflow": nil, "durable": true, "x-delivery-limit": int64(5)})
	if want := "{durable: true, x-delivery-limit: 5, x-overflow: none}"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// noDB is a DB the unit tests never reach.
type noDB struct{}

func (noDB) BeginTx(context.Context, pgx.TxOptions) (pgx.Tx, error) {
	return nil, errors.New("no database in a unit test")
}

var _ DB = noDB{}

func validRabbit() RabbitMQConfig[orderEvent] {
	return RabbitMQConfig[orderEvent]{Consumer: "loyalty", URL: "amqp://guest:secret@localhost:5672/", DB: noDB{},
		Handler: func(context.Context, pgx.Tx, *Event[orderEvent]) error { return nil }}
}

func TestNewRabbitMQConfig(t *testing.T) {
	c, err := NewRabbitMQ(validRabbit())
	if err != nil {
		t.Fatal(err)
	}
	got := c.cfg
	if got.Queue != "loyalty" || got.Exchange != "outbox" || len(got.RoutingKeys) != 1 || got.RoutingKeys[0] != "#" ||
		got.DeliveryLimit != 5 || got.DeadLetterExchange != "loyalty.dlx" || got.DeadLetterQueue != "loyalty.dlq" ||
		got.Prefetch != 10 || got.HandlerTimeout != time.Minute || c.core.cfg.Workers != 4 || c.core.cfg.BatchSize != 1 || c.core.cfg.MaxAttempts != 1 {
		t.Errorf("defaults: %+v", got)
	}
	args := c.queueArgs()
	want := amqp.Table{"x-queue-type": "quorum", "x-delivery-limit": int64(5), "x-dead-letter-exchange": "loyalty.dlx",
		"x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish", "x-single-active-consumer": true}
	if formatTable(args) != formatTable(want) {
		t.Errorf("queue arguments %s, want %s", formatTable(args), formatTable(want))
	}

	for _, tc := range []struct {
		field string
		edit  func(*RabbitMQConfig[orderEvent])
	}{
		{"Consumer", func(c *RabbitMQConfig[orderEvent]) { c.Consumer = "" }},
		{"URL", func(c *RabbitMQConfig[orderEvent]) { c.URL = "" }},
		{"URL", func(c *RabbitMQConfig[orderEvent]) { c.URL = "http://localhost:5672" }},
		{"TLS", func(c *RabbitMQConfig[orderEvent]) { c.TLS = &tls.Config{} }},
		{"Handler", func(c *RabbitMQConfig[orderEvent]) { c.Handler = nil }},
		{"DB", func(c *RabbitMQConfig[orderEvent]) { c.DB = nil }},
		{"HandlerTimeout", func(c *RabbitMQConfig[orderEvent]) { c.HandlerTimeout = 26 * time.Minute }},
		{"TransientTimeout", func(c *RabbitMQConfig[orderEvent]) {
			c.HandlerTimeout, c.TransientTimeout = 20*time.Minute, 10*time.Minute
		}},
		{"BatchSize", func(c *RabbitMQConfig[orderEvent]) { c.BatchSize = 11 }},
		{"DeliveryLimit", func(c *RabbitMQConfig[orderEvent]) { c.DeliveryLimit = -1 }},
		{"TxOptions", func(c *RabbitMQConfig[orderEvent]) { c.TxOptions.AccessMode = pgx.ReadOnly }},
		{"Table", func(c *RabbitMQConfig[orderEvent]) { c.Table = "a.b.c" }},
	} {
		cfg := validRabbit()
		tc.edit(&cfg)
		_, err := NewRabbitMQ(cfg)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%s: got %v, want a ConfigError naming it", tc.field, err)
			continue
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: the password is in %q", tc.field, err)
		}
	}
	cfg := validRabbit()
	cfg.URL, cfg.TLS, cfg.HandlerTimeout = "amqps://localhost:5671/", &tls.Config{}, MaxHandlerTimeout
	cfg.TransientTimeout = time.Minute
	if _, err := NewRabbitMQ(cfg); err == nil {
		t.Error("HandlerTimeout at MaxHandlerTimeout with TransientTimeout: accepted, want the sum refused")
	}
	cfg.HandlerTimeout = 24 * time.Minute
	if _, err := NewRabbitMQ(cfg); err != nil {
		t.Errorf("amqps with TLS and a 24m timeout: %v", err)
	}
}

// TestRabbitMQDecode: the event a delivery gives the handler, for the
// shapes the relay publishes (properties and headers, JSON, structured
// and binary CloudEvents) and for those dead-lettered at once.
func TestRabbitMQDecode(t *testing.T) {
	c, err := NewRabbitMQ(validRabbit())
	if err != nil {
		t.Fatal(err)
	}
	relay := func() amqp.Delivery {
		p := relayMessage("id-1", "agg-1", 3)
		return amqp.Delivery{MessageId: p.MessageId, Type: p.Type, ContentType: p.ContentType, Headers: p.Headers, Body: p.Body,
			DeliveryTag: 7, RoutingKey: "OrderCreated"}
	}
	for _, tc := range []struct {
		name   string
		edit   func(d *amqp.Delivery)
		want   string // id/type/aggregate_type/aggregate_id/n
		reason string // the reason's start, when dead-lettered
	}{
		{"relay JSON", func(*amqp.Delivery) {}, "id-1/OrderCreated/Order/agg-1/3", ""},
		{"charset parameter", func(d *amqp.Delivery) { d.ContentType = "application/json; charset=utf-8" }, "id-1/OrderCreated/Order/agg-1/3", ""},
		{"no content type", func(d *amqp.Delivery) { d.ContentType = "" }, "id-1/OrderCreated/Order/agg-1/3", ""},
		{"id and type from headers", func(d *amqp.Delivery) { d.MessageId, d.Type = "", "" }, "id-1/OrderCreated/Order/agg-1/3", ""},
		{"binary CloudEvents", func(d *amqp.Delivery) {
			d.MessageId, d.Type = "", ""
			d.Headers = amqp.Table{"cloudEvents_id": "ce-9", "cloudEvents_type": "OrderShipped", "cloudEvents_subject": "agg-9", "aggregate_type": "Order"}
		}, "ce-9/OrderShipped/Order/agg-9/3", ""},
		{"structured CloudEvent", func(d *amqp.Delivery) {
			d.MessageId, d.Type, d.Headers, d.ContentType = "", "", nil, ContentTypeCloudEvents
			d.Body = []byte(`{"specversion":"1.0","id":"ce-2","type":"OrderCreated","subject":"agg-2","datacontenttype":"application/json","data":{"order_id":"agg-2","n":4}}`)
		}, "ce-2/OrderCreated//agg-2/4", ""},
		{"structured CloudEvent, base64 JSON", func(d *amqp.Delivery) {
			d.ContentType = ContentTypeCloudEvents
			d.Body = []byte(`{"specversion":"1.0","id":"ce-3","datacontenttype":"application/json","data_base64":"eyJuIjo1fQ=="}`)
		}, "id-1/OrderCreated/Order/agg-1/5", ""},
		{"no id", func(d *amqp.Delivery) { d.MessageId, d.Headers = "", nil }, "", ReasonNoID},
		{"the relay's placeholder id", func(d *amqp.Delivery) { d.MessageId, d.AppId, d.Headers = "seq-42", "cdc-relay", nil }, "", ReasonNoID},
		{"message_id without the id header", func(d *amqp.Delivery) { delete(d.Headers, "id") }, "id-1/OrderCreated/Order/agg-1/3", ""},
		{"bad JSON", func(d *amqp.Delivery) { d.Body = []byte(`{"n": 1} {}`) }, "", ReasonUndecodable},
		{"unknown content type", func(d *amqp.Delivery) { d.ContentType = "application/xml" }, "", ReasonUndecodable},
		{"Avro without a registry", func(d *amqp.Delivery) { d.ContentType = ContentTypeAvro }, "", ReasonUnknownSchema},
		{"bad CloudEvent", func(d *amqp.Delivery) { d.ContentType = ContentTypeCloudEvents }, "", ReasonUndecodable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := relay()
			tc.edit(&d)
			ev, reason := c.prepare(context.Background(), &d)
			if tc.reason != "" {
				if !strings.HasPrefix(reason, tc.reason) {
					t.Errorf("reason %q, want %s", reason, tc.reason)
				}
				return
			}
			if reason != "" {
				t.Fatalf("dead-lettered: %s", reason)
			}
			got := strings.Join([]string{ev.ID, ev.Type, ev.AggregateType, ev.AggregateID, itoa(ev.Value.N)}, "/")
			if got != tc.want || ev.Topic != "loyalty" || ev.Offset != 7 {
				t.Errorf("got %s (topic %s, offset %d), want %s", got, ev.Topic, ev.Offset, tc.want)
			}
		})
	}
	var m map[string]any
	if err := decodeJSON([]byte(`{"amount_cents": 12345678901234567}`), &m); err != nil || m["amount_cents"] != json.Number("12345678901234567") {
		t.Errorf("a number into a map: %#v, %v; want a json.Number", m["amount_cents"], err)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// acks records what a worker told the broker about each delivery.
type acks struct{ log []string }

func (a *acks) Ack(tag uint64, _ bool) error {
	a.log = append(a.log, fmt.Sprintf("ack %d", tag))
	return nil
}
func (a *acks) Nack(tag uint64, _ bool, _ bool) error {
	a.log = append(a.log, fmt.Sprintf("nack %d", tag))
	return nil
}
func (a *acks) Reject(tag uint64, requeue bool) error {
	a.log = append(a.log, fmt.Sprintf("reject %d %v", tag, requeue))
	return nil
}

var _ amqp.Acknowledger = (*acks)(nil)

// TestBurnToTheLimit: a delivery that failed its last attempt is rejected
// with requeue, without its handler, each time it comes back, until the
// reject that passes the queue's delivery limit (the broker dead-letters
// it); one that comes with more earlier deliveries than DeliveryLimit (a
// queue with a higher limit, or none) is rejected without requeue.
func TestBurnToTheLimit(t *testing.T) {
	cfg := validRabbit()
	cfg.DeliveryLimit = 2
	c, err := NewRabbitMQ(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a := &acks{}
	job := func(tag uint64, id string, count int64) rjob {
		d := amqp.Delivery{Acknowledger: a, DeliveryTag: tag, MessageId: id}
		if count > 0 {
			d.Headers = amqp.Table{"x-delivery-count": count}
		}
		return rjob{d: d, id: id, agg: "A"}
	}
	w := &rworker[orderEvent]{r: c, doomed: map[string]bool{}}
	w.giveUp(job(1, "p", 0), &Event[orderEvent]{ID: "p", Attempt: 3}, errors.New("poison"))
	w.work(context.Background(), []rjob{job(2, "p", 1)})
	if !w.doomed["p"] {
		t.Fatal("p was forgotten before its last reject")
	}
	w.work(context.Background(), []rjob{job(3, "p", 2)})
	if w.doomed["p"] {
		t.Error("p is still doomed after the reject that dead-letters it")
	}
	w.doomed["q"] = true
	w.work(context.Background(), []rjob{job(4, "q", 5)})
	if got := strings.Join(a.log, ", "); got != "reject 1 true, reject 2 true, reject 3 true, reject 4 false" {
		t.Errorf("broker told %q", got)
	}
	if st := c.Stats(); st.DeadLettered != 1 {
		t.Errorf("Stats %+v: want the give-up counted once", st)
	}
}

// TestMissingQueue: a 404 for a durable queue whose node is down or still
// starting (the reason RabbitMQ 3.10 gave here while a restarted node
// recovered its queues; see rabbitmq's TestAbsentWhileTheNodeStarts) is
// retried, not ErrQueueNotFound; any other 404 is a queue that does not
// exist.
func TestMissingQueue(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&amqp.Error{Code: amqp.NotFound, Reason: "NOT_FOUND - no queue 'orders' in vhost '/'"}, true},
		{fmt.Errorf("consume: %w", &amqp.Error{Code: amqp.NotFound, Reason: "NOT_FOUND - home node 'rabbit@h' of durable queue 'orders' in vhost '/' is down or inaccessible"}), false},
		{&amqp.Error{Code: amqp.AccessRefused, Reason: "ACCESS_REFUSED"}, false},
		{errors.New("NOT_FOUND"), false},
	} {
		if got := missing(tc.err); got != tc.want {
			t.Errorf("missing(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
