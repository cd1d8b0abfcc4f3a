package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/cdc-relay/cdc-relay/internal/kafkatest"
)

// runResult is one load and its drains.
type runResult struct {
	Run              int      `json:"run"`
	RecvlogicalFirst bool     `json:"recvlogical_first"`
	Load             loadInfo `json:"load"`
	drains
}

// drains are the tools' drain results and rates: of one run, or their
// medians over all runs.
type drains struct {
	Recvlogical      drainResult `json:"pg_recvlogical"`
	RecvlogicalRates rates       `json:"pg_recvlogical_rates"`
	Relay            drainResult `json:"cdc_relay"`
	RelayRates       rates       `json:"cdc_relay_rates"`
	// The relay with --delivery exactly-once, on its own slot.
	RelayEOS      drainResult `json:"cdc_relay_exactly_once"`
	RelayEOSRates rates       `json:"cdc_relay_exactly_once_rates"`
	// Debezium and its rates, with --debezium.
	Debezium      *drainResult `json:"debezium,omitempty"`
	DebeziumRates *rates       `json:"debezium_rates,omitempty"`
}

// rates are the figures derived from a drain and its load. MB are 10^6 bytes.
type rates struct {
	EventsPerSecond     float64 `json:"events_per_second"`
	WALMBPerSecond      float64 `json:"wal_mb_per_second"`
	PayloadMBPerSecond  float64 `json:"payload_mb_per_second"`
	ClientCPUPer100k    float64 `json:"client_cpu_seconds_per_100k"`
	WalsenderCPUPer100k float64 `json:"walsender_cpu_seconds_per_100k"`
	PeakRSSMB           float64 `json:"peak_rss_mb,omitempty"`
	// The same two after start-up: rows over seconds minus startup
	// seconds, and the client's CPU minus its CPU at startup (relay and
	// Debezium only).
	EventsPerSecondAfterStartup  float64 `json:"events_per_second_after_startup,omitempty"`
	ClientCPUPer100kAfterStartup float64 `json:"client_cpu_seconds_per_100k_after_startup,omitempty"`
}

// ratesOf derives the rates of d over load.
func ratesOf(d drainResult, load loadInfo) rates {
	if d.Seconds <= 0 || d.Rows == 0 {
		return rates{}
	}
	per100k := 100000 / float64(d.Rows)
	r := rates{
		EventsPerSecond:     float64(d.Rows) / d.Seconds,
		WALMBPerSecond:      float64(load.WALBytes) / 1e6 / d.Seconds,
		PayloadMBPerSecond:  float64(load.PayloadBytes) / 1e6 / d.Seconds,
		ClientCPUPer100k:    d.ClientCPUSeconds * per100k,
		WalsenderCPUPer100k: d.WalsenderCPUSeconds * per100k,
		PeakRSSMB:           float64(d.PeakRSSKB) / 1024,
	}
	if d.StartupSeconds > 0 && d.StartupSeconds < d.Seconds {
		r.EventsPerSecondAfterStartup = float64(d.Rows) / (d.Seconds - d.StartupSeconds)
		r.ClientCPUPer100kAfterStartup = (d.ClientCPUSeconds - d.StartupCPUSeconds) * per100k
	}
	return r
}

// machineInfo describes where the benchmark ran.
type machineInfo struct {
	CPUs       int    `json:"cpus"`
	CPUModel   string `json:"cpu_model"`
	MemTotal   string `json:"mem_total"`
	Kernel     string `json:"kernel"`
	PostgreSQL string `json:"postgresql"`
	Kafka      string `json:"kafka"`
	Relay      string `json:"relay"`
	Go         string `json:"go"`
	// PinnedCPUs says how --pin-cpus split the CPUs; "" without it.
	PinnedCPUs string `json:"pinned_cpus,omitempty"`
}

// report is everything the benchmark prints, in JSON form.
type report struct {
	Machine      machineInfo   `json:"machine"`
	Rows         int           `json:"rows"`
	TxSize       int           `json:"tx_size"`
	PayloadBytes int           `json:"payload_bytes_target"`
	Messages     bool          `json:"messages,omitempty"` // the backlog is logical decoding messages
	Partitions   int           `json:"partitions"`
	RelayBuild   string        `json:"relay_build"`
	RelayArgs    []string      `json:"relay_args,omitempty"`
	BrokerConfig []string      `json:"broker_config,omitempty"`   // --broker-config, key=value
	BrokerJVM    []string      `json:"broker_jvm_opts,omitempty"` // --broker-jvm-opts
	Debezium     *debeziumInfo `json:"debezium,omitempty"`
	Runs         []runResult   `json:"runs"`
	Median       *medianDrain  `json:"median,omitempty"`
}

