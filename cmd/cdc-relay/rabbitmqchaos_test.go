package main

// The relay on RabbitMQ under faults, through the built binary: kill -9,
// a broker restart and a memory alarm under load; a full queue that nacks;
// consumers of a consistent-hash topology killed mid-stream. What arrives
// is read by plain amqp091-go consumers, not by the relay's code.

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/cdc-relay/cdc-relay/internal/rabbittest"
)

// handled is what the consumers of one queue handled, in the order they
// handled it, duplicates included.
type handled struct {
	mu       sync.Mutex
	ids      []string
	distinct map[string]bool
}

func newHandled() *handled { return &handled{distinct: map[string]bool{}} }

// order returns the message ids in the order they were handled.
func (h *handled) order() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.ids...)
}

// count is how many messages were handled, duplicates included.
func (h *handled) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ids)
}

// missing counts the ids of evs not handled yet.
func (h *handled) missing(evs []committedEvent) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, e := range evs {
		if !h.distinct[strconv.FormatInt(e.ID, 10)] {
			n++
		}
	}
	return n
}

// consumeInto reads queue on a connection of its own, records each
// delivery in h and acks every ackEvery-th (with multiple), so that a kill
// leaves handled messages unacked for the next consumer. After kill it
// records nothing more, as a dead process would not, and its connection
// closes.
func consumeInto(t *testing.T, n *rabbittest.Node, queue string, h *handled, ackEvery int) (kill func()) {
	t.Helper()
	conn, err := amqp.Dial(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	ch, err := conn.Channel()
	if err != nil {
		conn.Close()
		t.Fatal(err)
	}
	if err := ch.Qos(2*ackEvery, 0, false); err != nil {
		conn.Close()
		t.Fatal(err)
	}
	msgs, err := ch.Consume(queue, "", false, false, false, false, nil)
	if err != nil {
		conn.Close()
		t.Fatal(err)
	}
	dead := false
	go func() {
		k := 0
		for d := range msgs {
			h.mu.Lock()
			if dead {
				h.mu.Unlock()
				continue
			}
			h.ids = append(h.ids, d.MessageId)
			h.distinct[d.MessageId] = true
			h.mu.Unlock()
			if k++; k%ackEvery == 0 {
				d.Ack(true)
			}
		}
	}()
	var once sync.Once
	kill = func() {
		once.Do(func() {
			h.mu.Lock()
			dead = true
			h.mu.Unlock()
			conn.Close()
		})
	}
	t.Cleanup(kill)
	return kill
}

// checkFirstOrder checks ids, in the order a queue's consumers handled
// them: each is a committed event, and each aggregate's events come in
// commit order by first occurrence (a duplicate may come later). It
// returns the aggregates seen and the number of duplicates.
func checkFirstOrder(t *testing.T, queue string, ids []string, byID map[string]committedEvent) (aggregates map[string]bool, dups int) {
	t.Helper()
	aggregates = map[string]bool{}
	seen := map[string]bool{}
	last := map[string]int{}
	for _, id := range ids {
		e, ok := byID[id]
		if !ok {
			t.Fatalf("%s: message_id %q is no committed event", queue, id)
		}
		if seen[id] {
			dups++
			continue
		}
		seen[id] = true
		if prev, ok := last[e.Aggregate]; ok && e.Seq <= prev {
			t.Fatalf("%s: aggregate %s: event %d (#%d of the aggregate) first arrived after #%d: out of commit order", queue, e.Aggregate, e.ID, e.Seq, prev)
		}
		last[e.Aggregate] = e.Seq
		aggregates[e.Aggregate] = true
	}
	return aggregates, dups
}

// committedByID indexes the load's committed events by message id.
func committedByID(evs []committedEvent) map[string]committedEvent {
	byID := make(map[string]committedEvent, len(evs))
	for _, e := range evs {
		byID[strconv.FormatInt(e.ID, 10)] = e
	}
	return byID
}

// rabbitPublished waits until r has had at least more events confirmed
// by RabbitMQ than it had when called (counted from 0 on a new process).
func rabbitPublished(r *relay, more float64) {
	r.t.Helper()
	v, err := r.metric("cdc_relay_events_published_total")
	if err != nil {
		v = 0
	}
	r.waitMetric("cdc_relay_events_published_total", 90*time.Second, func(got float64) bool { return got >= v+more })
}

// TestRabbitMQCrashes: under a steady load the relay is killed (SIGKILL)
// and started again 5 times; between the kills its node of the test's own
// is restarted once (rabbitmqctl stop, then started) and raises a memory
// alarm once: the relay stops on SIGTERM while blocked, the next one,
// unable to read its checkpoint up to an end marker, says so and is
// killed, and so does the one after it, until the alarm is cleared. Every committed event is in the queue at least once, each
// aggregate's events first arrive in commit order, and the slot is
// confirmed past them all.
func TestRabbitMQCrashes(t *testing.T) {
	t.Parallel()
	n := rabbittest.Own(t, rabbittest.Options{})
	f := newFixture(t, "")
	q := f.bindQueue(n.Channel(t), "#")
	args := f.rabbitArgs(n, "--shutdown-timeout", "5s")
	r := startRelay(t, args)
	r.waitStreaming(60 * time.Second)
	load := startBackgroundLoad(t, f, loadOptions{Writers: 2, MaxTxRows: 10, Pause: 40 * time.Millisecond, Seed: 39})

	var killedAt uint64 // WAL written when the last relay was killed
	for kill := 1; kill <= 5; kill++ {
		if killedAt != 0 {
			// The new relay caught up with what its predecessor had read.
			f.waitSlotPast(killedAt, 90*time.Second)
		}
		rabbitPublished(r, 30)
		switch kill {
		case 2:
			restartNode(t, n)
			rabbitPublished(r, 30)
		case 4:
			if err := n.MemoryAlarm(true); err != nil {
				t.Fatal(err)
			}
			r.waitMetric("cdc_relay_rabbitmq_blocked", 60*time.Second, func(v float64) bool { return v == 1 })
			before := len(load.Committed())
			waitFor(t, 60*time.Second, "the load to go on during the alarm", func() bool { return len(load.Committed()) >= before+50 })
			// SIGTERM during the alarm: the relay gives up waiting for the
			// confirms the broker holds back (--shutdown-timeout) and
			// exits; what was unconfirmed is read again.
			began := time.Now()
			if code := r.terminate(); code != 0 {
				t.Fatalf("exit %d after SIGTERM during the alarm:\n%s", code, tailString(r.Output(), 3000))
			}
			t.Logf("stopped during the alarm in %s", time.Since(began).Round(time.Millisecond))
			r = startRelay(t, args)
			waitAlarmReported(t, r)
		}
		if r.exited() {
			t.Fatalf("the relay exited (%d) before kill %d:\n%s", r.exitCode, kill, tailString(r.Output(), 3000))
		}
		killedAt = currentLSN(t, f.connect())
		r.kill()
		r = startRelay(t, args)
		if kill == 4 {
			waitAlarmReported(t, r)
			if err := n.MemoryAlarm(false); err != nil {
				t.Fatal(err)
			}
		}
		r.waitStreaming(60 * time.Second)
	}
	f.waitSlotPast(killedAt, 90*time.Second)
	rabbitPublished(r, 30)
	if err := load.Stop(); err != nil {
		t.Fatal(err)
	}
	end := currentLSN(t, f.connect())
	committed := load.Committed()

	got := newHandled()
	consumeInto(t, n, q, got, 100)
	waitFor(t, 120*time.Second, "every committed event in the queue", func() bool { return got.missing(committed) == 0 })
	_, dups := checkFirstOrder(t, q, got.order(), committedByID(committed))
	f.waitSlotPast(end, 60*time.Second)
	t.Logf("%d events committed, %d messages, %d duplicates", len(committed), got.count(), dups)
	if code := r.terminate(); code != 0 {
		t.Fatalf("exit %d after SIGTERM", code)
	}
}

// waitAlarmReported waits until r, started during a memory alarm, says
// that it cannot read its checkpoint up to an end marker because of it.
func waitAlarmReported(t *testing.T, r *relay) {
	t.Helper()
	waitFor(t, 60*time.Second, "the relay to report the alarm", func() bool {
		return strings.Contains(r.Output(), "the broker has blocked publishing (connection.blocked")
	})
}

// declareExchange declares the fixture's exchange as the relay does: a
// durable topic exchange.
func (f *fixture) declareExchange(ch *amqp.Channel) {
	f.t.Helper()
	if err := ch.ExchangeDeclare(f.exchange(), amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
		f.t.Fatal(err)
	}
}

// exited reports whether the relay process has ended.
func (r *relay) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// TestRabbitMQFullQueueNacks: the only queue bound to the exchange is a
// quorum queue of at most 20 messages that refuses more
// (x-overflow reject-publish). Once it is full, events are added until the
// relay is nacked: the refused ones are counted in
// cdc_relay_rabbitmq_nacks_total, re-sent with a growing backoff, never
// dead-lettered, and while the queue is full the slot is never confirmed
// past an event it refused. Once a consumer drains the queue, every event
// arrives and the slot moves past them.
func TestRabbitMQFullQueueNacks(t *testing.T) {
	t.Parallel()
	n := needRabbit(t)
	f := newFixture(t, "")
	ch := n.Channel(t)
	f.declareExchange(ch)
	const maxLength, maxTxs, perTx = 20, 40, 5
	q := f.exchange() + ".full"
	if _, err := ch.QueueDeclare(q, true, false, false, false, amqp.Table{
		"x-queue-type": "quorum", "x-max-length": int64(maxLength), "x-overflow": "reject-publish"}); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(q, "#", f.exchange(), false, nil); err != nil {
		t.Fatal(err)
	}
	r := startRelay(t, f.rabbitArgs(n))
	r.waitStreaming(60 * time.Second)

	// One transaction after another on one connection: their commit order
	// is the order of their ids, and txEnd[i] is at or past the end of
	// transaction i's commit.
	conn := f.connect()
	var ids []string
	var txEnd []uint64
	insert := func() {
		evs := make([]event, perTx)
		for j := range evs {
			agg := uuidFor((len(ids) + j) % 3)
			evs[j] = event{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, len(ids)+j)}
		}
		got, err := f.insertTx(context.Background(), conn, evs)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range got {
			ids = append(ids, strconv.FormatInt(id, 10))
		}
		txEnd = append(txEnd, currentLSN(t, conn))
	}
	queued := func() int {
		st, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		return st.Messages
	}
	for range maxLength / perTx {
		insert()
	}
	waitFor(t, 60*time.Second, "the queue full", func() bool { return queued() >= maxLength })
	// A quorum queue at its limit takes what comes until a message finds
	// it over the limit (RabbitMQ 3.10 took 40 more in a burst): add a
	// transaction per poll until the relay is nacked, then a few more.
	waitFor(t, 60*time.Second, "a nack", func() bool {
		if v, err := r.metric("cdc_relay_rabbitmq_nacks_total"); err == nil && v > 0 {
			return true
		}
		if len(ids) >= maxTxs*perTx {
			t.Fatalf("%d events published and not one nacked; the queue holds %d", len(ids), queued())
		}
		insert()
		return false
	})
	for range 4 {
		insert()
	}
	firstNack := time.Now()

	// While the queue is full: the k messages in it are at most the first
	// k events, so the event at index k at the latest was refused, and
	// the slot must stay before the end of its transaction. confirmed is
	// read before k, so that k covers what confirmed covers.
	const fullFor = 8 * time.Second
	var k int
	checks := 0
	waitFor(t, fullFor+30*time.Second, "the queue full for "+fullFor.String(), func() bool {
		confirmed := f.confirmedFlush()
		k = queued()
		if k >= len(ids) {
			t.Fatalf("the queue holds %d messages: it refused none", k)
		}
		if bound := txEnd[k/perTx]; confirmed >= bound {
			t.Fatalf("confirmed_flush_lsn %X while the queue holds %d messages: past the end (at most %X) of the transaction of event %s, which the queue refused",
				confirmed, k, bound, ids[k])
		}
		checks++
		return time.Since(firstNack) >= fullFor && checks >= 5
	})
	nacks, err := r.metric("cdc_relay_rabbitmq_nacks_total")
	if err != nil {
		t.Fatal(err)
	}
	// Each refused message is nacked again after 0.1, 0.2, 0.4 … 5 s: at
	// most 8 times in the first 11 s; re-sent at once, hundreds of times.
	refused := len(ids) - k
	if elapsed := time.Since(firstNack); nacks < float64(refused) || (elapsed < 11*time.Second && nacks > float64(8*refused)) {
		t.Fatalf("%v nacks for %d refused messages in %s: want between 1 and 8 each, re-sent with a backoff", nacks, refused, elapsed.Round(time.Millisecond))
	}
	t.Logf("%d of %d events in the queue, %v nacks in %s", k, len(ids), nacks, time.Since(firstNack).Round(time.Millisecond))

	got := newHandled()
	consumeInto(t, n, q, got, 1)
	waitFor(t, 90*time.Second, "every event once the queue drains", func() bool {
		got.mu.Lock()
		defer got.mu.Unlock()
		for _, id := range ids {
			if !got.distinct[id] {
				return false
			}
		}
		return true
	})
	f.waitSlotPast(txEnd[len(txEnd)-1], 60*time.Second)
	for _, m := range []string{"cdc_relay_dlq_events_total", "cdc_relay_rabbitmq_unroutable_total"} {
		if v, err := r.metric(m); err == nil && v != 0 {
			t.Fatalf("%s = %v: a refused message is backpressure, never a dead letter", m, v)
		}
	}
	if got.count() != len(ids) {
		t.Fatalf("%d messages for %d events: a refused message must arrive once", got.count(), len(ids))
	}
}

