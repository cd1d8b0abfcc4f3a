package publisher

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"
)

// countAcker records the acknowledged prefix and lets a benchmark wait for it.
type countAcker struct {
	mu   sync.Mutex
	cond *sync.Cond
	upTo uint64
}

func newCountAcker() *countAcker {
	a := &countAcker{}
	a.cond = sync.NewCond(&a.mu)
	return a
}

func (a *countAcker) Ack(upTo uint64, _ int, _ int64) {
	a.mu.Lock()
	a.upTo = upTo
	a.mu.Unlock()
	a.cond.Broadcast()
}

func (a *countAcker) wait(n uint64) {
	a.mu.Lock()
	for a.upTo < n {
		a.cond.Wait()
	}
	a.mu.Unlock()
}

// BenchmarkSessionPublish publishes b.N records of about 300 bytes over 20
// keys through a session into kfake and waits for every acknowledgement:
// the publisher's and kgo's CPU and allocations per record (kfake's too,
// in the same process, so the figure is an upper bound).
func BenchmarkSessionPublish(b *testing.B) {
	const topic = "orders"
	c := newCluster(&testing.T{}, topic)
	defer c.Close()
	p, err := New(Config{Brokers: c.ListenAddrs(), Linger: 2 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	acker := newCountAcker()
	s := p.NewSession(context.Background(), acker)
	defer s.Close()
	keys := make([][]byte, 20)
	for i := range keys {
		keys[i] = []byte("agg-" + strconv.Itoa(i))
	}
	value := make([]byte, 300)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 1; i <= b.N; i++ {
		r := NewRecord()
		r.Topic, r.Key, r.Value, r.Seq, r.Reserved = topic, keys[i%20], value, uint64(i), 1
		if err := s.Enqueue(r); err != nil {
			b.Fatal(err)
		}
		if i%10000 == 0 {
			acker.wait(uint64(i - 5000)) // bound what is in flight, as the tracker would
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Drain(ctx); err != nil {
		b.Fatal(err)
	}
}