// medianDrain holds the per-field medians over all runs.
type medianDrain struct {
	drains
	Ratio float64 `json:"relay_to_recvlogical_events_ratio"`
	// The exactly-once drain's events/s over at-least-once's and over
	// pg_recvlogical's.
	EOSToRelay       float64 `json:"exactly_once_to_at_least_once_events_ratio"`
	EOSToRecvlogical float64 `json:"exactly_once_to_recvlogical_events_ratio"`
	// Relay over Debezium: events/s, and Debezium's peak RSS and CPU per
	// event over the relay's (how many times less the relay needs).
	RelayToDebeziumEvents float64 `json:"relay_to_debezium_events_ratio,omitempty"`
	DebeziumToRelayRSS    float64 `json:"debezium_to_relay_peak_rss_ratio,omitempty"`
	DebeziumToRelayCPU    float64 `json:"debezium_to_relay_cpu_ratio,omitempty"`
}

// newReport collects the machine description and prints it.
func newReport(ctx context.Context, o options, relayBin string, db *database) *report {
	m := machineInfo{CPUs: runtime.NumCPU(), Kafka: kafkatest.Version, Go: runtime.Version(), PinnedCPUs: o.pinned}
	m.CPUModel = procField("/proc/cpuinfo", "model name")
	m.MemTotal = procField("/proc/meminfo", "MemTotal")
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	db.conn.QueryRow(ctx, "SHOW server_version").Scan(&m.PostgreSQL)
	if out, err := exec.CommandContext(ctx, relayBin, "version").Output(); err == nil {
		m.Relay = strings.TrimSpace(string(out))
	}
	r := &report{Machine: m, Rows: o.rows, TxSize: o.txSize, PayloadBytes: o.payloadBytes, Messages: o.messages, Partitions: o.partitions, RelayBuild: o.relayBin, RelayArgs: o.relayArgs}
	if o.cpuProfile != "" || o.relayOverlay != "" {
		r.RelayBuild = "built from this checkout"
		if o.relayOverlay != "" {
			r.RelayBuild += " with --relay-overlay " + o.relayOverlay
		}
		if o.cpuProfile != "" {
			r.RelayBuild += " plus the profiling hook"
		}
	}
	fmt.Printf("machine: %d CPUs (%s), %s memory, Linux %s; PostgreSQL %s (fsync=off), Kafka %s (%d partition(s))\nrelay: %s (%s)",
		m.CPUs, m.CPUModel, m.MemTotal, m.Kernel, m.PostgreSQL, m.Kafka, o.partitions, m.Relay, r.RelayBuild)
	if len(o.relayArgs) > 0 {
		fmt.Printf(" with extra flags %s", strings.Join(o.relayArgs, " "))
	}
	fmt.Println()
	for _, kv := range o.brokerConfig {
		r.BrokerConfig = append(r.BrokerConfig, kv[0]+"="+kv[1])
	}
	if len(r.BrokerConfig) > 0 {
		fmt.Println("broker (--broker-config): " + strings.Join(r.BrokerConfig, " "))
	}
	if r.BrokerJVM = o.brokerJVM; len(r.BrokerJVM) > 0 {
		fmt.Println("broker JVM flags after Kafka's start-script ones (--latency, --broker-jvm-opts): " + strings.Join(r.BrokerJVM, " "))
	}
	if o.pinned != "" {
		fmt.Println("pinned (--pin-cpus): " + o.pinned)
	}
	if o.debezium {
		r.Debezium = newDebeziumInfo(o)
		fmt.Printf("debezium: Debezium %s PostgreSQL connector + Outbox Event Router (default routing: %s) in Kafka Connect %s standalone, JVM %s; values as JSON: %s; offset.flush.interval.ms=%d",
			r.Debezium.Version, r.Debezium.Topic, r.Debezium.ConnectVersion, strings.Join(o.debeziumJVM, " "), r.Debezium.Converter, r.Debezium.OffsetFlushMs)
		for _, kv := range o.debeziumOpts {
			fmt.Printf("; %s=%s", kv[0], kv[1])
		}
		fmt.Println()
	}
	return r
}

