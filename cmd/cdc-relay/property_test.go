package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"
)

// propertySeedEnv overrides the crash-consistency test's random seed.
const propertySeedEnv = "CDC_RELAY_PROPERTY_SEED"

// TestCrashConsistency is the crash-consistency property test: under a
// continuous multi-writer load with interleaved transactions, the relay is
// killed with SIGKILL at 20 random moments (a new process takes the slot after
// each) and Kafka is stopped 2–3 times for a few seconds. Afterwards every
// committed outbox id is in Kafka at least once, the first deliveries of each
// aggregate are in the aggregate's commit order, and the slot's
// confirmed_flush_lsn reaches the end of the WAL. The schedule comes from a
// seed printed at the start and in every failure; set CDC_RELAY_PROPERTY_SEED
// to replay it. At-least-once delivery repeats events after a kill: the test
// reports how many.
func TestCrashConsistency(t *testing.T) {
	t.Parallel()
	crashConsistency(t, 20, true, nil)
}

// TestCrashConsistencyExactlyOnce is the same test with --delivery
// exactly-once, 10 kills and 2–3 Kafka outages, read by a read_committed
// consumer: every committed event arrives exactly once (0 lost, 0
// duplicates), in commit order per aggregate.
func TestCrashConsistencyExactlyOnce(t *testing.T) {
	dups, records := crashConsistency(t, 10, false, []string{"--delivery", "exactly-once"}, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if dups != 0 {
		t.Fatalf("%d duplicates in %d records under --delivery exactly-once, read with read_committed", dups, records)
	}
}

// crashConsistency runs the crash test with kills SIGKILLs and the relay
// flags extra, read by a consumer with opts; it returns the duplicates and
// the records read. With own, the broker the plan stops and starts is the
// test's own, and the test runs beside the others; else it is the shared
// one, and the test runs alone. The exactly-once run stays on the shared
// broker: on a broker of its own, beside the other tests, its relays once
// could not read the checkpoint for minutes after a restart (seed
// 8545295622529848553, 2026-12-07; not reproduced alone, not explained).
// On the shared broker it stalled the same way in CI (seeds
// 6052402109968391578, 7510715692368022175): after a kill while Kafka was
// down, every later relay fenced, then found its own checkpoint record in
// a transaction still open, and the read_committed consumer stopped at
// the same place. In the second, the open transaction was one whose
// commit Kafka had acknowledged while the broker was stopping (the relay
// logged it committed and confirmed the slot to its checkpoint), and whose
// markers never reached one data partition and the checkpoint partition: a
// committed transaction left hanging by Kafka, which a relay now says as
// such (checkpoint.Guard's openTxnError). A failure report adds the broker's
// producer states and the transaction's state (describeTxnState) to show
// the coordinator's side.
func crashConsistency(t *testing.T, kills int, own bool, extra []string, opts ...kgo.Opt) (dups, records int) {
	seed := propertySeed(t)
	t.Logf("seed %d (replay with %s=%d)", seed, propertySeedEnv, seed)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d: replay with %s=%d", seed, propertySeedEnv, seed)
		}
	})
	began := time.Now()
	f := newFixture(t, "")
	if own {
		f.ownBroker()
	}
	cr := &crashRun{t: t, seed: seed, f: f, log: newDeliveryLog()}
	cr.conn = connect(t)
	cr.consumer = f.consume("^"+regexp.QuoteMeta(f.topicPrefix)+`\..*`, opts...)
	// A checkpoint topic of its own, as every name here: the shared one can
	// hold a transaction another test's killed exactly-once relay left open.
	cr.ckptTopic = "ckpt-" + f.name
	args := f.args(append([]string{"--checkpoint-topic", cr.ckptTopic}, extra...)...)

	plan := newCrashPlan(rand.New(rand.NewPCG(seed, 0xc0ffee)), kills)
	t.Logf("seed %d: plan: %s", seed, plan)

	var restartBroker func()
	cr.relay = startRelay(t, args)
	cr.relays = append(cr.relays, cr.relay)
	cr.until(60*time.Second, "the first relay to stream", func() bool {
		v, err := cr.relay.metric("cdc_relay_active")
		return err == nil && v == 1
	})
	load := startBackgroundLoad(t, f, loadOptions{Writers: 4, AggregatesPerWriter: 10, MaxTxRows: 30, Seed: seed})

	// The schedule: the waits are drawn from the seed; they are the chaos, not synchronisation.
	killed := 0
	for i, st := range plan.steps {
		timer := time.NewTimer(st.wait)
		<-timer.C
		if err := load.Err(); err != nil {
			cr.fatalf("background load: %v", err)
		}
		cr.log.update(cr.consumer)
		switch st.kind {
		case stepKill:
			cr.checkAlive()
			at := time.Now()
			cr.relay.kill()
			killed++
			confirmed := cr.confirmed()
			cr.killLSNs = append(cr.killLSNs, confirmed)
			if killed < plan.kills {
				cr.relay = startRelay(t, args)
				cr.relays = append(cr.relays, cr.relay)
			}
			t.Logf("seed %d: %6.1fs kill %2d (step %d, took %s): confirmed_flush_lsn %X, %d ids delivered so far", seed,
				time.Since(began).Seconds(), killed, i, time.Since(at).Round(time.Millisecond), confirmed, len(cr.log.first))
		case stepBrokerStop:
			at := time.Now()
			restartBroker = f.stopBroker()
			t.Logf("seed %d: %6.1fs broker stopped (took %s)", seed, time.Since(began).Seconds(), time.Since(at).Round(time.Millisecond))
		case stepBrokerStart:
			at := time.Now()
			restartBroker()
			t.Logf("seed %d: %6.1fs broker restarted (took %s)", seed, time.Since(began).Seconds(), time.Since(at).Round(time.Millisecond))
		}
	}

	if err := load.Stop(); err != nil {
		cr.fatalf("background load: %v", err)
	}
	committed := load.Committed()
	end := cr.walEnd()
	cr.log.update(cr.consumer)
	beforeFinal := len(cr.log.first)
	t.Logf("seed %d: %6.1fs load stopped: %d events in %d transactions (%d held open across another's commit), WAL end %X; %d ids delivered during the chaos",
		seed, time.Since(began).Seconds(), len(committed), load.txs.Load(), load.interleaved.Load(), end, beforeFinal)
	if load.interleaved.Load() == 0 {
		cr.fatalf("no transaction was held open across another's commit: the load did not interleave")
	}

	// A final relay delivers the rest.
	cr.relay = startRelay(t, args)
	cr.relays = append(cr.relays, cr.relay)
	finalStart := time.Now()
	ok := cr.poll(120*time.Second, func() bool {
		cr.log.update(cr.consumer)
		for _, e := range committed {
			if _, ok := cr.log.first[e.ID]; !ok {
				return false
			}
		}
		return true
	})
	if !ok {
		cr.fatalf("%s", cr.describeMissing(committed))
	}
	t.Logf("seed %d: %6.1fs every committed id delivered (%.1fs after the final relay started)", seed,
		time.Since(began).Seconds(), time.Since(finalStart).Seconds())
	var confirmed uint64
	if !cr.poll(30*time.Second, func() bool { confirmed = cr.confirmed(); return confirmed >= end }) {
		cr.fatalf("confirmed_flush_lsn %X did not reach the WAL end %X after the load", confirmed, end)
	}
	cr.checkAlive()
	if code := cr.relay.terminate(); code != 0 {
		cr.fatalf("final relay: exit code after SIGTERM = %d, want 0", code)
	}
	cr.log.update(cr.consumer)

	cr.checkDeliveries(committed)
	dups = cr.log.records - len(cr.log.first)
	advanced := 0 // kills after which the slot had moved on since the previous one: the relays made progress
	for i := 1; i < len(cr.killLSNs); i++ {
		if cr.killLSNs[i] > cr.killLSNs[i-1] {
			advanced++
		}
	}
	t.Logf("seed %d: %.1fs: %d events, %d records in Kafka, %d duplicates after %d kills (confirmed LSN advanced between %d of them) and %d Kafka outages",
		seed, time.Since(began).Seconds(), len(committed), cr.log.records, dups, killed, advanced, plan.outages)
	guarded := 0
	for _, r := range cr.relays {
		guarded += strings.Count(r.Output(), "producer id changed within a transaction")
	}
	if guarded > 0 {
		t.Logf("seed %d: %d Kafka transactions aborted because the client's producer id changed inside them", seed, guarded)
	}
	return dups, cr.log.records
}

