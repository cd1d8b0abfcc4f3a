package inbox

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/cdc-relay/cdc-relay/internal/rabbittest"
	"github.com/cdc-relay/cdc-relay/internal/relaytest"
	"github.com/cdc-relay/cdc-relay/internal/testca"
	"github.com/cdc-relay/cdc-relay/internal/testtier"
)

// rabbitConfig is a consumer of exchange ex with fast retries, applying
// applyEffect in the database at url.
func rabbitConfig(t *testing.T, nodeURL, url, ex string) RabbitMQConfig[orderEvent] {
	consumer := "c_" + suffix()
	return RabbitMQConfig[orderEvent]{Consumer: consumer, URL: nodeURL, Exchange: ex, RoutingKeys: []string{"OrderCreated"},
		DB: newPool(t, url), Handler: applyEffect(consumer), RetryMin: 10 * time.Millisecond, RetryMax: 200 * time.Millisecond}
}

// rabbitSetup returns the package's RabbitMQ node and a database of the
// test's own with processed_messages and the effects table.
func rabbitSetup(t *testing.T) (*rabbittest.Node, string) {
	t.Helper()
	node := rabbit.Node(t)
	url := newDB(t)
	execSQL(t, url, effectsDDL)
	return node, url
}

// waitConsuming waits until queue exists and has a consumer.
func waitConsuming(t testing.TB, node *rabbittest.Node, queue string) {
	t.Helper()
	ch := node.Channel(t)
	waitFor(t, 60*time.Second, "a consumer on "+queue, func() bool {
		q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
		if err != nil { // a 404 closes the channel
			ch = node.Channel(t)
		}
		return err == nil && q.Consumers > 0
	})
}

// outOfOrder counts the pairs of one aggregate's effects applied in
// another order than their events were published in.
func outOfOrder(t testing.TB, url, consumer string) int64 {
	t.Helper()
	return mustInt(t, url, `SELECT count(*) FROM effects a JOIN effects b
		ON a.consumer = b.consumer AND a.aggregate_id = b.aggregate_id AND a.n < b.n AND a.seq > b.seq WHERE a.consumer = $1`, consumer)
}

// TestRabbitMQEndToEnd: relay-shaped messages from a plain amqp091-go
// publisher (JSON, and a structured CloudEvent) through a declared quorum
// queue into the handler: each applied once, in order per aggregate, the
// same message_id published twice applied once, every delivery acked.
func TestRabbitMQEndToEnd(t *testing.T) { rabbitEndToEnd(t, 1) }

// TestRabbitMQEndToEndBatch is TestRabbitMQEndToEnd with up to 10
// deliveries per transaction (BatchSize).
func TestRabbitMQEndToEndBatch(t *testing.T) { rabbitEndToEnd(t, 10) }