// procField returns the value of the first "key: value" line of a /proc file.
func procField(path, key string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

// printRun prints one run's table.
func printRun(w io.Writer, r runResult) {
	first := "pg_recvlogical drained first, then cdc-relay, then cdc-relay exactly-once"
	if !r.RecvlogicalFirst {
		first = "cdc-relay exactly-once drained first, then cdc-relay, then pg_recvlogical"
	}
	if r.Debezium != nil {
		first += ", then Debezium"
	}
	l := r.Load
	kind := "rows"
	if l.Messages {
		kind = "logical messages"
	}
	fmt.Fprintf(w, "\nrun %d: %d %s in %d transactions, payload %.0f B avg (%.1f MB), WAL %.1f MB (%s..%s); %s\n",
		r.Run, l.Rows, kind, l.Transactions, float64(l.PayloadBytes)/float64(l.Rows), float64(l.PayloadBytes)/1e6,
		float64(l.WALBytes)/1e6, l.StartLSN, l.EndLSN, first)
	printTable(w, r.drains)
}

// printMedian prints the medians over all runs.
func printMedian(w io.Writer, rep *report) {
	m := rep.Median
	fmt.Fprintf(w, "\nmedian of %d runs:\n", len(rep.Runs))
	printTable(w, m.drains)
}

// printTable prints pg_recvlogical, the relay and, when dbz is not nil,
// Debezium side by side, and the ratios.
func printTable(w io.Writer, d drains) {
	recv, rr, relay, lr, dbz, dr := d.Recvlogical, d.RecvlogicalRates, d.Relay, d.RelayRates, d.Debezium, d.DebeziumRates
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "tool\trows\tseconds\tdecoded at s\tevents/s\tWAL MB/s\tpayload MB/s\tCPU s/100k\twalsender CPU s/100k\tbroker CPU s\tother CPU s\tpeak RSS MB\tstartup s\tKafka records\t")
	row := func(d drainResult, r rates) {
		rss, startup, recs := "-", "-", "-"
		if d.PeakRSSKB > 0 {
			rss = fmt.Sprintf("%.1f", r.PeakRSSMB)
			startup = fmt.Sprintf("%.2f", d.StartupSeconds)
			recs = fmt.Sprint(d.KafkaRecords)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.2f\t%.0f\t%.1f\t%.1f\t%.2f\t%.2f\t%.2f\t%.2f\t%s\t%s\t%s\t\n",
			d.Tool, d.Rows, d.Seconds, d.SentSeconds, r.EventsPerSecond, r.WALMBPerSecond, r.PayloadMBPerSecond,
			r.ClientCPUPer100k, r.WalsenderCPUPer100k, d.BrokerCPUSeconds, d.OtherCPUSeconds, rss, startup, recs)
	}
	row(recv, rr)
	row(relay, lr)
	if d.RelayEOS.Seconds > 0 {
		row(d.RelayEOS, d.RelayEOSRates)
	}
	if dbz != nil {
		row(*dbz, *dr)
	}
	tw.Flush()
	for _, x := range []drainResult{relay, d.RelayEOS} {
		if x.ProduceRequests > 0 {
			fmt.Fprintf(w, "%s: decoded by %.2f s with %d events still in flight to Kafka and the slot %d bytes behind; confirmed %.2f s later; %d produce requests, %.0f records and %.1f ms each on average\n",
				x.Tool, x.SentSeconds, x.InFlightAtSent, x.LagAtSentBytes, x.Seconds-x.SentSeconds, x.ProduceRequests, float64(x.Rows)/float64(x.ProduceRequests), x.ProduceMeanMillis)
		}
	}
	if rr.EventsPerSecond > 0 {
		fmt.Fprintf(w, "ratio cdc-relay / pg_recvlogical: %.2f (events/s)\n", lr.EventsPerSecond/rr.EventsPerSecond)
	}
	if d.RelayEOS.Seconds > 0 {
		printDeliveryRatios(w, d)
	}
	if dbz == nil {
		return
	}
	confirmed := fmt.Sprintf("confirmed_flush_lsn reached the end at %.2f s", dbz.ConfirmedSeconds)
	if dbz.ConfirmedSeconds == 0 {
		at := "" // medians have no LSN
		if dbz.ConfirmedLSN != 0 {
			at = fmt.Sprintf("at %s, ", dbz.ConfirmedLSN)
		}
		confirmed = fmt.Sprintf("confirmed_flush_lsn stopped %d bytes short of the end (%sfrom %.2f s on; waited %s after the last record)",
			dbz.ConfirmLagBytes, at, dbz.LastConfirmSeconds, debeziumConfirmGrace)
	}
	fmt.Fprintf(w, "debezium: timed until every record was in Kafka (%.2f s); %s\n", dbz.Seconds, confirmed)
	for _, t := range []struct {
		d drainResult
		r rates
	}{{relay, lr}, {*dbz, *dr}} {
		fmt.Fprintf(w, "%s: slot active after %.2f s using %.2f CPU s; after start-up %.0f events/s, %.2f CPU s/100k\n",
			t.d.Tool, t.d.StartupSeconds, t.d.StartupCPUSeconds, t.r.EventsPerSecondAfterStartup, t.r.ClientCPUPer100kAfterStartup)
	}
	ev, rss, cpu := debeziumRatios(lr, *dr)
	fmt.Fprintf(w, "ratio cdc-relay / Debezium: %.2f (events/s), %.2f (events/s after start-up); Debezium / cdc-relay: %.1f (peak RSS), %.1f (CPU s/100k)\n",
		ev, safeDiv(lr.EventsPerSecondAfterStartup, dr.EventsPerSecondAfterStartup), rss, cpu)
}

