package publisher

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cdc-relay/cdc-relay/internal/relaytest"
)

// fakeAcker checks that acknowledgements form a growing contiguous prefix.
type fakeAcker struct {
	mu     sync.Mutex
	t      testing.TB
	upTo   uint64
	events int
}

var _ Acker = (*fakeAcker)(nil)

func (a *fakeAcker) Ack(upTo uint64, events int, bytes int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if upTo <= a.upTo {
		a.t.Errorf("ack went backwards or repeated: %d after %d", upTo, a.upTo)
	}
	if uint64(events) != upTo-a.upTo {
		a.t.Errorf("ack of %d events for seqs %d..%d", events, a.upTo+1, upTo)
	}
	a.upTo = upTo
	a.events += events
}

func (a *fakeAcker) acked() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.upTo
}

func newCluster(t *testing.T, topic string) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// publishAll enqueues n records over 20 keys in bursts, as the stream would.
func publishAll(t *testing.T, s *Session, topic string, n int) {
	t.Helper()
	for i := 1; i <= n; i++ {
		r := &Record{Topic: topic, Key: []byte("agg-" + strconv.Itoa(i%20)), Value: []byte(strconv.Itoa(i)), Seq: uint64(i), Reserved: 1}
		if err := s.Enqueue(r); err != nil {
			t.Fatal(err)
		}
		if i%97 == 0 {
			time.Sleep(time.Millisecond) // let batches of varied sizes form
		}
	}
}

// readBack consumes the topic and checks per-key order of first occurrences
// and that every value 1..n is there.
func readBack(t *testing.T, addrs []string, topic string, n int) (dups int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	seen := map[int]bool{}
	last := map[string]int{}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for len(seen) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records", len(seen), n)
		}
		fs.EachRecord(func(r *kgo.Record) {
			v, _ := strconv.Atoi(string(r.Value))
			if seen[v] {
				dups++
				return
			}
			seen[v] = true
			if v < last[string(r.Key)] {
				t.Errorf("key %s: value %d after %d", r.Key, v, last[string(r.Key)])
			}
			last[string(r.Key)] = v
		})
	}
	return dups
}

// startSession starts a publisher with cfg and a session acknowledging to
// a fakeAcker; both are closed when the test ends.
func startSession(t *testing.T, cfg Config) (*Publisher, *Session, *fakeAcker) {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	acker := &fakeAcker{t: t}
	s := p.NewSession(context.Background(), acker)
	t.Cleanup(s.Close)
	return p, s, acker
}

// drainAll waits up to timeout for the session to drain and checks that
// the acknowledgements reached n.
func drainAll(t *testing.T, s *Session, acker *fakeAcker, n uint64, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := s.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if got := acker.acked(); got != n {
		t.Fatalf("acked up to %d, want %d", got, n)
	}
}

func TestSessionPublishesInOrderAndAcksPrefix(t *testing.T) {
	const topic, n = "orders", 5000
	c := newCluster(t, topic)
	_, s, acker := startSession(t, Config{Brokers: c.ListenAddrs()})
	publishAll(t, s, topic, n)
	drainAll(t, s, acker, n, 20*time.Second)
	if dups := readBack(t, c.ListenAddrs(), topic, n); dups != 0 {
		t.Fatalf("%d duplicates without faults", dups)
	}
}

// TestSessionKeepsOrderThroughFailures drops the connection on a share of
// produce requests: the session retries, nothing is lost and no key is
// reordered; the acks stay a contiguous prefix.
func TestSessionKeepsOrderThroughFailures(t *testing.T) {
	const topic, n = "orders", 3000
	c := newCluster(t, topic)
	var calls atomic.Int64
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if calls.Add(1)%3 == 0 {
			return nil, errors.New("injected failure"), true // kfake closes the connection
		}
		return nil, nil, false
	})
	_, s, acker := startSession(t, Config{Brokers: c.ListenAddrs(), RequestTimeout: 5 * time.Second})
	publishAll(t, s, topic, n)
	drainAll(t, s, acker, n, 60*time.Second)
	dups := readBack(t, c.ListenAddrs(), topic, n)
	t.Logf("produce calls %d, duplicates %d", calls.Load(), dups)
	if calls.Load() < 3 {
		t.Fatalf("only %d produce calls: no failure was injected", calls.Load())
	}
}

