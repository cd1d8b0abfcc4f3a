package router

import (
	"testing"

	"github.com/cdc-relay/cdc-relay/publisher"
)

func BenchmarkTopic(b *testing.B) {
	b.ReportAllocs()
	r, _ := New(DefaultTemplate)
	agg, ev := []byte("Order"), []byte("OrderCreated")
	for i := 0; i < b.N; i++ {
		if _, err := r.Topic(agg, ev); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendHeaders(b *testing.B) {
	b.ReportAllocs()
	headers := []byte(`{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tenant": "acme", "attempt": 1}`)
	dst := make([]publisher.Header, 0, 8)
	id, ev, agg := []byte("42"), []byte("OrderCreated"), []byte("Order")
	for i := 0; i < b.N; i++ {
		var err error
		if dst, err = AppendHeaders(dst[:0], id, ev, agg, headers); err != nil {
			b.Fatal(err)
		}
	}
}