// TestRabbitMQShardsKeepOrder: the relay's exchange bound to an
// x-consistent-hash exchange hashing aggregate_id, four quorum queues with
// single active consumer, two consumers on each. Under a steady load the
// active consumer of each queue is killed twice (its connection closed,
// with handled messages unacked) and a new one joins. Every event
// arrives, each aggregate on one queue only, and on every queue each
// aggregate's events first arrive in commit order.
func TestRabbitMQShardsKeepOrder(t *testing.T) {
	t.Parallel()
	n := needRabbit(t)
	f := newFixture(t, "")
	ch := n.Channel(t)
	f.declareExchange(ch)
	const shards = 4
	queues := rabbittest.Shards(t, ch, f.exchange(), shards)
	logs := make([]*handled, shards)
	consumers := make([][]func(), shards) // per queue, oldest (the active one) first
	for i, q := range queues {
		logs[i] = newHandled()
		for range 2 {
			consumers[i] = append(consumers[i], consumeInto(t, n, q, logs[i], 5))
		}
	}
	r := startRelay(t, f.rabbitArgs(n))
	r.waitStreaming(60 * time.Second)
	load := startBackgroundLoad(t, f, loadOptions{Writers: 2, AggregatesPerWriter: 16, MaxTxRows: 10, Pause: 40 * time.Millisecond, Seed: 3})

	total := func() int {
		s := 0
		for _, h := range logs {
			s += h.count()
		}
		return s
	}
	for round := range 2 * shards {
		before := total()
		waitFor(t, 60*time.Second, "the consumers to handle more", func() bool { return total() >= before+150 })
		i := round % shards
		consumers[i][0]() // the active consumer dies; the waiting one takes over
		consumers[i] = append(consumers[i][1:], consumeInto(t, n, queues[i], logs[i], 5))
	}
	if err := load.Stop(); err != nil {
		t.Fatal(err)
	}
	committed := load.Committed()
	byID := committedByID(committed)
	waitFor(t, 120*time.Second, "every committed event on a queue", func() bool {
		missing := 0
		for _, e := range committed {
			id := strconv.FormatInt(e.ID, 10)
			found := false
			for _, h := range logs {
				h.mu.Lock()
				found = found || h.distinct[id]
				h.mu.Unlock()
			}
			if !found {
				missing++
			}
		}
		return missing == 0
	})
	onQueue := map[string]string{}
	used := 0
	for i, h := range logs {
		aggs, dups := checkFirstOrder(t, queues[i], h.order(), byID)
		if len(aggs) > 0 {
			used++
		}
		for agg := range aggs {
			if other, ok := onQueue[agg]; ok {
				t.Fatalf("aggregate %s arrived on %s and %s: an aggregate must stay on one queue", agg, other, queues[i])
			}
			onQueue[agg] = queues[i]
		}
		t.Logf("%s: %d aggregates, %d messages, %d duplicates", queues[i], len(aggs), h.count(), dups)
	}
	if used < 2 {
		t.Fatalf("%d aggregates all on %d queue: the hash spread nothing", len(onQueue), used)
	}
}
