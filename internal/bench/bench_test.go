package main

import (
	"os"
	"testing"
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

// TestProc reads this process's own figures.
func TestProc(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc: the benchmark runs on Linux only")
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
