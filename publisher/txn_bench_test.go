package publisher

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/kafkatest"
)

// txnLoop publishes one-record Kafka transactions through one publisher,
// each begun as soon as the last committed.
type txnLoop struct {
	name string
	s    *Session
	data string
	seq  uint64
	took []time.Duration
}

// txn enqueues one record and its boundary and waits for the commit
// (acks, checkpoint record, EndTxn).
func (l *txnLoop) txn(b *testing.B, ctx context.Context) time.Duration {
	start := time.Now()
	l.seq++
	if err := l.s.Enqueue(&Record{Topic: l.data, Key: []byte("k"), Value: []byte("v"), Seq: l.seq, Reserved: 1}); err != nil {
		b.Fatal(err)
	}
	l.s.Boundary(l.seq, 100*l.seq, time.Now())
	if err := l.s.Drain(ctx); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// BenchmarkTxnBackToBack measures, against a real Kafka 4 broker (make
// bench-txn), one-record Kafka transactions each begun as soon as the last
// one committed, the relay's loop under load: enqueue, boundary, drain
// (acks, checkpoint record, EndTxn). Each way of pacing has a publisher of
// its own, and they take turns in blocks of 50 transactions after a shared
// warm-up, so that the broker's JIT favours none. b.N transactions each
// (ns/op is the three ways' sum); the metrics are each way's p50 and p99
// per transaction, in ms:
//   - relay: what the relay does (transaction version 2, and
//     DescribeTransactions until the last commit is complete);
//   - tv1: its fallback where the broker does not answer
//     DescribeTransactions (AddPartitionsToTxn, retried after 2 ms);
//   - broker: neither, so the broker's own retry after
//     add.partitions.to.txn.retry.backoff.ms (20 ms) applies.
func BenchmarkTxnBackToBack(b *testing.B) {
	broker, err := kafkatest.Start(kafkatest.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer broker.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var loops []*txnLoop
	for i, name := range []string{"relay", "tv1", "broker"} {
		ck := "bench-txn-ck-" + strconv.Itoa(i)
		p, err := New(Config{
			Brokers: []string{broker.Addr()}, ExactlyOnce: true, TransactionalID: "bench-txn-" + name,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Checkpoint: func(end, _ uint64, _ time.Time) (*Record, error) {
				return &Record{Topic: ck, Key: []byte("relay"), Value: []byte(strconv.FormatUint(end, 10))}, nil
			},
		})
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		switch name {
		case "tv1":
			p.describeTxnOff.Store(true)
		case "broker":
			p.completedWait = 0
		}
		if err := p.Fence(ctx); err != nil {
			b.Fatal(err)
		}
		s := p.NewSession(ctx, &txnAcker{fakeAcker: fakeAcker{t: b}})
		defer s.Close()
		loops = append(loops, &txnLoop{name: name, s: s, data: "bench-txn-" + strconv.Itoa(i)})
	}
	const block = 50
	for range 10 { // topics made, connections open, the broker compiled
		for _, l := range loops {
			for range block {
				l.txn(b, ctx)
			}
		}
	}
	b.ResetTimer()
	for done := 0; done < b.N; done += block {
		for _, l := range loops {
			for range min(block, b.N-done) {
				l.took = append(l.took, l.txn(b, ctx))
			}
		}
	}
	b.StopTimer()
	for _, l := range loops {
		slices.Sort(l.took)
		b.ReportMetric(float64(l.took[len(l.took)/2])/1e6, l.name+"-p50-ms")
		b.ReportMetric(float64(l.took[len(l.took)*99/100])/1e6, l.name+"-p99-ms")
	}
}
