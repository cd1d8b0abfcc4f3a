package main

// The RabbitMQ tools that run until stopped (dlq redrive --follow, tail)
// ride through a broker restart: each test restarts a node of its own
// (rabbittest.Own) under the running binary, and what arrived is read by
// a plain amqp091-go consumer, or from tail's own lines.

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/cdc-relay/cdc-relay/internal/rabbittest"
)

// restartNode stops n cleanly and starts it again on the same ports and
// data.
func restartNode(t *testing.T, n *rabbittest.Node) {
	t.Helper()
	began := time.Now()
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("broker restarted in %s", time.Since(began).Round(time.Millisecond))
}

// waitStreamReady waits until a consumer can attach to stream: a node
// just started may still be starting its streams.
func waitStreamReady(t *testing.T, n *rabbittest.Node, stream string) {
	t.Helper()
	waitFor(t, 60*time.Second, "stream "+stream+" ready after the restart", func() bool {
		conn, err := amqp.Dial(n.URL())
		if err != nil {
			return false
		}
		defer conn.Close()
		ch, err := conn.Channel()
		if err == nil {
			err = ch.Qos(1, 0, false)
		}
		if err == nil {
			_, err = ch.Consume(stream, "", false, false, false, false, amqp.Table{"x-stream-offset": "first"})
		}
		return err == nil
	})
}

// declareStream declares a durable stream named name on ch.
func declareStream(t *testing.T, ch *amqp.Channel, name string) {
	t.Helper()
	if _, err := ch.QueueDeclare(name, true, false, false, false, amqp.Table{"x-queue-type": "stream"}); err != nil {
		t.Fatal(err)
	}
}

// countID is how many deliveries of got have message id id.
func countID(got []amqp.Delivery, id string) int { return len(withMessageID(got, id)) }

// TestRabbitMQDLQRedriveFollowRestart: dlq redrive --follow redrives a
// letter, the node restarts under it, and it logs the lost connection,
// reconnects and redrives a letter dead-lettered after the restart, in
// the same process; the first is not sent twice. An independent reader of
// a stream bound to the exchange counts them; SIGTERM then ends the
// redrive with exit 0 and its summary.
func TestRabbitMQDLQRedriveFollowRestart(t *testing.T) {
	t.Parallel()
	n := rabbittest.Own(t, rabbittest.Options{})
	f := newFixture(t, "")
	seen := f.exchange() + ".seen"
	ch := n.Channel(t)
	f.declareExchange(ch)
	declareStream(t, ch, seen)
	if err := ch.QueueBind(seen, "#", f.exchange(), false, nil); err != nil {
		t.Fatal(err)
	}
	// An aggregate id this long makes the relay's routing key invalid: a
	// dead letter that redrive sends with a --routing-key that fits.
	r := startRelay(t, f.rabbitArgs(n, "--routing-key", "{aggregate_type}.{aggregate_id}"))
	r.waitStreaming(60 * time.Second)
	conn, long := f.connect(), strings.Repeat("l", 300)
	deadLetter := func() string {
		t.Helper()
		ids, err := f.insertTx(context.Background(), conn, []event{{AggregateType: "Order", AggregateID: long, EventType: "OrderCreated", Payload: `{"n": 1}`}})
		if err != nil {
			t.Fatal(err)
		}
		return strconv.FormatInt(ids[0], 10)
	}
	first := deadLetter()
	rd := startRelay(t, f.toolArgs(n, []string{"dlq", "redrive"}, "--routing-key", "{aggregate_type}.{event_type}", "--follow"))
	redriven := func(id string) int { return len(lines(rd.Output(), "redriven id="+id+" offset=")) }
	waitFor(t, 90*time.Second, "the first letter redriven", func() bool { return redriven(first) == 1 })
	before := collect(t, n, seen, true)
	waitFor(t, 30*time.Second, "the first letter in the bound stream", func() bool { return countID(before(), first) == 1 })

	restartNode(t, n)
	waitFor(t, 60*time.Second, "redrive reconnected", func() bool {
		out := rd.Output()
		return strings.Contains(out, "lost the connection to RabbitMQ") && strings.Contains(out, "connected to RabbitMQ again")
	})
	if warn := linesWith(rd.Output(), "lost the connection to RabbitMQ"); !strings.Contains(warn, "level=WARN") || !strings.Contains(warn, "err=") {
		t.Errorf("the lost connection is not a WARN naming the error: %s", warn)
	}
	waitStreamReady(t, n, seen) // else redrive's publish of the second letter is nacked
	second := deadLetter()
	after := collect(t, n, seen, true)
	waitFor(t, 120*time.Second, "the letter dead-lettered after the restart in the bound stream", func() bool { return countID(after(), second) == 1 })
	// The stream keeps publishing order: a second copy of the first letter
	// would be ahead of the second letter.
	if got := countID(after(), first); got != 1 {
		t.Errorf("the first letter is in the bound stream %d times, want once", got)
	}
	if rd.exited() {
		t.Fatalf("redrive --follow ended across the restart: %s", tailString(rd.Output(), 3000))
	}
	if code := rd.terminate(); code != 0 {
		t.Errorf("redrive --follow exited %d after SIGTERM, want 0", code)
	}
	out := rd.Output()
	if redriven(first) != 1 || redriven(second) != 1 || !strings.Contains(out, "redrive: redriven 2, still failing 0, skipped 0") {
		t.Errorf("each letter not redriven once, or the summary missing: %s", tailString(out, 3000))
	}
	if code := r.terminate(); code != 0 {
		t.Fatalf("run exited %d", code)
	}
}

