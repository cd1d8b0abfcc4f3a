package rabbittest

import (
	"context"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// TestNodeKeepsConfirmedMessagesAcrossRestart starts a private node,
// publishes persistent messages with confirms to a durable topic exchange
// bound to a quorum queue, restarts the node, and reads every message back.
func TestNodeKeepsConfirmedMessagesAcrossRestart(t *testing.T) {
	n := Own(t, Options{})
	if !strings.HasSuffix(n.Name(), "@localhost") || n.Port() >= 32768 {
		t.Fatalf("node %s on port %d: want a private name and a port below the ephemeral range", n.Name(), n.Port())
	}
	const count = 50
	conn, err := amqp.Dial(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeDeclare("events", "topic", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("orders", true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind("orders", "order.*", "events", false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var confirms []*amqp.DeferredConfirmation
	for i := range count {
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "events", "order.created", true, false, amqp.Publishing{
			DeliveryMode: amqp.Persistent, MessageId: "m" + string(rune('A'+i%26)) + time.Duration(i).String(), Body: []byte{byte(i)},
		})
		if err != nil {
			t.Fatal(err)
		}
		confirms = append(confirms, dc)
	}
	for i, dc := range confirms {
		ok, err := dc.WaitContext(ctx)
		if err != nil || !ok {
			t.Fatalf("message %d: acked %v, %v", i, ok, err)
		}
	}
	conn.Close()

	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	// A fresh bound for the read back: the restart alone took over a
	// minute on a loaded CI machine.
	ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err = amqp.Dial(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err = conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Qos(count, 0, false); err != nil {
		t.Fatal(err)
	}
	msgs, err := ch.ConsumeWithContext(ctx, "orders", "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range count {
		select {
		case m := <-msgs:
			if len(m.Body) != 1 || m.Body[0] != byte(i) || m.DeliveryMode != amqp.Persistent {
				t.Fatalf("message %d: body %v, delivery mode %d", i, m.Body, m.DeliveryMode)
			}
			m.Ack(false)
		case <-ctx.Done():
			t.Fatalf("%d of %d messages read back after the restart", i, count)
		}
	}
	out, err := n.Ctl("list_queues", "-q", "name", "messages")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "orders") {
		t.Fatalf("rabbitmqctl list_queues: %q", out)
	}
}