// printDeliveryRatios prints the exactly-once drain's rate against the
// at-least-once drain's and pg_recvlogical's, and each relay's CPU against
// its own walsender's (the limit of one slot), with the goals of issue 18;
// goals are reported, not enforced.
func printDeliveryRatios(w io.Writer, d drains) {
	eos, alo := d.RelayEOSRates.EventsPerSecond, d.RelayRates.EventsPerSecond
	fmt.Fprintf(w, "ratio cdc-relay exactly-once / pg_recvlogical: %.2f (events/s)\n", safeDiv(eos, d.RecvlogicalRates.EventsPerSecond))
	fmt.Fprintf(w, "ratio cdc-relay exactly-once / at-least-once: %.2f (events/s; goal >= 0.80: %s)\n", safeDiv(eos, alo), verdict(safeDiv(eos, alo) >= 0.8))
	fmt.Fprintf(w, "duplicates by id header: cdc-relay %d; cdc-relay exactly-once %d, read_committed (a drain without failures has none in either mode)\n",
		d.Relay.Duplicates, d.RelayEOS.Duplicates)
	for _, m := range []struct {
		d    drainResult
		goal float64
	}{{d.Relay, 0.8}, {d.RelayEOS, 1.0}} {
		total, after := cpuRatios(m.d)
		fmt.Fprintf(w, "CPU %s / its walsender: %.2f s / %.2f s = %.2f (goal <= %.2f: %s); %.2f without the relay's start-up CPU\n",
			m.d.Tool, m.d.ClientCPUSeconds, m.d.WalsenderCPUSeconds, total, m.goal, verdict(total > 0 && total <= m.goal), after)
	}
}

// cpuRatios returns the client's CPU seconds over its walsender's, in all
// and without the client's CPU until it held the slot; 0 without walsender
// figures.
func cpuRatios(d drainResult) (total, afterStartup float64) {
	return safeDiv(d.ClientCPUSeconds, d.WalsenderCPUSeconds), safeDiv(d.ClientCPUSeconds-d.StartupCPUSeconds, d.WalsenderCPUSeconds)
}

// verdict spells a goal's outcome.
func verdict(met bool) string {
	if met {
		return "met"
	}
	return "not met"
}

// debeziumRatios returns the relay's events/s over Debezium's, and
// Debezium's peak RSS and CPU per event over the relay's; 0 where a
// divisor is 0.
func debeziumRatios(relay, dbz rates) (events, rss, cpu float64) {
	return safeDiv(relay.EventsPerSecond, dbz.EventsPerSecond), safeDiv(dbz.PeakRSSMB, relay.PeakRSSMB), safeDiv(dbz.ClientCPUPer100k, relay.ClientCPUPer100k)
}

