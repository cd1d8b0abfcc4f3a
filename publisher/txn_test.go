package publisher

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/relaytest"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnAcker is a fakeAcker that also learns what committed.
type txnAcker struct {
	fakeAcker
	committed uint64
}

func (a *txnAcker) Committed(upTo uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if upTo <= a.committed {
		a.t.Errorf("commit went backwards or repeated: %d after %d", upTo, a.committed)
	}
	a.committed = upTo
}

// wireLog is the order in which kfake handled the requests a test watches.
type wireLog struct {
	mu     sync.Mutex
	events []string
}

func (w *wireLog) add(e string) {
	w.mu.Lock()
	w.events = append(w.events, e)
	w.mu.Unlock()
}

func (w *wireLog) snapshot() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.events)
}

// watchTxnRequests logs the EndTxn, transactional Produce and
// AddPartitionsToTxn requests kfake handles, and answers each
// DescribeTransactions with describe, logged as "describe:" and its state
// or error; describe gets what was logged before.
func watchTxnRequests(c *kfake.Cluster, w *wireLog, describe func(logged []string) (state string, code int16)) {
	for key, name := range map[kmsg.Key]string{kmsg.EndTxn: "end", kmsg.Produce: "produce", kmsg.AddPartitionsToTxn: "add"} {
		c.ControlKey(int16(key), func(req kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			if p, ok := req.(*kmsg.ProduceRequest); !ok || p.TransactionID != nil {
				w.add(name) // a produce only when transactional
			}
			return nil, nil, false
		})
	}
	c.ControlKey(int16(kmsg.DescribeTransactions), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.DescribeTransactionsRequest)
		resp := r.ResponseKind().(*kmsg.DescribeTransactionsResponse)
		for _, id := range r.TransactionalIDs {
			st := kmsg.NewDescribeTransactionsResponseTransactionState()
			st.TransactionalID = id
			st.State, st.ErrorCode = describe(w.snapshot())
			if st.ErrorCode != 0 {
				w.add("describe:" + kerr.ErrorForCode(st.ErrorCode).Error())
			} else {
				w.add("describe:" + st.State)
			}
			resp.TransactionStates = append(resp.TransactionStates, st)
		}
		return resp, nil, true
	})
}

// watchedCluster is a kfake cluster with topics data and ck whose
// transactional requests are logged (watchTxnRequests).
func watchedCluster(t *testing.T, data, ck string, describe func(logged []string) (state string, code int16)) (*kfake.Cluster, *wireLog) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, data, ck))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	w := &wireLog{}
	watchTxnRequests(c, w, describe)
	return c, w
}

// runTxns publishes n one-record PostgreSQL transactions, each drained
// (committed) before the next, so each Kafka transaction begins right after
// the last one's EndTxn.
func runTxns(t *testing.T, cfg Config, data string, n int) (*Publisher, *txnAcker) {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	// However loaded the machine, the next transaction begins within this.
	p.completedWait = time.Hour
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.Fence(ctx); err != nil {
		t.Fatal(err)
	}
	acker := &txnAcker{fakeAcker: fakeAcker{t: t}}
	s := p.NewSession(context.Background(), acker)
	t.Cleanup(s.Close)
	for i := 1; i <= n; i++ {
		r := &Record{Topic: data, Key: []byte("k"), Value: []byte(strconv.Itoa(i)), Seq: uint64(i), Reserved: 1}
		if err := s.Enqueue(r); err != nil {
			t.Fatal(err)
		}
		s.Boundary(uint64(i), uint64(100*i), time.Now())
		if err := s.Drain(ctx); err != nil {
			t.Fatalf("transaction %d: %v", i, err)
		}
	}
	acker.mu.Lock()
	defer acker.mu.Unlock()
	if acker.committed != uint64(n) {
		t.Fatalf("committed up to %d, want %d", acker.committed, n)
	}
	return p, acker
}

// txnConfig is a transactional publisher's configuration on c, logging to
// logs, with its checkpoint records on topic ck.
func txnConfig(c *kfake.Cluster, logs *relaytest.LogBuffer, ck string) Config {
	return Config{
		Brokers:         c.ListenAddrs(),
		ExactlyOnce:     true,
		TransactionalID: "txn-test",
		Logger:          slog.New(slog.NewTextHandler(logs, nil)),
		Checkpoint: func(end, _ uint64, _ time.Time) (*Record, error) {
			return &Record{Topic: ck, Key: []byte("relay"), Value: []byte(strconv.FormatUint(end, 10))}, nil
		},
	}
}

// awaitObserver keeps the await phase of each committed transaction.
type awaitObserver struct {
	nopObserver
	mu     sync.Mutex
	awaits []time.Duration
}

func (o *awaitObserver) TxnCommitted(_ int, _, _, await time.Duration) {
	o.mu.Lock()
	o.awaits = append(o.awaits, await)
	o.mu.Unlock()
}

