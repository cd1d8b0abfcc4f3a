package rabbittest

import (
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Channel opens a connection to the node and a channel on it, for a test's
// own declarations and consumers; the connection closes at the test's end.
func (n *Node) Channel(t testing.TB) *amqp.Channel {
	t.Helper()
	conn, err := amqp.Dial(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	return ch
}