// propertySeed returns CDC_RELAY_PROPERTY_SEED, or a random seed.
func propertySeed(t *testing.T) uint64 {
	t.Helper()
	s := os.Getenv(propertySeedEnv)
	if s == "" {
		return rand.Uint64()
	}
	seed, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		t.Fatalf("%s=%q: %v", propertySeedEnv, s, err)
	}
	return seed
}

type crashStepKind int

const (
	stepKill crashStepKind = iota
	stepBrokerStop
	stepBrokerStart
)

// crashStep is one chaos action, taken wait after the previous one.
type crashStep struct {
	wait time.Duration
	kind crashStepKind
}

// crashPlan is the chaos schedule drawn from the seed.
type crashPlan struct {
	steps   []crashStep
	kills   int
	outages int
}

// newCrashPlan draws kills SIGKILLs 1–4 s apart, and 2–3 Kafka outages of
// 3–5 s between them; in about half of the outages a kill falls inside the
// window, so a new relay starts while Kafka is down.
func newCrashPlan(rng *rand.Rand, kills int) crashPlan {
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo))) }
	p := crashPlan{kills: kills, outages: 2 + rng.IntN(2)}
	// Outages start after kills that are neither the first two nor the last
	// two, and not adjacent (a kill inside a window belongs to it).
	// Greedy draws can leave no room for the last outage (3 and 6 of
	// 2..7 block every other kill): start again then.
	after := map[int]bool{}
	for draws := 0; len(after) < p.outages; draws++ {
		if draws == 64 {
			clear(after)
			draws = 0
		}
		k := 2 + rng.IntN(kills-4)
		if !after[k-1] && !after[k] && !after[k+1] {
			after[k] = true
		}
	}
	for k := 1; k <= kills; k++ {
		p.steps = append(p.steps, crashStep{wait: between(time.Second, 4*time.Second), kind: stepKill})
		if !after[k] {
			continue
		}
		down := between(3*time.Second, 5*time.Second)
		p.steps = append(p.steps, crashStep{wait: between(200*time.Millisecond, 2*time.Second), kind: stepBrokerStop})
		if rng.IntN(2) == 0 {
			// The next kill happens while Kafka is down.
			in := between(500*time.Millisecond, down-500*time.Millisecond)
			k++
			p.steps = append(p.steps, crashStep{wait: in, kind: stepKill}, crashStep{wait: down - in, kind: stepBrokerStart})
		} else {
			p.steps = append(p.steps, crashStep{wait: down, kind: stepBrokerStart})
		}
	}
	return p
}

