package publisher

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// countingAcker keeps the publisher's last acknowledgement.
type countingAcker struct{ upTo atomic.Uint64 }

var _ Acker = (*countingAcker)(nil)

func (a *countingAcker) Ack(upTo uint64, _ int, _ int64) { a.upTo.Store(upTo) }

// TestPartitionCountRefresh, on kfake (it was a test of cmd/cdc-relay
// against the real broker; the partitioner is the client's, and a
// partition count is all the broker tells): a topic made with one
// partition gets three more (kadm's UpdatePartitions) while a session
// publishes; after MetadataMaxAge (shortened here; 5 min in the relay)
// the session uses all four, and every key moves once, at one sequence
// number, from partition 0 to Partition(key, 4), never back. With no
// refresh (an hour's MetadataMaxAge) it fails at its 90 s deadline.
func TestPartitionCountRefresh(t *testing.T) {
	t.Parallel()
	topic := "refresh"
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	p, err := New(Config{Brokers: c.ListenAddrs(), MetadataMaxAge: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	acker := &countingAcker{}
	s := p.NewSession(context.Background(), acker)
	t.Cleanup(s.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.MetadataMinAge(100*time.Millisecond), kgo.MetadataMaxAge(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	const keys = 40
	seq := uint64(0)
	partitionOf := map[uint64]int32{} // seq → partition, as consumed
	keyOf := map[uint64]string{}
	round := func() {
		t.Helper()
		for i := range keys {
			seq++
			k := "agg-" + strconv.Itoa(i)
			keyOf[seq] = k
			if err := s.Enqueue(&Record{Topic: topic, Key: []byte(k), Value: []byte(strconv.FormatUint(seq, 10)), Seq: seq, Reserved: 1}); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := s.Drain(ctx); err != nil {
			t.Fatal(err)
		}
		if got := acker.upTo.Load(); got != seq {
			t.Fatalf("acknowledged up to %d after the drain, want %d", got, seq)
		}
	}
	// consume reads until every published record was seen.
	consume := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		for uint64(len(partitionOf)) < seq {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("consumed %d of %d records", len(partitionOf), seq)
			}
			fs.EachRecord(func(r *kgo.Record) {
				v, _ := strconv.ParseUint(string(r.Value), 10, 64)
				partitionOf[v] = r.Partition
			})
		}
	}

	round()
	consume()
	for v, p := range partitionOf {
		if p != 0 {
			t.Fatalf("record %d on partition %d of a 1-partition topic", v, p)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	res, err := kadm.NewClient(cl).UpdatePartitions(ctx, 4, topic)
	cancel()
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("add partitions to %s: %v", topic, err)
	}
	added := seq // records after this one may go to the new partitions

	// Publish until a record lands on a new partition, with a deadline.
	deadline := time.Now().Add(90 * time.Second)
	for moved := false; !moved; {
		if time.Now().After(deadline) {
			t.Fatalf("no record on partitions 1-3 in 90 s after adding them (%d records)", seq)
		}
		round()
		consume()
		for v := added + 1; v <= seq; v++ {
			moved = moved || partitionOf[v] != 0
		}
	}
	round() // one more round, all on the new count
	consume()

	// Each key: on partition 0 up to one sequence number, on Partition(key,
	// 4) from the next one on, never back.
	switched := map[string]bool{}
	movedKeys := 0
	for v := uint64(1); v <= seq; v++ {
		k, got := keyOf[v], partitionOf[v]
		want := int32(Partition([]byte(k), 4))
		switch {
		case got == want && !switched[k]:
			switched[k] = true
			if want != 0 {
				movedKeys++
			}
		case got == want:
		case switched[k] || got != 0:
			t.Errorf("record %d (key %s) on partition %d, want %d (switched %v)", v, k, got, want, switched[k])
		case v <= added:
		default: // still on partition 0 after the partitions were added: fine until the refresh
		}
	}
	if len(switched) != keys || movedKeys == 0 {
		t.Errorf("%d of %d keys on their 4-partition placement at the end, %d moved off partition 0", len(switched), keys, movedKeys)
	}
}
