package publisher

import (
	"context"
	"strconv"
	"testing"
	"time"
)

// BenchmarkGroup is the per-event path before a produce request: each
// record's partition count from the cache, its partition and its group, for
// batches of 1000 records with the cache warm: over 3 topics taking turns
// (the worst case: a cache read per record), and of one topic. Its allocs
// are per batch (the group index), none per record.
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
	for _, bc := range []struct {
		name   string
		topics int
	}{{"3-topics", 3}, {"1-topic", 1}} {
		b.Run(bc.name, func(b *testing.B) {
			batch := make([]*Record, 1000)
			for i := range batch {
				batch[i] = &Record{Topic: topics[i%bc.topics], Key: []byte("agg-" + strconv.Itoa(i%97))}
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.group(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/record")
		})
	}
}

// TestStalePartitionCountKeptWhenRefreshFails: a count due for its refresh
// while no broker answers is used as it is, and tried again only after
// metadataRetry, not on every batch.
func TestStalePartitionCountKeptWhenRefreshFails(t *testing.T) {
	p, err := New(Config{Brokers: []string{"127.0.0.1:1"}, RequestTimeout: 5 * time.Second, MetadataMaxAge: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	s := &Session{p: p}
	p.setPartitions("orders", 6)
	due := p.now() + int64(time.Minute) // past the entry's refreshAt
	n, err := s.partitions(context.Background(), "orders", due)
	if err != nil || n != 6 {
		t.Fatalf("partitions = %d, %v; want the cached 6", n, err)
	}
	p.mu.RLock()
	m := p.partitions["orders"]
	p.mu.RUnlock()
	if now := p.now(); m.n != 6 || m.refreshAt <= now || m.refreshAt > now+int64(metadataRetry) {
		t.Fatalf("after a failed refresh the entry is %+v at now %d; want n 6, next try within %s", m, now, metadataRetry)
	}
}
