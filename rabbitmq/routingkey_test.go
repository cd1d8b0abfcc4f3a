package rabbitmq

import "testing"

// BenchmarkRoutingKey: a message's routing key, appended to a reused
// buffer, as the hot path builds it.
func BenchmarkRoutingKey(b *testing.B) {
	b.ReportAllocs()
	rk, err := ParseRoutingKey("orders.{aggregate_type}.{event_type}.{aggregate_id}")
	if err != nil {
		b.Fatal(err)
	}
	ev, agg, id := []byte("OrderCreated"), []byte("Order"), []byte("00000000-0000-4000-8000-000000000042")
	var dst []byte
	for i := 0; i < b.N; i++ {
		dst = rk.Append(dst[:0], ev, agg, id)
	}
	if string(dst) != "orders.Order.OrderCreated.00000000-0000-4000-8000-000000000042" {
		b.Fatalf("key %q", dst)
	}
}

// TestParseRoutingKeyErrors: the messages --routing-key's errors carry,
// word for word (the relay prefixes the flag).
func TestParseRoutingKeyErrors(t *testing.T) {
	for template, want := range map[string]string{
		"{event_type":  `"{event_type": unclosed '{': use {event_type}, {aggregate_type} or {aggregate_id}`,
		"a.{tenant}.b": `"a.{tenant}.b": unknown placeholder {tenant}: use {event_type}, {aggregate_type} or {aggregate_id}`,
	} {
		if _, err := ParseRoutingKey(template); err == nil || err.Error() != want {
			t.Errorf("ParseRoutingKey(%q) = %v, want %s", template, err, want)
		}
	}
}
