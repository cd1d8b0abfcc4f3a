package publisher

import (
	"context"
	"strconv"
	"testing"
)

// BenchmarkGroup is the per-event path before a produce request: each
// record's partition count from the cache, its partition and its group, for
// batches of 1000 records over 3 topics with the cache warm. Its allocs are
// per batch (the group index), none per record.
func BenchmarkGroup(b *testing.B) {
	p, err := New(Config{Brokers: []string{"127.0.0.1:1"}})
	if err != nil {
		b.Fatal(err)
	}
	s := &Session{p: p}
	topics := []string{"orders", "payments", "shipments"}
	for i, topic := range topics {
		p.setPartitions(topic, 6*(i+1))
	}
	batch := make([]*Record, 1000)
	for i := range batch {
		batch[i] = &Record{Topic: topics[i%3], Key: []byte("agg-" + strconv.Itoa(i%97))}
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.group(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/record")
}