func rabbitEndToEnd(t *testing.T, batch int) {
	node, url := rabbitSetup(t)
	ex := "ex_" + suffix()
	cfg := rabbitConfig(t, node.URL(), url, ex)
	cfg.BatchSize = batch
	var mu sync.Mutex
	var seen *Event[orderEvent]
	apply := cfg.Handler
	cfg.Handler = func(ctx context.Context, tx pgx.Tx, ev *Event[orderEvent]) error {
		mu.Lock()
		if ev.ID == uuidN(0) {
			seen = ev
		}
		mu.Unlock()
		return apply(ctx, tx, ev)
	}
	c, _ := runRabbit(t, cfg)
	waitConsuming(t, node, cfg.Consumer)

	const aggs, per = 10, 20
	var msgs []amqp.Publishing
	for n := range per {
		for a := range aggs {
			msgs = append(msgs, relayMessage(uuidN(a*100+n), fmt.Sprintf("agg-%d", a), n))
		}
	}
	p := newPublisher(t, node.URL())
	p.publish(ex, msgs...)
	p.publish(ex, msgs[:20]...) // the same message_ids again: duplicates
	ce := amqp.Publishing{DeliveryMode: amqp.Persistent, Type: "OrderCreated", ContentType: "application/cloudevents+json; charset=utf-8",
		Body: []byte(`{"specversion":"1.0","id":"ce-1","source":"/cdc-relay","type":"OrderCreated","subject":"agg-ce",` +
			`"datacontenttype":"application/json","data":{"order_id":"agg-ce","n":7}}`)}
	p.publish(ex, ce)

	want := int64(aggs*per + 1)
	waitFor(t, 120*time.Second, "every event applied and every duplicate skipped", func() bool {
		n, err := queryInt(url, "SELECT count(*) FROM effects WHERE consumer = $1", cfg.Consumer)
		return err == nil && n == want && c.Stats().Duplicates == 20
	})
	if n := mustInt(t, url, "SELECT count(*) FROM (SELECT message_id FROM effects WHERE consumer = $1 GROUP BY message_id HAVING count(*) > 1) x", cfg.Consumer); n != 0 {
		t.Errorf("%d events applied more than once", n)
	}
	if n := mustInt(t, url, "SELECT count(*) FROM processed_messages WHERE consumer = $1", cfg.Consumer); n != want {
		t.Errorf("%d marks, want %d", n, want)
	}
	if n := outOfOrder(t, url, cfg.Consumer); n != 0 {
		t.Errorf("%d pairs of an aggregate's events applied out of order", n)
	}
	if n := mustInt(t, url, "SELECT count(*) FROM effects WHERE message_id = 'ce-1' AND aggregate_id = 'agg-ce' AND n = 7"); n != 1 {
		t.Errorf("the structured CloudEvent was applied %d times with its id, subject and data, want 1", n)
	}
	if got := c.Stats(); got.Processed != want || got.DeadLettered != 0 || (batch > 1) != (got.Batches > 0) {
		t.Errorf("Stats %+v: want %d processed, none dead-lettered, batches with BatchSize %d", got, want, batch)
	}
	waitFor(t, 30*time.Second, "the queue empty", func() bool { return queueDepth(t, node, cfg.Consumer) == 0 })
	mu.Lock()
	defer mu.Unlock()
	if seen == nil || seen.Type != "OrderCreated" || seen.AggregateType != "Order" || seen.AggregateID != "agg-0" ||
		string(seen.Key) != "agg-0" || seen.Headers["traceparent"] == "" || seen.Value.OrderID != "agg-0" {
		t.Errorf("the handler saw %+v", seen)
	}
}

// TestRabbitMQPoison: a handler that always fails on one event is tried
// DeliveryLimit+1 times in place, then given back until the broker
// dead-letters it at the delivery limit; an
// undecodable value is dead-lettered at once; a handler that runs past
// HandlerTimeout fails its attempt; an event that fails twice and then
// succeeds is applied before its aggregate's later events.
func TestRabbitMQPoison(t *testing.T) {
	node, url := rabbitSetup(t)
	ex := "ex_" + suffix()
	cfg := rabbitConfig(t, node.URL(), url, ex)
	cfg.DeliveryLimit, cfg.HandlerTimeout = 2, 300*time.Millisecond
	poison, flaky, hang := "poison-1", "flaky-1", "hang-1"
	var mu sync.Mutex
	calls := map[string]int{}
	attempts := map[string][]int{}
	apply := cfg.Handler
	cfg.Handler = func(ctx context.Context, tx pgx.Tx, ev *Event[orderEvent]) error {
		mu.Lock()
		calls[ev.ID]++
		n := calls[ev.ID]
		attempts[ev.ID] = append(attempts[ev.ID], ev.Attempt)
		mu.Unlock()
		switch {
		case ev.ID == poison:
			return errors.New("poison")
		case ev.ID == flaky && n <= 2:
			return fmt.Errorf("flaky, call %d", n)
		case ev.ID == hang:
			<-ctx.Done() // HandlerTimeout ends it
			return ctx.Err()
		}
		return apply(ctx, tx, ev)
	}
	c, _ := runRabbit(t, cfg)
	waitConsuming(t, node, cfg.Consumer)

	bad := relayMessage("bad-1", "agg-b", 0)
	bad.Body = []byte(`{"order_id": `)
	msgs := []amqp.Publishing{relayMessage("p-0", "agg-p", 0), relayMessage(poison, "agg-p", 1), relayMessage("f-0", "agg-f", 0),
		relayMessage(flaky, "agg-f", 1), bad, relayMessage("p-2", "agg-p", 2), relayMessage("f-2", "agg-f", 2), relayMessage("f-3", "agg-f", 3), relayMessage(hang, "agg-h", 0)}
	newPublisher(t, node.URL()).publish(ex, msgs...)

	letters := deadLetters(t, node, cfg.Consumer+".dlq", 3)
	reasons := map[string]string{}
	for _, d := range letters {
		reasons[d.MessageId], _ = d.Headers["x-first-death-reason"].(string)
	}
	if reasons[poison] != "delivery_limit" || reasons[hang] != "delivery_limit" || reasons["bad-1"] != "rejected" || len(letters) != 3 {
		t.Errorf("dead letters %v: want %s and %s for the delivery limit and bad-1 rejected", reasons, poison, hang)
	}
	waitFor(t, 60*time.Second, "the other events applied", func() bool {
		n, err := queryInt(url, "SELECT count(*) FROM effects WHERE consumer = $1", cfg.Consumer)
		return err == nil && n == 6
	})
	mu.Lock()
	if calls[poison] != cfg.DeliveryLimit+1 || calls[hang] != cfg.DeliveryLimit+1 || calls["bad-1"] != 0 || calls[flaky] != 3 {
		t.Errorf("handler calls %v: want %d for %s and %s (the delivery limit + 1), 0 for bad-1, 3 for %s", calls, cfg.DeliveryLimit+1, poison, hang, flaky)
	}
	for _, id := range []string{poison, flaky, hang} {
		if got := fmt.Sprint(attempts[id]); got != "[1 2 3]" {
			t.Errorf("%s's attempts %s, want [1 2 3]: retried in place, each counted", id, got)
		}
	}
	mu.Unlock()
	if n := outOfOrder(t, url, cfg.Consumer); n != 0 {
		t.Errorf("%d pairs of an aggregate's events applied out of order: the failed event's aggregate did not wait for it", n)
	}
	if got := c.Stats(); got.DeadLettered != 3 || got.Processed != 6 {
		t.Errorf("Stats %+v: want 3 dead-lettered, 6 processed", got)
	}
}