func TestSessionTerminalErrorFailsEnqueue(t *testing.T) {
	c := newCluster(t, "orders")
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.ProduceRequest)
		resp := r.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range r.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = 29 // TOPIC_AUTHORIZATION_FAILED: not retriable
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	_, s, acker := startSession(t, Config{Brokers: c.ListenAddrs()})
	s.Enqueue(&Record{Topic: "orders", Key: []byte("k"), Value: []byte("v"), Seq: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := s.Drain(ctx)
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "authoriz") {
		t.Fatalf("Drain = %v, want the terminal error", err)
	}
	if acker.acked() != 0 {
		t.Fatalf("a failed record was acknowledged")
	}
	if err := s.Enqueue(&Record{Topic: "orders", Seq: 2}); err == nil {
		t.Fatalf("Enqueue after a terminal error succeeded")
	}
}

// TestSessionUnansweredProduceTimesOut: the broker never answers one produce
// request (a dead connection that stays open). The request fails at
// RequestTimeout, the session retries it on a new connection and carries on
// in order; when the stuck request is finally processed, it only adds
// duplicates after the retried records.
func TestSessionUnansweredProduceTimesOut(t *testing.T) {
	const topic, n = "orders", 500
	c := newCluster(t, topic)
	release := make(chan struct{})
	var calls atomic.Int64
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if calls.Add(1) == 1 {
			c.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	_, s, acker := startSession(t, Config{Brokers: c.ListenAddrs(), RequestTimeout: time.Second})
	publishAll(t, s, topic, n)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	began := time.Now()
	if err := s.Drain(ctx); err != nil {
		t.Fatalf("drain with one produce request never answered: %v", err)
	}
	t.Logf("drained in %s", time.Since(began).Round(time.Millisecond))
	if got := acker.acked(); got != n {
		t.Fatalf("acked up to %d, want %d", got, n)
	}
	close(release)
	dups := readBack(t, c.ListenAddrs(), topic, n)
	t.Logf("produce calls %d, duplicates %d", calls.Load(), dups)
}

// TestSessionLinger: with a linger, records enqueued one after another
// while no request is in flight go out together in one request, and not
// before the linger has passed; without one, the first goes out at once.
func TestSessionLinger(t *testing.T) {
	for _, tc := range []struct {
		linger       time.Duration
		wantRequests func(int64) bool
		want         string
	}{
		{300 * time.Millisecond, func(n int64) bool { return n == 1 }, "exactly 1"},
		{0, func(n int64) bool { return n >= 2 }, "at least 2"},
	} {
		t.Run(tc.linger.String(), func(t *testing.T) {
			const topic, n = "orders", 10
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var requests atomic.Int64
			first := make(chan struct{})
			c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				if requests.Add(1) == 1 {
					close(first)
				}
				return nil, nil, false
			})
			p, s, acker := startSession(t, Config{Brokers: c.ListenAddrs(), Linger: tc.linger})
			// Warm the metadata and the topic's limit, so that the first
			// produce is not held up by a metadata request.
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := p.Ping(ctx); err != nil {
				t.Fatal(err)
			}
			p.recordLimit(ctx, p.cl, topic)
			start := time.Now()
			enqueue := func(i int) {
				if err := s.Enqueue(&Record{Topic: topic, Key: []byte("k"), Value: []byte(strconv.Itoa(i)), Seq: uint64(i), Reserved: 1}); err != nil {
					t.Fatal(err)
				}
			}
			enqueue(1)
			if tc.linger == 0 {
				// Without a linger the first record is sent alone, at once.
				select {
				case <-first:
				case <-ctx.Done():
					t.Fatal("no produce request")
				}
			}
			for i := 2; i <= n; i++ {
				enqueue(i)
			}
			drainAll(t, s, acker, n, 20*time.Second)
			elapsed := time.Since(start)
			if got := requests.Load(); !tc.wantRequests(got) {
				t.Fatalf("%d produce requests for %d records, want %s", got, n, tc.want)
			}
			if elapsed < tc.linger {
				t.Fatalf("acknowledged after %s, before the %s linger", elapsed, tc.linger)
			}
		})
	}
}

