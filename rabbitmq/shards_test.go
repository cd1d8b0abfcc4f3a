package rabbitmq

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/cdc-relay/cdc-relay/internal/rabbittest"
)

// TestConsistentHashKeepsOrderPerAggregate is the topology the docs give
// for several consumers: the topic exchange bound to an x-consistent-hash
// exchange hashing the aggregate_id header, four quorum queues with single
// active consumer, two consumers on each. The active consumer of every
// shard is killed once, mid-stream, and a new one joins. Every aggregate's
// events still arrive in order (first arrivals; redeliveries are deduped
// by message id), each aggregate on one shard only.
func TestConsistentHashKeepsOrderPerAggregate(t *testing.T) {
	sfx := fresh()
	n := startNode(t)
	ch := channel(t, n)
	ex := "outbox" + sfx
	if err := ch.ExchangeDeclare(ex, "topic", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	const nShards, aggregates, perAggregate = 4, 40, 100
	queues := rabbittest.Shards(t, ch, ex, nShards)

	// What the consumers saw: first arrivals per aggregate, and which
	// shards each aggregate came from.
	var mu sync.Mutex
	seen := map[string]bool{}
	last := map[string]int{}
	onShard := map[string]map[int]bool{}
	var disorder []string
	// handle records a delivery and reports whether to ack it: a consumer
	// marked dead neither records nor acks (a dead process acks nothing,
	// and the broker delivers the message again to the next consumer).
	handle := func(shard int, dead *bool, d amqp.Delivery) bool {
		mu.Lock()
		defer mu.Unlock()
		if *dead {
			return false
		}
		if seen[d.MessageId] {
			return true
		}
		seen[d.MessageId] = true
		agg, _ := d.Headers["aggregate_id"].(string)
		seq, _ := strconv.Atoi(string(d.Body))
		if seq != last[agg]+1 {
			disorder = append(disorder, fmt.Sprintf("%s: %d after %d", agg, seq, last[agg]))
		}
		last[agg] = seq
		if onShard[agg] == nil {
			onShard[agg] = map[int]bool{}
		}
		onShard[agg][shard] = true
		return true
	}
	total := func() int { mu.Lock(); defer mu.Unlock(); return len(seen) }

	// consumer reads a shard's queue on a connection of its own until kill:
	// from then on it handles nothing, as a dead process would not.
	consumer := func(shard int) (kill func()) {
		c, err := amqp.Dial(n.URL())
		if err != nil {
			t.Fatal(err)
		}
		cch, err := c.Channel()
		if err != nil {
			t.Fatal(err)
		}
		if err := cch.Qos(10, 0, false); err != nil {
			t.Fatal(err)
		}
		msgs, err := cch.Consume(queues[shard], "", false, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		dead := false
		go func() {
			for d := range msgs {
				if handle(shard, &dead, d) {
					d.Ack(false)
				}
			}
		}()
		return func() {
			mu.Lock()
			dead = true
			mu.Unlock()
			c.Close()
		}
	}
	first := make([]func(), nShards)
	for i := range nShards {
		first[i] = consumer(i) // active
		defer consumer(i)()    // waiting
	}

	p := New(Config{URL: n.URL(), Exchange: ex, Declare: true})
	run(t, p)
	published := 0
	publish := func(upTo int) {
		for seq := published/aggregates + 1; seq <= upTo; seq++ {
			for a := range aggregates {
				agg := "agg-" + strconv.Itoa(a)
				m := &Message{Seq: uint64(published + 1), Exchange: ex, RoutingKey: "Order.OrderCreated", Publishing: amqp.Publishing{
					DeliveryMode: amqp.Persistent, MessageId: agg + "-" + strconv.Itoa(seq),
					Headers: amqp.Table{"aggregate_id": agg}, Body: []byte(strconv.Itoa(seq))}}
				if err := p.Publish(context.Background(), m); err != nil {
					t.Fatal(err)
				}
				published++
			}
		}
	}
	publish(perAggregate / 2)
	waitFor(t, "a quarter read", time.Minute, func() bool { return total() >= aggregates*perAggregate/4 })
	for i := range nShards {
		first[i]()          // the active consumer dies; the waiting one takes over
		defer consumer(i)() // and a new one waits
	}
	publish(perAggregate)
	waitFor(t, "every event read", 2*time.Minute, func() bool { return total() == aggregates*perAggregate })
	mu.Lock()
	defer mu.Unlock()
	if len(disorder) > 0 {
		t.Fatalf("%d events out of order per aggregate, e.g. %v", len(disorder), disorder[:min(5, len(disorder))])
	}
	used := map[int]bool{}
	for agg, s := range onShard {
		if len(s) != 1 {
			t.Fatalf("%s arrived from shards %v: an aggregate must stay on one", agg, s)
		}
		for k := range s {
			used[k] = true
		}
	}
	if len(used) < 2 {
		t.Fatalf("%d aggregates all on shards %v: the hash spread nothing", aggregates, used)
	}
}
