package main

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// TestComposeRabbitMQDefinitions: deploy/rabbitmq/definitions.json, which
// docker compose's rabbitmq profile loads at boot, imports into a real
// node (in a vhost of its own), the relay accepts its exchange as it is
// (a durable topic exchange: a declare that differed would be exit 2), an
// OrderCreated event lands in its queue `orders` with the app/app user of
// the compose file, and an event type no binding names becomes an
// unroutable dead letter instead of being dropped.
func TestComposeRabbitMQDefinitions(t *testing.T) {
	t.Parallel()
	n := needRabbit(t)
	f := newFixture(t, "")
	raw, err := os.ReadFile("../../deploy/rabbitmq/definitions.json")
	if err != nil {
		t.Fatal(err)
	}
	var defs map[string]any
	if err := json.Unmarshal(raw, &defs); err != nil {
		t.Fatalf("definitions.json: %v", err)
	}
	// The compose node has only "/": here every vhost reference moves to
	// the test's own vhost, so that `outbox` and `orders` meet no other
	// test's.
	vhost := "compose_" + f.name
	defs["vhosts"] = []any{map[string]any{"name": vhost}}
	for _, key := range []string{"permissions", "exchanges", "queues", "bindings"} {
		list, _ := defs[key].([]any)
		if len(list) == 0 {
			t.Fatalf("definitions.json has no %s", key)
		}
		for _, item := range list {
			m := item.(map[string]any)
			if m["vhost"] != "/" {
				t.Fatalf("definitions.json: %s entry %v is not in vhost /", key, m)
			}
			m["vhost"] = vhost
		}
	}
	out, err := json.Marshal(defs)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "definitions.json")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	if msg, err := n.Ctl("import_definitions", path); err != nil {
		t.Fatalf("rabbitmqctl import_definitions: %v\n%s", err, msg)
	}

	// The compose relay's URL, on this node and vhost.
	u, err := url.Parse(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword("app", "app")
	u.Path = "/" + vhost
	appURL := u.String()

	conn, err := amqp.Dial(appURL)
	if err != nil {
		t.Fatalf("the compose user app/app: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := ch.Consume("orders", "", false, false, false, false, nil)
	if err != nil {
		t.Fatalf("consume the compose queue orders: %v", err)
	}

	args := f.rabbitArgs(n)
	setFlag(args, "--rabbitmq-url", appURL)
	setFlag(args, "--rabbitmq-exchange", "outbox")
	r := startRelay(t, args)
	r.waitStreaming(60 * time.Second)
	agg := uuidFor(970)
	ids, err := f.insertTx(context.Background(), f.connect(), []event{
		{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, 1)},
		{AggregateType: "Order", AggregateID: agg, EventType: "OrderShipped", Payload: orderCreated(agg, 2)},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := idStrings(ids)
	select {
	case d := <-msgs:
		if d.Type != "OrderCreated" || d.RoutingKey != "OrderCreated" || d.MessageId != want[0] {
			t.Fatalf("orders got type %q, routing key %q, message_id %q; want OrderCreated, OrderCreated, %s", d.Type, d.RoutingKey, d.MessageId, want[0])
		}
		d.Ack(false)
	case <-time.After(60 * time.Second):
		t.Fatal("no message in the compose queue orders within 60 s")
	}
	// OrderShipped has no binding: a dead letter in the relay's stream.
	dch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := dch.Qos(10, 0, false); err != nil {
		t.Fatal(err)
	}
	dlq := "x" + f.name + ".dlq" // rabbitArgs' --rabbitmq-dlq-stream
	letters, err := dch.Consume(dlq, "", false, false, false, false, amqp.Table{"x-stream-offset": "first"})
	if err != nil {
		t.Fatalf("read the dead-letter stream %s: %v", dlq, err)
	}
	select {
	case d := <-letters:
		if d.MessageId != want[1] || d.Headers["error_kind"] != "unroutable" {
			t.Fatalf("dead letter message_id %q, error_kind %v; want %s, unroutable", d.MessageId, d.Headers["error_kind"], want[1])
		}
	case <-time.After(60 * time.Second):
		t.Fatal("no dead letter for the unbound OrderShipped within 60 s")
	}
	if code := r.terminate(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}