// runMismatch runs a consumer of cfg and returns the *QueueArgumentsError
// Run must end with.
func runMismatch(t *testing.T, cfg RabbitMQConfig[orderEvent]) *QueueArgumentsError {
	t.Helper()
	c, err := NewRabbitMQ(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = c.Run(ctx)
	var qe *QueueArgumentsError
	if !errors.As(err, &qe) {
		t.Fatalf("Run: %v, want a *QueueArgumentsError", err)
	}
	return qe
}

// TestRabbitMQQueueArguments: a queue declared earlier with other
// arguments makes Run fail with both sets named; Passive consumes it as
// it is; Passive on a missing queue is ErrQueueNotFound.
func TestRabbitMQQueueArguments(t *testing.T) {
	node, url := rabbitSetup(t)
	queue := "q_" + suffix()
	if _, err := node.Channel(t).QueueDeclare(queue, true, false, false, false, amqp.Table{
		"x-queue-type": "quorum", "x-delivery-limit": int32(3), "x-dead-letter-exchange": "elsewhere"}); err != nil {
		t.Fatal(err)
	}

	cfg := rabbitConfig(t, node.URL(), url, "ex_"+suffix())
	cfg.Queue = queue
	qe := runMismatch(t, cfg)
	msg := qe.Error()
	for _, want := range []string{
		"PRECONDITION_FAILED", "wanted {durable: true, x-dead-letter-exchange: " + queue + ".dlx, x-dead-letter-strategy: at-least-once, x-delivery-limit: 5, x-overflow: reject-publish, x-queue-type: quorum, x-single-active-consumer: true}",
		"x-delivery-limit: 3", "x-dead-letter-exchange: elsewhere", "x-overflow: none", "set Passive",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error does not say %q:\n%s", want, msg)
		}
	}
	if !qe.Complete {
		t.Errorf("not every difference learned: %s", msg)
	}

	cfg.Passive = true
	pc, _ := runRabbit(t, cfg)
	waitConsuming(t, node, queue)
	m := relayMessage(uuidN(1), "agg-1", 0)
	m.Type = queue // the default exchange routes by queue name
	newPublisher(t, node.URL()).publish("", m)
	waitFor(t, 60*time.Second, "the event applied from the existing queue", func() bool { return pc.Stats().Processed == 1 })

	cfg.Queue = "missing_" + suffix()
	mc, err := NewRabbitMQ(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := mc.Run(ctx); !errors.Is(err, ErrQueueNotFound) {
		t.Errorf("Run on a missing queue with Passive: %v, want ErrQueueNotFound", err)
	}
}

// TestRabbitMQChaos runs two consumer processes on one queue (single
// active consumer: one applies, the other waits) while a publisher sends
// events of 6 aggregates, some twice, kills a consumer with -9 five times,
// starting it again each time, and restarts the broker once; the consumers
// fail the first attempt of one event in ten and retry it. Each kill hits
// the consumer that just logged such a failure, while the failed event
// and later ones of its aggregate are held: with few aggregates that is
// the moment a consumer that gave the failed delivery back to the broker
// reordered a pair (docs/KIT.md). Afterwards every published event was
// applied exactly once, each aggregate's events in the order published,
// nothing was dead-lettered, and the duplicates that reached the consumers
// were skipped.
func TestRabbitMQChaos(t *testing.T) {
	node, url := rabbitSetup(t)
	s := suffix()
	ex, queue, consumer := "ex_"+s, "q_"+s, "chaos_"+s
	children := startChildren(t, node, url, consumer, ex, queue)

	// The publisher: chunks of 10 events every 20 ms until stopped; every
	// fifth chunk sends the one before again (duplicates).
	const aggs = 6
	stop := make(chan struct{})
	type result struct {
		total int
		err   error
	}
	published := make(chan result, 1)
	p := newPublisher(t, node.URL())
	go func() {
		events := newEventSource(s, aggs)
		var prev []amqp.Publishing
		for chunk := 0; ; chunk++ {
			select {
			case <-stop:
				published <- result{total: events.total}
				return
			case <-time.After(20 * time.Millisecond):
			}
			msgs := events.chunk(10)
			// A chunk not wholly confirmed (the broker restarts) is sent
			// again, whole, on a new connection: earlier events of it come
			// twice, never after later ones.
			deadline := time.Now().Add(120 * time.Second)
			for {
				err := p.send(ex, msgs...)
				if err == nil && chunk%5 == 4 {
					err = p.send(ex, prev...)
				}
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					published <- result{total: events.total, err: err}
					return
				}
				select {
				case <-stop:
				case <-time.After(100 * time.Millisecond):
				}
				p.dial()
			}
			prev = msgs
		}
	}()
	applied := func() int64 { return appliedCount(url, consumer) }
	var killed []*proc
	lost := func() (n int) {
		for _, p := range append(children, killed...) {
			n += strings.Count(p.Output(), "connection lost; reconnecting")
		}
		return n
	}
	for k := range 5 {
		if k == 2 {
			// The broker goes down under the consumers and comes back.
			before := lost()
			if err := node.Stop(); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 60*time.Second, "both consumers losing the broker", func() bool { return lost() >= before+2 })
			if err := node.Start(); err != nil {
				t.Fatal(err)
			}
			t.Logf("the broker restarted at %d events applied", applied())
		}
		at := applied() + 150
		waitFor(t, 120*time.Second, fmt.Sprintf("%d events applied", at), func() bool { return applied() >= at })
		i := stopAfterFailure(t, children, false)
		killed = append(killed, children[i])
		t.Logf("%s killed after a failed attempt at %d events applied", childNames[i], applied())
		children[i] = startChild(t, childNames[i], consumer, node.URL(), url, ex, queue)
	}
	close(stop)
	var total int
	select {
	case res := <-published:
		if res.err != nil {
			t.Fatal(res.err)
		}
		total = res.total
	case <-time.After(60 * time.Second):
		t.Fatal("the publisher did not stop")
	}
	checkExactlyOnce(t, node, url, consumer, queue, total)
	dups, failed := 0, 0
	for _, p := range append(children, killed...) {
		dups += len(p.Lines("duplicate "))
		failed += failedAttempts(p)
	}
	t.Logf("%d events published, %d duplicates skipped by the consumers, %d failed attempts retried", total, dups, failed)
	if dups == 0 {
		t.Error("no duplicate reached a consumer; the dedupe path was not exercised")
	}
}