// safeDiv returns a/b, 0 when b is 0.
func safeDiv(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// summarise fills the medians.
func (rep *report) summarise() {
	var recv, relay, eos []drainResult
	var recvRates, relayRates, eosRates []rates
	for _, r := range rep.Runs {
		recv = append(recv, r.Recvlogical)
		relay = append(relay, r.Relay)
		eos = append(eos, r.RelayEOS)
		recvRates = append(recvRates, r.RecvlogicalRates)
		relayRates = append(relayRates, r.RelayRates)
		eosRates = append(eosRates, r.RelayEOSRates)
	}
	m := &medianDrain{drains: drains{
		Recvlogical: medianDrainResult(recv), RecvlogicalRates: medianRates(recvRates),
		Relay: medianDrainResult(relay), RelayRates: medianRates(relayRates),
		RelayEOS: medianDrainResult(eos), RelayEOSRates: medianRates(eosRates),
	}}
	m.Ratio = safeDiv(m.RelayRates.EventsPerSecond, m.RecvlogicalRates.EventsPerSecond)
	m.EOSToRelay = safeDiv(m.RelayEOSRates.EventsPerSecond, m.RelayRates.EventsPerSecond)
	m.EOSToRecvlogical = safeDiv(m.RelayEOSRates.EventsPerSecond, m.RecvlogicalRates.EventsPerSecond)
	var dbz []drainResult
	var dbzRates []rates
	for _, r := range rep.Runs {
		if r.Debezium != nil {
			dbz = append(dbz, *r.Debezium)
			dbzRates = append(dbzRates, *r.DebeziumRates)
		}
	}
	if len(dbz) > 0 {
		d, dr := medianDrainResult(dbz), medianRates(dbzRates)
		m.Debezium, m.DebeziumRates = &d, &dr
		m.RelayToDebeziumEvents, m.DebeziumToRelayRSS, m.DebeziumToRelayCPU = debeziumRatios(m.RelayRates, dr)
	}
	rep.Median = m
}

// medianDrainResult takes the median of each measured field.
func medianDrainResult(ds []drainResult) drainResult {
	f := func(get func(drainResult) float64) float64 {
		xs := make([]float64, len(ds))
		for i, d := range ds {
			xs[i] = get(d)
		}
		return median(xs)
	}
	return drainResult{
		Tool:                ds[0].Tool,
		Rows:                ds[0].Rows,
		Seconds:             f(func(d drainResult) float64 { return d.Seconds }),
		StartupSeconds:      f(func(d drainResult) float64 { return d.StartupSeconds }),
		StartupCPUSeconds:   f(func(d drainResult) float64 { return d.StartupCPUSeconds }),
		ConfirmedSeconds:    f(func(d drainResult) float64 { return d.ConfirmedSeconds }),
		LastConfirmSeconds:  f(func(d drainResult) float64 { return d.LastConfirmSeconds }),
		ConfirmLagBytes:     int64(f(func(d drainResult) float64 { return float64(d.ConfirmLagBytes) })),
		SentSeconds:         f(func(d drainResult) float64 { return d.SentSeconds }),
		ClientCPUSeconds:    f(func(d drainResult) float64 { return d.ClientCPUSeconds }),
		WalsenderCPUSeconds: f(func(d drainResult) float64 { return d.WalsenderCPUSeconds }),
		BrokerCPUSeconds:    f(func(d drainResult) float64 { return d.BrokerCPUSeconds }),
		OtherCPUSeconds:     f(func(d drainResult) float64 { return d.OtherCPUSeconds }),
		PeakRSSKB:           int64(f(func(d drainResult) float64 { return float64(d.PeakRSSKB) })),
		KafkaRecords:        int64(f(func(d drainResult) float64 { return float64(d.KafkaRecords) })),
		DLQRecords:          int64(f(func(d drainResult) float64 { return float64(d.DLQRecords) })),
		Duplicates:          int64(f(func(d drainResult) float64 { return float64(d.Duplicates) })),
		InFlightAtSent:      int64(f(func(d drainResult) float64 { return float64(d.InFlightAtSent) })),
		LagAtSentBytes:      int64(f(func(d drainResult) float64 { return float64(d.LagAtSentBytes) })),
		ProduceRequests:     int64(f(func(d drainResult) float64 { return float64(d.ProduceRequests) })),
		ProduceMeanMillis:   f(func(d drainResult) float64 { return d.ProduceMeanMillis }),
	}
}

// medianRates takes the median of each rate.
func medianRates(rs []rates) rates {
	f := func(get func(rates) float64) float64 {
		xs := make([]float64, len(rs))
		for i, r := range rs {
			xs[i] = get(r)
		}
		return median(xs)
	}
	return rates{
		EventsPerSecond:     f(func(r rates) float64 { return r.EventsPerSecond }),
		WALMBPerSecond:      f(func(r rates) float64 { return r.WALMBPerSecond }),
		PayloadMBPerSecond:  f(func(r rates) float64 { return r.PayloadMBPerSecond }),
		ClientCPUPer100k:    f(func(r rates) float64 { return r.ClientCPUPer100k }),
		WalsenderCPUPer100k: f(func(r rates) float64 { return r.WalsenderCPUPer100k }),
		PeakRSSMB:           f(func(r rates) float64 { return r.PeakRSSMB }),

		EventsPerSecondAfterStartup:  f(func(r rates) float64 { return r.EventsPerSecondAfterStartup }),
		ClientCPUPer100kAfterStartup: f(func(r rates) float64 { return r.ClientCPUPer100kAfterStartup }),
	}
}

// median returns the median of xs (the mean of the middle two for an even
// count); 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// writeJSON writes the report to path ("-" is stdout, "" nothing).
func (rep *report) writeJSON(path string) error { return writeJSONTo(path, rep) }