func (p crashPlan) String() string {
	var b strings.Builder
	var total time.Duration
	for _, st := range p.steps {
		total += st.wait
		fmt.Fprintf(&b, "+%.1fs %s ", st.wait.Seconds(), [...]string{"kill", "kafka-down", "kafka-up"}[st.kind])
	}
	fmt.Fprintf(&b, "(%d kills, %d outages, %.0fs of waits)", p.kills, p.outages, total.Seconds())
	return b.String()
}

// crashRun is the state of one TestCrashConsistency run.
type crashRun struct {
	t        *testing.T
	seed     uint64
	f        *fixture
	conn     *pgx.Conn
	consumer *consumer
	log      *deliveryLog
	relay    *relay   // the current relay process
	relays   []*relay // every relay started, for the diagnosis of a failure
	killLSNs []uint64 // confirmed_flush_lsn right after each kill
	// ckptTopic is the relays' checkpoint topic, the test's own.
	ckptTopic string
}

// fatalf fails the test with the seed in front of the message.
func (cr *crashRun) fatalf(format string, args ...any) {
	cr.t.Helper()
	cr.t.Fatalf("seed %d: "+format, append([]any{cr.seed}, args...)...)
}

// poll reports whether cond became true within timeout.
func (cr *crashRun) poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(200 * time.Millisecond) // polling interval, not synchronisation
	}
	return true
}

// until fails the test unless cond becomes true within timeout.
func (cr *crashRun) until(timeout time.Duration, what string, cond func() bool) {
	cr.t.Helper()
	if !cr.poll(timeout, cond) {
		cr.fatalf("timed out after %s waiting for %s", timeout, what)
	}
}

// checkAlive fails the test if the current relay exited by itself: it must
// ride out Kafka outages and a predecessor's slot without a restart by hand.
func (cr *crashRun) checkAlive() {
	cr.t.Helper()
	select {
	case <-cr.relay.done:
		cr.fatalf("the relay exited by itself with code %d; output:\n%s", cr.relay.exitCode, tailString(cr.relay.Output(), 4000))
	default:
	}
}

// confirmed reads the slot's confirmed_flush_lsn (0 while it has none).
func (cr *crashRun) confirmed() uint64 {
	cr.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var s *string
	if err := cr.conn.QueryRow(ctx, "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1", cr.f.slot).Scan(&s); err != nil || s == nil {
		return 0
	}
	return parseLSN(cr.t, *s)
}

// walEnd reads the current WAL insert position.
func (cr *crashRun) walEnd() uint64 {
	cr.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var s string
	if err := cr.conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&s); err != nil {
		cr.fatalf("read the WAL end: %v", err)
	}
	return parseLSN(cr.t, s)
}

