package publisher

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// produceCounts counts the records of each produce request c gets.
func produceCounts(c *kfake.Cluster) func() []int {
	var mu sync.Mutex
	var counts []int
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		n := 0
		for _, t := range req.(*kmsg.ProduceRequest).Topics {
			for _, p := range t.Partitions {
				n += recordsIn(p.Records)
			}
		}
		mu.Lock()
		counts = append(counts, n)
		mu.Unlock()
		return nil, nil, false
	})
	return func() []int {
		mu.Lock()
		defer mu.Unlock()
		return append([]int(nil), counts...)
	}
}

// recordsIn is the number of records of a v2 record batch (its
// NumRecords field).
func recordsIn(batch []byte) int {
	var b kmsg.RecordBatch
	if err := b.ReadFrom(batch); err != nil {
		return 0
	}
	return int(b.NumRecords)
}

// TestHoldTrickle: at-least-once, records that trickle in within the
// linger go to Kafka together, in one produce request, and not before the
// linger or company allows.
func TestHoldTrickle(t *testing.T) {
	const topic = "hold"
	c := newCluster(t, topic)
	counts := produceCounts(c)
	// Long, and the gaps between records long against it, so that a loaded
	// machine has the session idle between them.
	const linger = 2 * time.Second
	_, s, acker := startSession(t, Config{Brokers: c.ListenAddrs(), Linger: linger})
	seq := uint64(0)
	enqueue := func(n int) {
		for range n {
			seq++
			if err := s.Enqueue(&Record{Topic: topic, Key: []byte("k"), Value: []byte(strconv.Itoa(int(seq))), Seq: seq, Reserved: 1}); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitAcked := func(upTo uint64) time.Duration {
		began := time.Now()
		deadline := began.Add(30 * time.Second)
		for acker.acked() < upTo {
			if time.Now().After(deadline) {
				t.Fatalf("acked %d, want %d; produce requests: %v", acker.acked(), upTo, counts())
			}
			time.Sleep(time.Millisecond)
		}
		return time.Since(began)
	}

	// Three records 200 ms apart, the session idle between them: held
	// until the linger ends, then one request.
	began := time.Now()
	for i := range 3 {
		if i > 0 {
			time.Sleep(200 * time.Millisecond) // the gap between two events, not a synchronisation
		}
		enqueue(1)
	}
	waitAcked(3)
	if d := time.Since(began); d < linger*9/10 {
		t.Errorf("3 trickling records acknowledged after %s, before the %s linger", d, linger)
	}
	if got := counts(); len(got) != 1 || got[0] != 3 {
		t.Fatalf("produce requests carried %v records, want one of 3", got)
	}

	// A record held past half the linger goes with the next one to come,
	// before the linger ends.
	began = time.Now()
	enqueue(1)
	time.Sleep(linger * 6 / 10) // the gap between two events, not a synchronisation
	enqueue(1)
	waitAcked(5)
	if d := time.Since(began); d >= linger*9/10 {
		t.Errorf("a record held past half the linger waited %s with company, for the whole %s linger", d, linger)
	}
	if got := counts(); len(got) != 2 || got[1] != 2 {
		t.Fatalf("produce requests carried %v records, want 3 then 2", got)
	}
}

// TestGatheredNotHeld: while the records come gathered (Config.Gathered),
// they go to Kafka as soon as none is queued, not after a linger of the
// session's own; once they do not, they are held as before.
func TestGatheredNotHeld(t *testing.T) {
	const topic = "gathered"
	c := newCluster(t, topic)
	counts := produceCounts(c)
	const linger = 4 * time.Second
	var gathered atomic.Bool
	gathered.Store(true)
	_, s, acker := startSession(t, Config{Brokers: c.ListenAddrs(), Linger: linger, Gathered: gathered.Load})
	waitAcked := func(seq uint64) time.Duration {
		began := time.Now()
		for acker.acked() < seq {
			if time.Since(began) > 2*linger {
				t.Fatalf("acked %d, want %d; produce requests: %v", acker.acked(), seq, counts())
			}
			time.Sleep(time.Millisecond)
		}
		return time.Since(began)
	}
	enqueue := func(seq uint64) {
		if err := s.Enqueue(&Record{Topic: topic, Key: []byte("k"), Value: []byte(strconv.Itoa(int(seq))), Seq: seq, Reserved: 1}); err != nil {
			t.Fatal(err)
		}
	}
	enqueue(1)
	if d := waitAcked(1); d >= linger*9/10 {
		t.Errorf("a gathered record was acknowledged after %s, held for the %s linger", d, linger)
	}
	gathered.Store(false)
	enqueue(2)
	if d := waitAcked(2); d < linger*9/10 {
		t.Errorf("a record that did not come gathered was acknowledged after %s, before the %s linger", d, linger)
	}
	if got := counts(); len(got) != 2 || got[0] != 1 || got[1] != 1 {
		t.Fatalf("produce requests carried %v records, want 1 and 1", got)
	}
}
