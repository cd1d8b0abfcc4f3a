package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestMedian checks odd, even and empty inputs.
func TestMedian(t *testing.T) {
	tests := []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
	}
	for _, tt := range tests {
		if got := median(tt.in); got != tt.want {
			t.Errorf("median(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

// TestLSN round-trips PostgreSQL's text form.
func TestLSN(t *testing.T) {
	for _, s := range []string{"0/0", "0/19289C0", "1/829DFB8", "FFFFFFFF/FFFFFFFF"} {
		l, err := parseLSN(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := l.String(); got != s {
			t.Errorf("parseLSN(%q).String() = %q", s, got)
		}
	}
	if _, err := parseLSN("nope"); err == nil {
		t.Error("parseLSN(nope) succeeded")
	}
}

// TestProc reads this process's own figures. The benchmark reads /proc, so
// it runs on Linux only, and so does this test: without /proc it fails.
func TestProc(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Fatalf("no /proc (the benchmark measures CPU from /proc/<pid>/stat, on Linux only): %v", err)
	}
	if _, err := cpuSeconds(os.Getpid()); err != nil {
		t.Error(err)
	}
	for _, key := range []string{"VmRSS", "VmHWM"} {
		kb, err := statusKB(os.Getpid(), key)
		if err != nil || kb <= 0 {
			t.Errorf("%s = %d, %v", key, kb, err)
		}
	}
	if busySeconds() <= 0 {
		t.Error("busySeconds() <= 0")
	}
}

// TestRates derives the figures of a 2-second drain of 200k rows.
func TestRates(t *testing.T) {
	load := loadInfo{Rows: 200000, WALBytes: 100e6, PayloadBytes: 60e6}
	d := drainResult{Rows: 200000, Seconds: 2, ClientCPUSeconds: 1, WalsenderCPUSeconds: 0.5, PeakRSSKB: 2048}
	got := ratesOf(d, load)
	want := rates{EventsPerSecond: 100000, WALMBPerSecond: 50, PayloadMBPerSecond: 30, ClientCPUPer100k: 0.5, WalsenderCPUPer100k: 0.25, PeakRSSMB: 2}
	if got != want {
		t.Errorf("ratesOf = %+v, want %+v", got, want)
	}
}

// TestPct checks nearest-rank quantiles.
func TestPct(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}
	for _, tt := range []struct{ q, want float64 }{{0.5, 5}, {0.99, 10}, {1, 10}, {0.1, 1}} {
		if got := pct(xs, tt.q); got != tt.want {
			t.Errorf("pct(%v) = %v, want %v", tt.q, got, tt.want)
		}
	}
	if pct(nil, 0.5) != 0 {
		t.Error("pct(nil) != 0")
	}
}

// TestParseRates checks --rates.
func TestParseRates(t *testing.T) {
	rs, err := parseRates("1000, 5000,20000")
	if err != nil || len(rs) != 3 || rs[0] != 1000 || rs[2] != 20000 {
		t.Fatalf("parseRates = %v, %v", rs, err)
	}
	for _, bad := range []string{"", "0", "1000,x", "-5"} {
		if _, err := parseRates(bad); err == nil {
			t.Errorf("parseRates(%q) accepted", bad)
		}
	}
}

// TestSumOffsets counts records added since a baseline, also in partitions
// the baseline did not know.
func TestSumOffsets(t *testing.T) {
	ends := map[int32]int64{0: 150, 1: 30}
	if got := sumOffsets(ends, nil); got != 180 {
		t.Errorf("sumOffsets(nil) = %d, want 180", got)
	}
	if got := sumOffsets(ends, map[int32]int64{0: 100}); got != 80 {
		t.Errorf("sumOffsets(from) = %d, want 80", got)
	}
}

// TestDebeziumRatios checks the ratios and a zero divisor.
func TestDebeziumRatios(t *testing.T) {
	ev, rss, cpu := debeziumRatios(rates{EventsPerSecond: 100, PeakRSSMB: 50, ClientCPUPer100k: 0.5}, rates{EventsPerSecond: 20, PeakRSSMB: 500, ClientCPUPer100k: 2})
	if ev != 5 || rss != 10 || cpu != 4 {
		t.Errorf("debeziumRatios = %v, %v, %v, want 5, 10, 4", ev, rss, cpu)
	}
	if ev, _, _ := debeziumRatios(rates{EventsPerSecond: 1}, rates{}); ev != 0 {
		t.Errorf("debeziumRatios with no Debezium figures = %v, want 0", ev)
	}
}

// TestConnectorProperties checks the EventRouter's column mapping and that
// --debezium-connector-opts replaces or adds properties.
func TestConnectorProperties(t *testing.T) {
	props := connectorProperties("s1", 5432, "bench", [][2]string{{"snapshot.mode", "never"}, {"poll.interval.ms", "10"}})
	got := map[string]string{}
	for _, kv := range props {
		if _, dup := got[kv[0]]; dup {
			t.Errorf("property %s appears twice", kv[0])
		}
		got[kv[0]] = kv[1]
	}
	want := map[string]string{
		"slot.name":        "s1",
		"database.port":    "5432",
		"publication.name": publication,
		"snapshot.mode":    "never",
		"poll.interval.ms": "10",
		"transforms.outbox.table.field.event.key":     "aggregate_id",
		"transforms.outbox.route.by.field":            "aggregate_type",
		"transforms.outbox.table.field.event.payload": "payload",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}

// TestParseStatCPU reads utime and stime after a command name with spaces
// and parentheses, as a walsender's can be.
func TestParseStatCPU(t *testing.T) {
	stat := "4242 (postgres: walsender (x) 1) S 1 4242 4242 0 -1 4194560 1200 0 0 0 250 75 0 0 20 0 1 0 100 200000000 3000 18446744073709551615\n"
	got, err := parseStatCPU([]byte(stat))
	if err != nil || got != 3.25 {
		t.Errorf("parseStatCPU = %v, %v, want 3.25 (325 ticks at %d Hz)", got, err, userHZ)
	}
	for _, bad := range []string{"", "4242 postgres S 1", "4242 (x) S 1 2 3", "4242 (x) S 1 4242 4242 0 -1 4194560 1200 0 0 0 25x 75 0"} {
		if _, err := parseStatCPU([]byte(bad)); err == nil {
			t.Errorf("parseStatCPU(%q) accepted", bad)
		}
	}
}

// TestHistogramQuantile interpolates inside buckets as histogram_quantile
// does, subtracts an earlier scrape and handles the +Inf bucket.
func TestHistogramQuantile(t *testing.T) {
	text := []byte(`# HELP cdc_relay_stage_seconds Time an event spends in each stage.
# TYPE cdc_relay_stage_seconds histogram
cdc_relay_stage_seconds_bucket{stage="commit_to_read",le="0.001"} 10
cdc_relay_stage_seconds_bucket{stage="commit_to_read",le="0.002"} 60
cdc_relay_stage_seconds_bucket{stage="commit_to_read",le="0.004"} 100
cdc_relay_stage_seconds_bucket{stage="commit_to_read",le="+Inf"} 100
cdc_relay_stage_seconds_sum{stage="commit_to_read"} 0.2
cdc_relay_stage_seconds_count{stage="commit_to_read"} 100
cdc_relay_stage_seconds_bucket{stage="produce_to_ack",le="0.001"} 0
cdc_relay_stage_seconds_bucket{stage="produce_to_ack",le="0.002"} 1
cdc_relay_stage_seconds_bucket{stage="produce_to_ack",le="0.004"} 2
cdc_relay_stage_seconds_bucket{stage="produce_to_ack",le="+Inf"} 4
cdc_relay_produce_latency_seconds_bucket{le="0.001"} 7
`)
	hs, err := parseHistograms(text, "cdc_relay_stage_seconds", "stage")
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 2 {
		t.Fatalf("parsed %d stages, want 2: %v", len(hs), hs)
	}
	c := hs["commit_to_read"]
	for _, tt := range []struct{ q, want float64 }{
		{0.05, 0.0005}, // rank 5 of the first 10, from 0
		{0.5, 0.0018},  // rank 50: 40 of the 50 in (1 ms, 2 ms]
		{0.99, 0.00395},
		{1, 0.004},
	} {
		if got := c.quantile(tt.q); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("commit_to_read quantile(%v) = %v, want %v", tt.q, got, tt.want)
		}
	}
	// Half in +Inf: the p99 is the largest finite bound.
	if got := hs["produce_to_ack"].quantile(0.99); got != 0.004 {
		t.Errorf("produce_to_ack p99 = %v, want 0.004", got)
	}
	earlier := histogram{bounds: c.bounds, counts: []float64{10, 20, 20, 20}}
	d := c.sub(earlier)
	if d.total() != 80 {
		t.Errorf("delta total = %v, want 80", d.total())
	}
	// 80 observations: 0 to 1 ms, 40 to 2 ms, 40 to 4 ms; rank 40 is 2 ms.
	if got := d.quantile(0.5); math.Abs(got-0.002) > 1e-12 {
		t.Errorf("delta p50 = %v, want 0.002", got)
	}
	if got := (histogram{}).quantile(0.99); got != 0 {
		t.Errorf("empty quantile = %v, want 0", got)
	}
	if _, err := parseHistograms([]byte(`x_bucket{stage="a",le="0.1"} 1`+"\n"), "x", "stage"); err == nil {
		t.Error("a histogram without a +Inf bucket was accepted")
	}
	if l, err := parseLabels(`a="x\"y",b="1,2"`); err != nil || l["a"] != `x"y` || l["b"] != "1,2" {
		t.Errorf("parseLabels = %v, %v", l, err)
	}
}

// TestParseRelayScrape reads the stage and Kafka transaction figures from
// one /metrics text, as the latency window's two scrapes do.
func TestParseRelayScrape(t *testing.T) {
	text := []byte(`cdc_relay_stage_seconds_bucket{stage="commit_to_read",le="0.001"} 3
cdc_relay_stage_seconds_bucket{stage="commit_to_read",le="+Inf"} 4
cdc_relay_kafka_transactions_total{result="aborted"} 1
cdc_relay_kafka_transactions_total{result="committed"} 40
cdc_relay_kafka_transaction_records_bucket{le="2"} 10
cdc_relay_kafka_transaction_records_bucket{le="+Inf"} 40
cdc_relay_kafka_transaction_records_sum 220
cdc_relay_kafka_transaction_records_count 40
cdc_relay_kafka_transaction_seconds_bucket{phase="commit",le="0.01"} 30
cdc_relay_kafka_transaction_seconds_bucket{phase="commit",le="0.02"} 40
cdc_relay_kafka_transaction_seconds_bucket{phase="commit",le="+Inf"} 40
cdc_relay_kafka_transaction_seconds_bucket{phase="open",le="0.01"} 40
cdc_relay_kafka_transaction_seconds_bucket{phase="open",le="+Inf"} 40
cdc_relay_kafka_transaction_seconds_bucket{phase="await",le="0.001"} 20
cdc_relay_kafka_transaction_seconds_bucket{phase="await",le="0.002"} 40
cdc_relay_kafka_transaction_seconds_bucket{phase="await",le="+Inf"} 40
`)
	sc, err := parseRelayScrape(text)
	if err != nil {
		t.Fatal(err)
	}
	if sc.txns != 40 || sc.txnRecords != 220 {
		t.Errorf("transactions %v with %v records, want 40 with 220 (the committed ones: the records histogram's count and sum)", sc.txns, sc.txnRecords)
	}
	if got := sc.stages["commit_to_read"].total(); got != 4 {
		t.Errorf("commit_to_read observations = %v, want 4", got)
	}
	// 40 commits, 30 up to 10 ms: the p99 (rank 39.6) lies in (10, 20] ms.
	if got := sc.txn["commit"].quantile(0.99); got <= 0.01 || got > 0.02 {
		t.Errorf("commit p99 = %v, want in (0.01, 0.02]", got)
	}
	if got := sc.txn["open"].quantile(0.99); got > 0.01 {
		t.Errorf("open p99 = %v, want at most 0.01", got)
	}
	if got := sc.txn["await"].quantile(0.99); got <= 0.001 || got > 0.002 {
		t.Errorf("await p99 = %v, want in (0.001, 0.002]", got)
	}
	if sc, err := parseRelayScrape([]byte(`cdc_relay_stage_seconds_bucket{stage="a",le="+Inf"} 1` + "\n")); err != nil || sc.txns != 0 {
		t.Errorf("a relay without Kafka transactions: %v, %v", sc.txns, err)
	}
}

// TestReadPgoutput parses pg_recvlogical's output of a pgoutput stream:
// relation, begin, two inserts (the second's id followed by a newline byte
// inside a column), commit, each message followed by a newline.
func TestReadPgoutput(t *testing.T) {
	var b bytes.Buffer
	be := func(v any) { binary.Write(&b, binary.BigEndian, v) }
	msg := func(f func()) { f(); b.WriteByte('\n') }
	msg(func() { // Relation
		b.WriteByte('R')
		be(uint32(16384))
		b.WriteString("public\x00outbox\x00")
		b.WriteByte('d')
		be(int16(2))
		b.WriteByte(1)
		b.WriteString("id\x00")
		be(uint32(20))
		be(int32(-1))
		b.WriteByte(0)
		b.WriteString("payload\x00")
		be(uint32(3802))
		be(int32(-1))
	})
	msg(func() { b.WriteByte('B'); b.Write(make([]byte, 20)) })
	insert := func(id, payload string) {
		msg(func() {
			b.WriteByte('I')
			be(uint32(16384))
			b.WriteByte('N')
			be(int16(3))
			b.WriteByte('t')
			be(int32(len(id)))
			b.WriteString(id)
			b.WriteByte('t')
			be(int32(len(payload)))
			b.WriteString(payload)
			b.WriteByte('n')
		})
	}
	insert("41", `{"a":1}`)
	insert("42", "line\nbreak")
	msg(func() { b.WriteByte('C'); b.Write(make([]byte, 25)) })
	whole := bytes.Clone(b.Bytes())
	var ids []int64
	if err := readPgoutput(bufio.NewReader(&b), func(id int64) { ids = append(ids, id) }); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 2 || ids[0] != 41 || ids[1] != 42 {
		t.Errorf("ids = %v, want [41 42]", ids)
	}
	if err := readPgoutput(bufio.NewReader(bytes.NewReader([]byte("U\n"))), func(int64) {}); err == nil || cutShort(err) {
		t.Errorf("an update message: %v, want an error that is not a stream cut short", err)
	}
	if err := readPgoutput(bufio.NewReader(bytes.NewReader([]byte("B\x00\x00"))), func(int64) {}); err == nil || !cutShort(err) {
		t.Errorf("a truncated begin message: %v, want a stream cut short", err)
	}
	// pg_recvlogical killed while it wrote an insert (the anchor's stop):
	// every cut inside a message reads as cut short.
	for n := 1; n < len(whole); n++ {
		if whole[n-1] == '\n' {
			continue // a cut between messages is a clean end
		}
		if err := readPgoutput(bufio.NewReader(bytes.NewReader(whole[:n])), func(int64) {}); !cutShort(err) {
			t.Fatalf("stream cut after %d of %d bytes: %v, want a stream cut short", n, len(whole), err)
		}
	}
}

// TestDeliveryGoals checks the CPU ratios and the anchor goals by mode.
func TestDeliveryGoals(t *testing.T) {
	total, after := cpuRatios(drainResult{ClientCPUSeconds: 3, StartupCPUSeconds: 0.6, WalsenderCPUSeconds: 2.4})
	if total != 1.25 || after != 1 {
		t.Errorf("cpuRatios = %v, %v, want 1.25, 1", total, after)
	}
	if total, _ := cpuRatios(drainResult{ClientCPUSeconds: 1}); total != 0 {
		t.Errorf("cpuRatios without a walsender = %v, want 0", total)
	}
	if anchorGoal(atLeastOnce) != 10 || anchorGoal(exactlyOnce) != 25 {
		t.Errorf("anchorGoal = %v, %v, want 10, 25", anchorGoal(atLeastOnce), anchorGoal(exactlyOnce))
	}
}

// TestFillWindows checks that a result takes the anchor's latencies from
// the anchor's window and the relay's from its own, as --anchor alternate
// measures them one after the other.
func TestFillWindows(t *testing.T) {
	const ms = int64(1e6)
	ev := newEventTimes(100, 8) // 106 and 107 never commit
	// ids 100-102 commit in the anchor's window [0, 10 ms), only the anchor
	// sees them; 103-105 in the relay's [20, 30 ms), only the consumer does,
	// 105 never.
	for i, c := range []int64{1, 2, 3, 21, 22, 23} {
		ev.commit[i].Store(c * ms)
		ev.commitDur[i].Store(ms)
	}
	for i, lat := range []int64{4, 5, 6} {
		ev.anchor[i].Store(ev.commit[i].Load() + lat*ms)
	}
	for i, lat := range []int64{30, 40} {
		ev.recv[3+i].Store(ev.commit[3+i].Load() + lat*ms)
		ev.append[3+i].Store(ev.commit[3+i].Load() + lat*ms)
	}
	r := latencyResult{
		anc:  windowSample{win: window{0, 10 * ms}, busy: 0.01, walsenderCPU: 0.003},
		tool: windowSample{win: window{20 * ms, 30 * ms}, busy: 0.015, toolCPU: 0.002},
	}
	r.fill(ev)
	if r.AnchorEvents != 3 || r.AnchorMissing != 0 || r.AnchorP99Ms != 6 || r.AnchorP50Ms != 5 {
		t.Errorf("anchor: events %d, missing %d, p50 %v, p99 %v; want 3, 0, 5, 6", r.AnchorEvents, r.AnchorMissing, r.AnchorP50Ms, r.AnchorP99Ms)
	}
	if r.Events != 3 || r.Missing != 1 || r.P99Ms != 40 || r.P50Ms != 30 {
		t.Errorf("relay: events %d, missing %d, p50 %v, p99 %v; want 3, 1, 30, 40", r.Events, r.Missing, r.P50Ms, r.P99Ms)
	}
	if r.AnchorMachineBusyCPUs != 1 || r.MachineBusyCPUs != 1.5 {
		t.Errorf("busy CPUs anchor %v, relay %v; want 1, 1.5", r.AnchorMachineBusyCPUs, r.MachineBusyCPUs)
	}
	if got := r.AnchorWalsenderCPUPer100k; math.Abs(got-100) > 1e-9 {
		t.Errorf("anchor walsender CPU s/100k = %v, want 100", got)
	}
	if r.StageP99Ms != nil {
		t.Errorf("stage p99s %v without a scrape, want none", r.StageP99Ms)
	}
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		seen []atomic.Int64
		win  window
		want int
	}{
		{"anchor window", ev.anchor, r.anc.win, 0},
		{"relay window", ev.recv, r.tool.win, 1},
		{"every commit, by the consumer", ev.recv, window{0, math.MaxInt64}, 4},
	} {
		if got := waitSeen(ctx, ev, tt.seen, tt.win, 0); got != tt.want {
			t.Errorf("waitSeen(%s) = %d missing, want %d", tt.name, got, tt.want)
		}
	}
}

// TestAnchorFlag checks --anchor's default and that a wrong value is
// refused.
func TestAnchorFlag(t *testing.T) {
	rel := t.TempDir() + "/relay"
	if err := os.WriteFile(rel, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	o, err := parseFlags([]string{"--relay", rel})
	if err != nil || o.anchor != anchorAlternate {
		t.Errorf("default --anchor = %q, %v; want %q", o.anchor, err, anchorAlternate)
	}
	if o, err = parseFlags([]string{"--relay", rel, "--anchor", "beside"}); err != nil || o.anchor != anchorBeside {
		t.Errorf("--anchor beside = %q, %v", o.anchor, err)
	}
	if _, err := parseFlags([]string{"--relay", rel, "--anchor", "together"}); err == nil {
		t.Error("--anchor together accepted")
	}
}

// TestDeliveryAndIdleFlags checks --delivery (both modes by default, in
// the order given, each once) and --idle (a minute by default, 0 skips).
func TestDeliveryAndIdleFlags(t *testing.T) {
	rel := t.TempDir() + "/relay"
	if err := os.WriteFile(rel, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	o, err := parseFlags([]string{"--relay", rel})
	if want := []string{atLeastOnce, exactlyOnce}; err != nil || !slices.Equal(o.deliveries, want) || o.idle != time.Minute {
		t.Errorf("defaults: --delivery %v, --idle %v, %v; want %v and 1m", o.deliveries, o.idle, err, want)
	}
	o, err = parseFlags([]string{"--relay", rel, "--delivery", "exactly-once, at-least-once", "--idle", "0"})
	if want := []string{exactlyOnce, atLeastOnce}; err != nil || !slices.Equal(o.deliveries, want) || o.idle != 0 {
		t.Errorf("--delivery exactly-once,at-least-once --idle 0: %v, %v, %v", o.deliveries, o.idle, err)
	}
	for _, bad := range [][]string{{"--delivery", "at-most-once"}, {"--delivery", "exactly-once,exactly-once"}, {"--delivery", ""}, {"--idle", "-1s"}} {
		if _, err := parseFlags(append([]string{"--relay", rel}, bad...)); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// TestSchedStat checks that the idle window's CPU reading sees this
// process's own work, and is 0 for no process.
func TestSchedStat(t *testing.T) {
	if cpu, runs := schedStat(0); cpu != 0 || runs != 0 {
		t.Errorf("schedStat(0) = %v, %v, want 0, 0", cpu, runs)
	}
	// Spin until the process has used 10 ms of CPU by schedStat's count:
	// on a loaded machine that takes longer than 10 ms of wall time, and a
	// count that never moves runs into the deadline.
	before, _ := schedStat(os.Getpid())
	for deadline := time.Now().Add(10 * time.Second); ; {
		after, _ := schedStat(os.Getpid())
		if after-before >= 0.01 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("schedStat's CPU moved %.4f s over 10 s of spinning, want at least 0.01", after-before)
		}
	}
	runs0 := schedRuns(os.Getpid())
	for range 5 {
		time.Sleep(time.Millisecond) // each sleep ends with the thread put on a CPU again
	}
	if runs := schedRuns(os.Getpid()) - runs0; runs < 5 {
		t.Errorf("schedRuns moved %d over 5 sleeps, want at least 5", runs)
	}
}

// TestBrokerConfigFlag checks that --broker-config's pairs reach the
// options in order and that a word without "=" is refused, naming the flag.
func TestBrokerConfigFlag(t *testing.T) {
	rel := t.TempDir() + "/relay"
	if err := os.WriteFile(rel, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	o, err := parseFlags([]string{"--relay", rel, "--broker-config", "add.partitions.to.txn.retry.backoff.ms=1  num.io.threads=2"})
	want := [][2]string{{"add.partitions.to.txn.retry.backoff.ms", "1"}, {"num.io.threads", "2"}}
	if err != nil || !slices.Equal(o.brokerConfig, want) {
		t.Errorf("--broker-config: %v, %v; want %v", o.brokerConfig, err, want)
	}
	if _, err := parseFlags([]string{"--relay", rel, "--broker-config", "num.io.threads"}); err == nil || !strings.Contains(err.Error(), "--broker-config") {
		t.Errorf("--broker-config without =: %v", err)
	}
	if o, err := parseFlags([]string{"--relay", rel, "--debezium-connector-opts", "poll.interval.ms=10"}); err != nil || len(o.debeziumOpts) != 1 || o.debeziumOpts[0] != [2]string{"poll.interval.ms", "10"} {
		t.Errorf("--debezium-connector-opts: %v, %v", o.debeziumOpts, err)
	}
}

// TestGCPauses reads pauses from a JDK 17 GC log written with utctime and
// counts those that overlap a window.
func TestGCPauses(t *testing.T) {
	log := `[2026-12-06T08:12:30.000+0000] Using G1
[2026-12-06T08:12:33.050+0000] GC(7) Pause Young (Normal) (G1 Evacuation Pause) 691M->203M(1024M) 39.347ms
[2026-12-06T08:12:35.020+0000] GC(8) Pause Young (Normal) (G1 Evacuation Pause) 691M->203M(1024M) 40.000ms
[2026-12-06T08:12:36.000+0000] GC(9) Pause Remark 300M->300M(1024M) 2.5ms
[2026-12-06T08:12:37.000+0000] GC(9) Concurrent Mark Cycle 120.2ms
`
	path := filepath.Join(t.TempDir(), "gc.log")
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	ps, err := readGCPauses(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 3 || ps[0].dur != 39347*time.Microsecond {
		t.Fatalf("pauses %+v, want 3, the first of 39.347 ms (the concurrent cycle is no pause)", ps)
	}
	at := func(s string) int64 {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v.UnixNano()
	}
	// From 08:12:33.000: the first pause ended 50 ms in; the second began
	// at 08:12:34.980, 20 ms before the window ends.
	n, sum, longest := pausesIn(ps, window{at("2026-12-06T08:12:33Z"), at("2026-12-06T08:12:35Z")})
	if n != 2 || longest != 40 || sum < 79.34 || sum > 79.35 {
		t.Errorf("pauses in the window: %d, sum %.3f, max %.3f; want 2, 79.347, 40", n, sum, longest)
	}
	if n, _, _ := pausesIn(ps, window{at("2026-12-06T08:12:33.051Z"), at("2026-12-06T08:12:34.979Z")}); n != 0 {
		t.Errorf("%d pauses between the two, want 0", n)
	}
}