// describeMissing explains which committed ids never reached Kafka.
func (cr *crashRun) describeMissing(committed []committedEvent) string {
	var missing []committedEvent
	for _, e := range committed {
		if _, ok := cr.log.first[e.ID]; !ok {
			missing = append(missing, e)
		}
	}
	sort.Slice(missing, func(i, j int) bool { return missing[i].ID < missing[j].ID })
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d committed ids never reached Kafka (%d records consumed); confirmed_flush_lsn now %X, after each kill %X; first missing:",
		len(missing), len(committed), cr.log.records, cr.confirmed(), cr.killLSNs)
	// Whether a read_uncommitted consumer sees them tells a record never
	// written from one a read_committed consumer does not return.
	raw := cr.f.consume("^" + regexp.QuoteMeta(cr.f.topicPrefix) + `\..*`)
	rawIDs := map[string]record{}
	cr.poll(30*time.Second, func() bool {
		raw.mu.Lock()
		defer raw.mu.Unlock()
		for _, r := range raw.recs {
			rawIDs[r.Headers["id"]] = r
		}
		return len(raw.recs) >= cr.log.records
	})
	var firstRaw *record
	for _, e := range missing[:min(len(missing), 10)] {
		fmt.Fprintf(&b, "\n  id %d aggregate %s seq %d writer %d, its commit ends at or before %X", e.ID, e.Aggregate, e.Seq, e.Writer, e.TxEnd)
		if r, ok := rawIDs[strconv.FormatInt(e.ID, 10)]; ok {
			fmt.Fprintf(&b, "; read_uncommitted sees it at partition %d offset %d", r.Partition, r.Offset)
			if firstRaw == nil {
				firstRaw = &r
			}
		}
	}
	if firstRaw != nil {
		b.WriteString(dumpPartition(cr.t, cr.f.brokerAddr(), firstRaw.Topic, firstRaw.Partition, firstRaw.Offset-30, 90))
		b.WriteString(describeTxnState(cr.f.brokerAddr(), []string{firstRaw.Topic, cr.ckptTopic}, cr.txnIDs()))
		b.WriteString(dumpTail(cr.t, cr.f.brokerAddr(), cr.ckptTopic, 0, 40))
	}
	// What the relays said of their Kafka transactions.
	for i, r := range cr.relays {
		for _, line := range strings.Split(r.Output(), "\n") {
			if strings.Contains(line, "kafka transaction") || strings.Contains(line, "exactly-once") || strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
				fmt.Fprintf(&b, "\n  relay %d: %s", i, line)
			}
		}
	}
	return b.String()
}

// dumpPartition lists n records of a partition from offset from, control
// records and producer ids included, read_uncommitted.
func dumpPartition(t *testing.T, addr, topic string, partition int32, from int64, n int) string {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.KeepControlRecords(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().At(max(from, 0))}}))
	if err != nil {
		return err.Error()
	}
	defer cl.Close()
	var b strings.Builder
	fmt.Fprintf(&b, "\n  %s[%d] from offset %d:", topic, partition, from)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := 0
	for got < n && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			got++
			id := ""
			for _, h := range r.Headers {
				if h.Key == "id" {
					id = string(h.Value)
				}
			}
			kind := "data"
			if r.Attrs.IsControl() {
				kind = "control"
				if len(r.Key) >= 4 {
					kind = map[byte]string{0: "ABORT", 1: "COMMIT"}[r.Key[3]]
				}
			}
			fmt.Fprintf(&b, "\n    @%d pid %d epoch %d txn %v %s id %s", r.Offset, r.ProducerID, r.ProducerEpoch, r.Attrs.IsTransactional(), kind, id)
		})
	}
	return b.String()
}