// TestRabbitMQTLS: over amqps, with the CA that signed the node's
// certificate in TLS.RootCAs, events are consumed and applied; with
// another CA the consumer never connects, and says why.
func TestRabbitMQTLS(t *testing.T) {
	t.Parallel()
	testtier.Need(t)
	url := newDB(t)
	execSQL(t, url, effectsDDL)
	ca := testca.New(t)
	files := rabbittest.TLSFilesOf(t, ca)
	node := rabbittest.Own(t, rabbittest.Options{TLS: files})

	ex := "ex_" + suffix()
	cfg := rabbitConfig(t, node.AMQPSURL(), url, ex)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.PEM)
	cfg.TLS = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	c, _ := runRabbit(t, cfg)
	waitConsuming(t, node, cfg.Consumer)
	var msgs []amqp.Publishing
	for i := range 10 {
		msgs = append(msgs, relayMessage(uuidN(i), "agg-tls", i))
	}
	newPublisher(t, node.URL()).publish(ex, msgs...)
	waitFor(t, 60*time.Second, "10 events applied over amqps", func() bool { return c.Stats().Processed == 10 })

	other := testca.New(t)
	wrong := x509.NewCertPool()
	wrong.AppendCertsFromPEM(other.PEM)
	logs := &relaytest.LogBuffer{}
	bad := rabbitConfig(t, node.AMQPSURL(), url, ex)
	bad.TLS = &tls.Config{RootCAs: wrong, MinVersion: tls.VersionTLS12}
	bad.Logger = slog.New(slog.NewTextHandler(logs, nil))
	runRabbit(t, bad)
	waitFor(t, 60*time.Second, "the untrusted certificate reported", func() bool {
		return strings.Contains(logs.String(), "connection lost; reconnecting") && strings.Contains(logs.String(), "certificate")
	})
	if strings.Contains(logs.String(), "guest:guest") {
		t.Error("the password reached the log")
	}
}