// TestHealthFailingSince: while produce requests fail, Health says since
// when and with what; it stays at the first failure through the retries,
// and one successful produce request clears it.
func TestHealthFailingSince(t *testing.T) {
	const topic = "orders"
	c := newCluster(t, topic)
	var failing atomic.Bool
	var failures atomic.Int64
	failing.Store(true)
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if failing.Load() {
			failures.Add(1)
			return nil, errors.New("injected failure"), true // kfake closes the connection
		}
		return nil, nil, false
	})
	p, s, acker := startSession(t, Config{Brokers: c.ListenAddrs(), RequestTimeout: 5 * time.Second})
	if h := p.Health(); !h.FailingSince.IsZero() || h.LastError != "" {
		t.Fatalf("before any request: Health = %+v, want zero", h)
	}
	before := time.Now()
	if err := s.Enqueue(&Record{Topic: topic, Key: []byte("k"), Value: []byte("v"), Seq: 1, Reserved: 1}); err != nil {
		t.Fatal(err)
	}
	relaytest.WaitFor(t, 30*time.Second, "3 failed produce requests", func() bool { return failures.Load() >= 3 })
	h := p.Health()
	if h.FailingSince.Before(before) || h.FailingSince.After(time.Now()) {
		t.Fatalf("FailingSince = %v, want between %v and now", h.FailingSince, before)
	}
	if h.LastError == "" {
		t.Fatal("LastError is empty while produce requests fail")
	}
	first := h.FailingSince
	relaytest.WaitFor(t, 30*time.Second, "a 4th failed produce request", func() bool { return failures.Load() >= 4 })
	if got := p.Health().FailingSince; !got.Equal(first) {
		t.Fatalf("FailingSince moved from %v to %v on a retry: it is the first failure's", first, got)
	}
	failing.Store(false)
	drainAll(t, s, acker, 1, 30*time.Second)
	// The record's promise can run before the hook that sees the request
	// succeed: Health clears soon after the ack, not necessarily before it.
	relaytest.WaitFor(t, 30*time.Second, "Health cleared after a successful produce", func() bool {
		h := p.Health()
		return h.FailingSince.IsZero() && h.LastError == ""
	})
}

// ackRecorder is an AckHook that keeps where its record was written.
type ackRecorder struct {
	mu    *sync.Mutex
	where map[string][2]int64 // value → partition, offset
	value string
}

func (a *ackRecorder) Acked(partition int32, offset int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.where[a.value] = [2]int64{int64(partition), offset}
}

// TestSessionOnAckNamesPartitionAndOffset: a record's OnAck hears of its
// acknowledgement once, with the partition and offset a consumer then finds
// the record at.
func TestSessionOnAckNamesPartitionAndOffset(t *testing.T) {
	const topic, n = "orders", 200
	c := newCluster(t, topic)
	_, s, acker := startSession(t, Config{Brokers: c.ListenAddrs()})
	var mu sync.Mutex
	where := map[string][2]int64{}
	for i := 1; i <= n; i++ {
		v := strconv.Itoa(i)
		r := &Record{Topic: topic, Key: []byte("agg-" + strconv.Itoa(i%7)), Value: []byte(v), Seq: uint64(i), Reserved: 1,
			OnAck: &ackRecorder{mu: &mu, where: where, value: v}}
		if err := s.Enqueue(r); err != nil {
			t.Fatal(err)
		}
	}
	drainAll(t, s, acker, n, 20*time.Second)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for got := 0; got < n; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records", got, n)
		}
		fs.EachRecord(func(r *kgo.Record) {
			got++
			mu.Lock()
			w, ok := where[string(r.Value)]
			mu.Unlock()
			if !ok {
				t.Errorf("record %s: OnAck was not called", r.Value)
			} else if w != [2]int64{int64(r.Partition), r.Offset} {
				t.Errorf("record %s: OnAck said partition %d offset %d, the consumer read it at %d/%d", r.Value, w[0], w[1], r.Partition, r.Offset)
			}
		})
	}
}
