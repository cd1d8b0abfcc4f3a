package rabbittest

import (
	"fmt"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Shards declares the topology the docs give for order per aggregate
// across several consumers: an x-consistent-hash exchange named
// exchange+".shards" that hashes the aggregate_id header, bound to the
// topic exchange with "#", and n quorum queues with single active
// consumer, each bound to it with weight "1". The topic exchange must
// exist. It returns the queues' names, exchange+".shard-<i>".
func Shards(t testing.TB, ch *amqp.Channel, exchange string, n int) []string {
	t.Helper()
	hash := exchange + ".shards"
	if err := ch.ExchangeDeclare(hash, "x-consistent-hash", true, false, false, false, amqp.Table{"hash-header": "aggregate_id"}); err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeBind(hash, "#", exchange, false, nil); err != nil {
		t.Fatal(err)
	}
	var queues []string
	for i := range n {
		q := fmt.Sprintf("%s.shard-%d", exchange, i)
		if _, err := ch.QueueDeclare(q, true, false, false, false, amqp.Table{"x-queue-type": "quorum", "x-single-active-consumer": true}); err != nil {
			t.Fatal(err)
		}
		if err := ch.QueueBind(q, "1", hash, false, nil); err != nil { // "1": the shard's weight
			t.Fatal(err)
		}
		queues = append(queues, q)
	}
	return queues
}