// TestRabbitMQAvro: an application/avro value in the Confluent wire
// format is decoded with its writer schema from the registry into the
// handler's map; a value whose schema id the registry lacks is
// dead-lettered at once.
func TestRabbitMQAvro(t *testing.T) {
	node := rabbit.Node(t)
	url := newDB(t)
	ex := "ex_" + suffix()
	s := registerSchema(t, ex+"-OrderCreated", "OrderCreated")
	consumer := "c_" + suffix()
	var mu sync.Mutex
	var got []*Event[map[string]any]
	c, _ := runRabbit(t, RabbitMQConfig[map[string]any]{Consumer: consumer, URL: node.URL(), Exchange: ex, RegistryURL: registry.URL(),
		DB: newPool(t, url), RetryMin: 10 * time.Millisecond, RetryMax: 200 * time.Millisecond,
		Handler: func(_ context.Context, _ pgx.Tx, ev *Event[map[string]any]) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, ev)
			return nil
		}})
	waitConsuming(t, node, consumer)
	m := relayMessage(uuidN(1), uuidN(100), 0)
	m.ContentType, m.Body = ContentTypeAvro, avroValue(t, s, orderCreated(uuidN(100), "c-1", 1999))
	unknown := relayMessage(uuidN(2), uuidN(100), 1)
	unknown.ContentType, unknown.Body = ContentTypeAvro, []byte{0, 0x7f, 0xff, 0xff, 0xf0, 2}
	newPublisher(t, node.URL()).publish(ex, m, unknown)

	waitFor(t, 60*time.Second, "the Avro event applied and the unknown schema dead-lettered", func() bool {
		st := c.Stats()
		return st.Processed == 1 && st.DeadLettered == 1
	})
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0].SchemaID != s.ID() || got[0].Value["amount_cents"] != int64(1999) || got[0].Value["order_id"] != uuidN(100) {
		t.Errorf("the handler saw %+v", got)
	}
	letters := deadLetters(t, node, consumer+".dlq", 1)
	if letters[0].MessageId != uuidN(2) {
		t.Errorf("dead letter %s, want %s", letters[0].MessageId, uuidN(2))
	}
}

// TestRabbitMQComposeQueue: the queue deploy/rabbitmq/definitions.json
// declares (docker compose's rabbitmq profile) has no single active
// consumer, so the consumer's own declare of it fails naming that
// argument; with Passive the consumer takes the queue as it is and
// applies what the exchange routes to it.
func TestRabbitMQComposeQueue(t *testing.T) {
	t.Parallel()
	testtier.Need(t)
	url := newDB(t)
	execSQL(t, url, effectsDDL)
	node := rabbittest.Own(t, rabbittest.Options{})
	if msg, err := node.Ctl("import_definitions", filepath.Join(root, "deploy", "rabbitmq", "definitions.json")); err != nil {
		t.Fatalf("rabbitmqctl import_definitions: %v\n%s", err, msg)
	}
	cfg := rabbitConfig(t, node.URL(), url, "outbox")
	cfg.Queue, cfg.DeadLetterExchange, cfg.DeadLetterQueue = "orders", "outbox.dlx", "orders.dlq"
	qe := runMismatch(t, cfg)
	if v, ok := qe.Existing["x-single-active-consumer"]; qe.Queue != "orders" || !qe.Complete || len(qe.Existing) != 1 || !ok || v != nil {
		t.Errorf("%v: want only x-single-active-consumer of queue orders named, which it lacks", qe)
	}

	cfg.Passive = true
	pc, _ := runRabbit(t, cfg)
	waitConsuming(t, node, "orders")
	newPublisher(t, node.URL()).publish("outbox", relayMessage(uuidN(1), "agg-1", 0), relayMessage(uuidN(2), "agg-1", 1))
	waitFor(t, 60*time.Second, "both events applied from the compose queue", func() bool { return pc.Stats().Processed == 2 })
}