// readCommitted reads n records of topic with read_committed.
func readCommitted(t *testing.T, addrs []string, topic string, n int) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got []string
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d committed records: %v", len(got), n, got)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

// A Kafka transaction that follows the last one produces only once the
// coordinator says the last commit is complete: while its markers are being
// written, a new transaction's partition is refused and the broker retries
// only after 20 ms.
func TestTxnWaitsForTheLastCommitToComplete(t *testing.T) {
	const data, ck = "txn-wait", "txn-wait-ck"
	c, w := watchedCluster(t, data, ck, func(ev []string) (string, int16) {
		// The first two answers after each EndTxn: the markers are
		// still being written.
		since := 0
		for i := len(ev) - 1; i >= 0; i-- {
			switch {
			case ev[i] == "end":
				if since < 2 {
					return "PrepareCommit", 0
				}
				return "CompleteCommit", 0
			case strings.HasPrefix(ev[i], "describe:"):
				since++
			}
		}
		return "Empty", 0
	})
	logs := &relaytest.LogBuffer{}
	cfg := txnConfig(c, logs, ck)
	obs := &awaitObserver{}
	cfg.Observer = obs
	runTxns(t, cfg, data, 3)

	ev := w.snapshot()
	t.Logf("requests: %v", ev)
	// Each wait spans two PrepareCommit answers and the pause after each.
	obs.mu.Lock()
	if len(obs.awaits) != 3 || obs.awaits[0] != 0 || obs.awaits[1] < 2*completedPoll || obs.awaits[2] < 2*completedPoll {
		t.Errorf("await phases %v, want 0 for the first transaction and at least %v for the others", obs.awaits, 2*completedPoll)
	}
	obs.mu.Unlock()
	want := []string{"describe:PrepareCommit", "describe:PrepareCommit", "describe:CompleteCommit"}
	ends := 0
	for i, e := range ev {
		if e == "add" {
			t.Fatalf("AddPartitionsToTxn sent: the client should add partitions with its produce requests (transaction version 2): %v", ev)
		}
		if e != "end" || !slices.Contains(ev[i:], "produce") {
			continue
		}
		ends++
		next := i + 1 + slices.Index(ev[i+1:], "produce")
		if between := ev[i+1 : next]; !slices.Equal(between, want) {
			t.Errorf("between EndTxn %d and the next transaction's first produce: %v, want %v", ends, between, want)
		}
	}
	if ends != 2 {
		t.Fatalf("%d transactions followed a commit, want 2: %v", ends, ev)
	}
	if got := readCommitted(t, c.ListenAddrs(), data, 3); !slices.Equal(got, []string{"1", "2", "3"}) {
		t.Fatalf("read_committed: %v", got)
	}
	if strings.Contains(logs.String(), "DescribeTransactions") {
		t.Fatalf("logged that DescribeTransactions is not answered: %s", logs)
	}
}

// A broker that refuses DescribeTransactions (here: not authorized) costs
// the relay nothing but pace: it says so once, its client adds partitions
// itself (transaction version 1, which retries a busy transactional id
// after 2 ms), and every transaction commits.
func TestTxnWithoutDescribeTransactions(t *testing.T) {
	const data, ck = "txn-nodescribe", "txn-nodescribe-ck"
	c, w := watchedCluster(t, data, ck, func([]string) (string, int16) {
		return "", kerr.TransactionalIDAuthorizationFailed.Code
	})
	logs := &relaytest.LogBuffer{}
	p, _ := runTxns(t, txnConfig(c, logs, ck), data, 3)

	ev := w.snapshot()
	if n := strings.Count(strings.Join(ev, " "), "describe:"); n != 1 {
		t.Errorf("%d DescribeTransactions requests, want 1 (the one at Fence): %v", n, ev)
	}
	if !slices.Contains(ev, "add") {
		t.Errorf("no AddPartitionsToTxn: the client should have fallen back to transaction version 1: %v", ev)
	}
	if !p.describeTxnOff.Load() {
		t.Error("awaitCompleted is still on")
	}
	if n := strings.Count(logs.String(), "does not answer DescribeTransactions"); n != 1 {
		t.Errorf("said %d times that DescribeTransactions is not answered, want once: %s", n, logs)
	}
	if got := readCommitted(t, c.ListenAddrs(), data, 3); !slices.Equal(got, []string{"1", "2", "3"}) {
		t.Fatalf("read_committed: %v", got)
	}
}

// TestTxnTimeoutErrorSaysSentSoFar: the halt message counts the events the
// open transaction has sent, not the PostgreSQL transaction's, which has
// not ended.
func TestTxnTimeoutErrorSaysSentSoFar(t *testing.T) {
	err := &TxnTimeoutError{Events: 1234, Open: 61 * time.Second, Timeout: time.Minute}
	if got := err.Error(); !strings.Contains(got, "with 1234 events sent so far and its PostgreSQL transaction has not ended") || !strings.Contains(got, "--txn-timeout 1m0s") {
		t.Fatalf("message %q", got)
	}
}