// checkDeliveries checks topic, key and partition of every record, and that
// each aggregate's first deliveries are in its commit order.
func (cr *crashRun) checkDeliveries(committed []committedEvent) {
	cr.t.Helper()
	wantTopic := cr.f.topic("Order")
	for topic, n := range cr.log.topics {
		if topic != wantTopic {
			cr.fatalf("%d records in %s; every event is valid and belongs in %s", n, topic, wantTopic)
		}
	}
	if len(cr.log.malformed) > 0 {
		cr.fatalf("%d records without a numeric id header, e.g. %s", len(cr.log.malformed), cr.log.malformed[0])
	}
	for key, ps := range cr.log.partitions {
		if len(ps) > 1 {
			cr.fatalf("aggregate %s was written to partitions %v: one aggregate must stay in one partition", key, ps)
		}
	}
	byAgg := map[string][]committedEvent{}
	for _, e := range committed {
		byAgg[e.Aggregate] = append(byAgg[e.Aggregate], e)
	}
	for agg, evs := range byAgg {
		sort.Slice(evs, func(i, j int) bool { return evs[i].Seq < evs[j].Seq })
		for i, e := range evs {
			if e.Seq != i {
				cr.fatalf("test bug: aggregate %s has sequence %d at position %d", agg, e.Seq, i)
			}
			rec := cr.log.first[e.ID]
			if rec.Key != agg {
				cr.fatalf("id %d: key %q, want its aggregate %q", e.ID, rec.Key, agg)
			}
			if i == 0 {
				continue
			}
			prev := cr.log.first[evs[i-1].ID]
			if rec.Offset <= prev.Offset {
				cr.fatalf("aggregate %s out of order: seq %d (id %d) first delivered at partition %d offset %d, before seq %d (id %d) at offset %d",
					agg, e.Seq, e.ID, rec.Partition, rec.Offset, i-1, evs[i-1].ID, prev.Offset)
			}
		}
	}
}

// deliveryLog indexes what the consumer has read, incrementally: each
// record once by topic, partition and offset (a consumer re-read is not a
// duplicate), and each id's first delivery (its lowest offset).
type deliveryLog struct {
	cursor     int
	seen       map[recordPos]bool
	first      map[int64]record
	records    int // distinct records
	topics     map[string]int
	partitions map[string][]int32 // key → partitions it was written to
	malformed  []string
}

type recordPos struct {
	topic     string
	partition int32
	offset    int64
}

func newDeliveryLog() *deliveryLog {
	return &deliveryLog{seen: map[recordPos]bool{}, first: map[int64]record{}, topics: map[string]int{}, partitions: map[string][]int32{}}
}

// update takes in the records the consumer read since the last call.
func (d *deliveryLog) update(c *consumer) {
	c.mu.Lock()
	fresh := append([]record(nil), c.recs[d.cursor:]...)
	d.cursor = len(c.recs)
	c.mu.Unlock()
	for _, r := range fresh {
		pos := recordPos{r.Topic, r.Partition, r.Offset}
		if d.seen[pos] {
			continue
		}
		d.seen[pos] = true
		d.records++
		d.topics[r.Topic]++
		if ps := d.partitions[r.Key]; !containsPartition(ps, r.Partition) {
			d.partitions[r.Key] = append(ps, r.Partition)
		}
		id, err := strconv.ParseInt(r.Headers["id"], 10, 64)
		if err != nil {
			d.malformed = append(d.malformed, fmt.Sprintf("%s/%d@%d headers %v", r.Topic, r.Partition, r.Offset, r.Headers))
			continue
		}
		r.Value = nil // not needed; keeps memory flat
		if f, ok := d.first[id]; !ok || r.Offset < f.Offset {
			d.first[id] = r
		}
	}
}

func containsPartition(ps []int32, p int32) bool {
	for _, x := range ps {
		if x == p {
			return true
		}
	}
	return false
}

// TestCrashPlan: every seed gives a plan, with the kills asked for and its
// outages after kills that are neither among the first two nor the last
// two, nor adjacent (seed 1733717534187702324 once drew 3 and 6 of 2..7
// and looped for ever looking for a third).
func TestCrashPlan(t *testing.T) {
	seeds := []uint64{1733717534187702324}
	for s := range uint64(5000) {
		seeds = append(seeds, s*0x9e3779b97f4a7c15)
	}
	for _, seed := range seeds {
		p := newCrashPlan(rand.New(rand.NewPCG(seed, 0xc0ffee)), 10)
		kills, stops, starts := 0, 0, 0
		var stoppedAfter []int
		for _, st := range p.steps {
			switch st.kind {
			case stepKill:
				kills++
			case stepBrokerStop:
				stops++
				stoppedAfter = append(stoppedAfter, kills)
			case stepBrokerStart:
				starts++
			}
		}
		if kills != 10 || stops != p.outages || starts != p.outages || p.outages < 2 || p.outages > 3 {
			t.Fatalf("seed %d: %d kills, %d outages (%d stops, %d starts)", seed, kills, p.outages, stops, starts)
		}
		for i, k := range stoppedAfter {
			if k < 2 || k > 7 || i > 0 && k-stoppedAfter[i-1] < 2 {
				t.Fatalf("seed %d: outages after kills %v", seed, stoppedAfter)
			}
		}
	}
}