// TestRabbitMQTailFollowRestart: tail following a stream, and tail
// following an exchange, each print a message published before a node
// restart and one published after it, in the same process; the stream's
// tail prints the first once (it reads on after the last offset printed),
// and the exchange's says that what was published while it was
// disconnected is not shown.
func TestRabbitMQTailFollowRestart(t *testing.T) {
	t.Parallel()
	n := rabbittest.Own(t, rabbittest.Options{})
	suffix := randSuffix()
	stream, exchange := "tail.stream."+suffix, "tail.x."+suffix
	setup := n.Channel(t)
	declareStream(t, setup, stream)
	if err := setup.ExchangeDeclare(exchange, amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	ts := startBin(t, "tail", "--rabbitmq-url", n.URL(), "--from-beginning", "--follow", stream)
	tx := startBin(t, "tail", "--rabbitmq-url", n.URL(), "--rabbitmq-exchange", exchange)
	stderrHas := func(p *bgBin, sub string) int { _, e := p.output(); return strings.Count(e, sub) }
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range []*bgBin{ts, tx} {
				o, e := p.output()
				t.Logf("%v printed:\n%s\nand logged:\n%s", p.cmd.Args[1:], o, e)
			}
			t.Logf("node log:\n%s", n.LogTail(60))
		}
	})
	waitFor(t, 30*time.Second, "tail following the exchange", func() bool { return stderrHas(tx, "msg=following") == 1 })
	publish := func(id string) {
		t.Helper()
		ch := n.Channel(t)
		if err := ch.Confirm(false); err != nil {
			t.Fatal(err)
		}
		for _, to := range [][2]string{{"", stream}, {exchange, "Order.Created"}} {
			dc, err := ch.PublishWithDeferredConfirm(to[0], to[1], false, false, amqp.Publishing{MessageId: id, Type: "OrderCreated", ContentType: "application/json", Body: []byte(`{"id":"` + id + `"}`)})
			if err != nil {
				t.Fatal(err)
			}
			if !dc.Wait() {
				t.Fatalf("the broker nacked %s to %q", id, to)
			}
		}
	}
	ids := func(p *bgBin) []string {
		out, _ := p.output()
		var got []string
		for _, l := range rabbitLines(t, out) {
			got = append(got, l["message_id"].(string))
		}
		return got
	}
	publish("before")
	waitFor(t, 30*time.Second, "both tails print the message before the restart", func() bool { return len(ids(ts)) == 1 && len(ids(tx)) == 1 })

	restartNode(t, n)
	waitFor(t, 60*time.Second, "both tails reconnected", func() bool {
		// A tail that reconnects while the node is still starting is
		// refused (404: the stream's node is "down or inaccessible") and
		// reconnects again.
		return stderrHas(ts, "connected to RabbitMQ again") >= 1 && stderrHas(tx, "msg=following") >= 2
	})
	waitStreamReady(t, n, stream)
	publish("after")
	waitFor(t, 60*time.Second, "both tails print the message after the restart", func() bool { return len(ids(ts)) >= 2 && len(ids(tx)) >= 2 })
	for _, p := range []*bgBin{ts, tx} {
		if got := strings.Join(ids(p), ","); got != "before,after" {
			t.Errorf("%v printed %s, want before,after", p.cmd.Args[1:], got)
		}
		select {
		case <-p.done:
			t.Errorf("%v ended across the restart", p.cmd.Args[1:])
		default:
		}
	}
	if offsets := rabbitLines(t, func() string { o, _ := ts.output(); return o }()); offsets[0]["offset"] != 0.0 || offsets[1]["offset"] != 1.0 {
		t.Errorf("the stream's offsets are %v and %v, want 0 and 1", offsets[0]["offset"], offsets[1]["offset"])
	}
	_, e := ts.output()
	if warn := linesWith(e, "lost the connection to RabbitMQ"); !strings.Contains(warn, "level=WARN") || !strings.Contains(warn, "after the last offset printed") || !strings.Contains(warn, "err=") {
		t.Errorf("the stream's tail did not WARN naming the error: %s", e)
	}
	_, e = tx.output()
	if warn := linesWith(e, "lost the connection to RabbitMQ"); !strings.Contains(warn, "level=WARN") || !strings.Contains(warn, "not shown") {
		t.Errorf("the exchange's tail did not WARN that what was published while it was disconnected is not shown: %s", e)
	}
}
