package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/freeport"
	"github.com/cdc-relay/cdc-relay/internal/pgtest"
)

// How often the drains look at the slot and at the relay's memory.
const (
	slotPoll   = 20 * time.Millisecond
	rssPoll    = 50 * time.Millisecond
	stopWithin = 60 * time.Second // the relay exits after SIGTERM (its drain allows 30 s)
)

// drainResult is what one drain measured. Rates are derived in report.go.
type drainResult struct {
	Tool    string  `json:"tool"`
	Rows    int     `json:"rows"`
	Seconds float64 `json:"seconds"`
	// StartupSeconds is the time from process start until the slot was
	// first seen active (relay and Debezium), and StartupCPUSeconds the
	// client's CPU by then (included in ClientCPUSeconds).
	StartupSeconds    float64 `json:"startup_seconds,omitempty"`
	StartupCPUSeconds float64 `json:"startup_cpu_seconds,omitempty"`
	// ConfirmedSeconds is, for Debezium, the time from process start until
	// the slot's confirmed_flush_lsn was seen at the end LSN, 0 if that did
	// not happen within debeziumConfirmGrace of Seconds. Debezium's Seconds
	// is when Kafka held every row: it confirms LSNs only when Connect
	// commits offsets (offset.flush.interval.ms).
	ConfirmedSeconds float64 `json:"confirmed_seconds,omitempty"`
	// LastConfirmSeconds is, for Debezium, when confirmed_flush_lsn was
	// last seen to move (to ConfirmedLSN) during the drain and the grace
	// period after it.
	LastConfirmSeconds float64 `json:"last_confirm_seconds,omitempty"`
	// ConfirmLagBytes is how far ConfirmedLSN stayed short of the load's
	// end LSN at the end of the drain (Debezium only).
	ConfirmLagBytes int64 `json:"confirm_lag_bytes,omitempty"`
	// SentSeconds is the time from process start until the walsender's
	// sent_lsn was first seen at the end LSN: PostgreSQL had decoded and
	// handed over the whole backlog. Seconds minus SentSeconds is the tail
	// spent on work after decoding (for the relay: Kafka and the ack).
	SentSeconds float64 `json:"sent_seconds"`
	// ClientCPUSeconds is the user+system CPU of pg_recvlogical or the relay.
	ClientCPUSeconds float64 `json:"client_cpu_seconds"`
	// WalsenderCPUSeconds is the CPU of the PostgreSQL walsender that
	// decoded the slot, sampled every 20 ms (the last sample counts).
	WalsenderCPUSeconds float64 `json:"walsender_cpu_seconds"`
	// ClientPID and WalsenderPID identify the processes, e.g. in a
	// system-wide perf profile.
	ClientPID    int `json:"client_pid"`
	WalsenderPID int `json:"walsender_pid"`
	// BrokerCPUSeconds is the Kafka broker's CPU during the drain.
	BrokerCPUSeconds float64 `json:"broker_cpu_seconds"`
	// OtherCPUSeconds is the machine's busy CPU during the drain minus
	// the three above: the benchmark's polling, other PostgreSQL
	// processes and anything else running on the machine. A large value
	// means the measurement was disturbed.
	OtherCPUSeconds float64 `json:"other_cpu_seconds"`
	PeakRSSKB       int64   `json:"peak_rss_kb,omitempty"`
	// KafkaRecords is the sum of the topic's end offsets (relay), or of
	// what the drain added to them (Debezium).
	KafkaRecords int64 `json:"kafka_records,omitempty"`
	// InFlightAtSent is the relay's cdc_relay_inflight_events when the
	// walsender had sent everything: the events still waiting for Kafka.
	InFlightAtSent int64 `json:"inflight_at_sent,omitempty"`
	// LagAtSentBytes is how far the slot's confirmed_flush_lsn trailed the
	// load's end LSN when the walsender had sent everything: what the relay
	// had read and not yet confirmed (events waiting for Kafka, and since
	// the slot follows the checkpoint, a checkpoint not yet written).
	LagAtSentBytes int64 `json:"slot_lag_at_sent_bytes,omitempty"`
	// ProduceRequests and ProduceMeanMillis are the count and mean of the
	// relay's cdc_relay_produce_latency_seconds at the end of the drain.
	ProduceRequests   int64   `json:"produce_requests,omitempty"`
	ProduceMeanMillis float64 `json:"produce_mean_ms,omitempty"`
	// DLQRecords is the sum of the dead-letter topic's end offsets (relay
	// only).
	DLQRecords int64 `json:"dlq_records"`
	// Duplicates counts records whose id header was seen before (relay
	// only; at-least-once delivery allows them, a clean drain has none).
	Duplicates   int64 `json:"duplicates"`
	ConfirmedLSN lsn   `json:"confirmed_lsn"`
}

// drainRecvlogical drains slot with pg_recvlogical into /dev/null up to the
// load's end LSN and times it from process start to exit.
func drainRecvlogical(ctx context.Context, o options, svc *services, db *database, slot string, load loadInfo) (drainResult, error) {
	d := drainResult{Tool: "pg_recvlogical", Rows: load.Rows}
	args := []string{"-d", db.url, "--slot", slot, "--start", "--plugin", "pgoutput",
		"-o", "proto_version=1", "-o", "publication_names=" + publication,
		"-f", "/dev/null", "--endpos", load.EndLSN.String(), "--no-loop"}
	if o.messages {
		args = append(args, "-o", "messages=true")
	}
	broker0, busy0 := cpuOrZero(svc.brokerPID), busySeconds()
	c, err := startChild(ctx, "pg_recvlogical", filepath.Join(pgtest.BinDir, "pg_recvlogical"), args, nil)
	if err != nil {
		return d, err
	}
	defer c.kill()
	d.ClientPID = c.pid()
	tick := time.NewTicker(slotPoll)
	defer tick.Stop()
	deadline := time.NewTimer(o.timeout)
	defer deadline.Stop()
	for exited := false; !exited; {
		select {
		case <-c.done:
			exited = true
		case <-ctx.Done():
			return d, ctx.Err()
		case <-deadline.C:
			return d, c.failure("did not reach %s within %s", load.EndLSN, o.timeout)
		case <-tick.C:
			st, err := db.slot(ctx, slot)
			if err != nil {
				return d, err
			}
			if cpu := cpuOrZero(st.activePID); cpu > 0 {
				d.WalsenderCPUSeconds, d.WalsenderPID = cpu, st.activePID
			}
			if d.SentSeconds == 0 && st.sent >= load.EndLSN {
				d.SentSeconds = time.Since(c.start).Seconds()
			}
		}
	}
	d.Seconds = c.exitAt.Sub(c.start).Seconds()
	if d.SentSeconds == 0 {
		d.SentSeconds = d.Seconds // exited before a poll saw it
	}
	if c.err != nil {
		return d, c.failure("%v", c.err)
	}
	d.BrokerCPUSeconds = cpuOrZero(svc.brokerPID) - broker0
	ps := c.cmd.ProcessState
	d.ClientCPUSeconds = (ps.UserTime() + ps.SystemTime()).Seconds()
	d.OtherCPUSeconds = busySeconds() - busy0 - d.ClientCPUSeconds - d.WalsenderCPUSeconds - d.BrokerCPUSeconds
	st, err := db.slot(ctx, slot)
	if err != nil {
		return d, err
	}
	d.ConfirmedLSN = st.confirmed
	return d, nil
}

// profileEnv names the file the profiling variant of the relay writes its
// CPU profile to (see profile.go).
const profileEnv = "CDC_RELAY_BENCH_CPUPROFILE"

// The relay's two delivery modes (--delivery).
const (
	atLeastOnce = "at-least-once"
	exactlyOnce = "exactly-once"
)

// relayToolName names the relay in a delivery mode in the tables.
func relayToolName(delivery string) string {
	if delivery == exactlyOnce {
		return "cdc-relay exactly-once"
	}
	return "cdc-relay"
}

// drainRelay runs the relay with --delivery delivery on slot and times it
// from process start until the slot's confirmed_flush_lsn reaches the load's
// end LSN; then it stops the relay with SIGTERM and checks with franz-go
// (read_committed in exactly-once mode) that Kafka holds every row.
func drainRelay(ctx context.Context, o options, svc *services, db *database, bin, slot string, run int, delivery string, load loadInfo, profile string) (drainResult, error) {
	d := drainResult{Tool: relayToolName(delivery), Rows: load.Rows}
	port, err := freeport.Get()
	if err != nil {
		return d, err
	}
	prefix := fmt.Sprintf("bench_r%d", run)
	if delivery == exactlyOnce {
		prefix = fmt.Sprintf("bench_r%d_eos", run)
	}
	metricsAddr := "127.0.0.1:" + strconv.Itoa(port)
	args := relayArgs(db.url, slot, publication, svc, o.schemasDir, prefix, metricsAddr)
	args = append(args, "--delivery", delivery)
	args = append(args, o.relayArgs...)
	env := os.Environ()
	if profile != "" {
		os.Remove(profile)
		env = append(env, profileEnv+"="+profile)
	}
	c, m, err := d.runRelay(ctx, o, svc, db, bin, slot, args, env, metricsAddr, load)
	if c != nil {
		defer c.kill()
	}
	if err != nil {
		return d, err
	}
	d.ProduceRequests = int64(m["cdc_relay_produce_latency_seconds_count"])
	if d.ProduceRequests > 0 {
		d.ProduceMeanMillis = m["cdc_relay_produce_latency_seconds_sum"] / float64(d.ProduceRequests) * 1000
	}

	if profile != "" {
		if err := collectProfile(ctx, c, profile); err != nil {
			return d, err
		}
	}
	c.signal(syscall.SIGTERM)
	if err := c.wait(ctx, stopWithin); err != nil {
		return d, c.failure("after SIGTERM: %v", err)
	}
	if d.KafkaRecords, err = topicRecords(ctx, svc.broker.Addr(), prefix+".Order"); err != nil {
		return d, err
	}
	if d.DLQRecords, err = topicRecords(ctx, svc.broker.Addr(), prefix+".dlq"); err != nil {
		return d, err
	}
	// In exactly-once mode the end offsets also count one commit marker
	// per Kafka transaction.
	if d.KafkaRecords < int64(load.Rows) {
		return d, fmt.Errorf("topic %s.Order holds %d records, want at least %d (%d in the dead-letter topic)", prefix, d.KafkaRecords, load.Rows, d.DLQRecords)
	}
	progress("verifying that %s.Order holds every outbox id (%s)", prefix, delivery)
	if delivery == exactlyOnce {
		d.Duplicates, err = verifyIDsCommitted(ctx, svc.broker.Addr(), prefix+".Order", load)
	} else {
		d.Duplicates, err = verifyIDs(ctx, svc.broker.Addr(), prefix+".Order", d.KafkaRecords, load)
	}
	return d, err
}

// runRelay starts the relay with args and env (for either broker) and
// waits until slot has confirmed the load's end LSN; then it notes the
// relay's CPU, its peak RSS (the larger of the samples and VmHWM), the
// broker's CPU and the rest of the machine's over the drain, and returns
// the relay's metrics. The relay is still running: the caller kills c
// (also returned on error, when it started).
func (d *drainResult) runRelay(ctx context.Context, o options, svc *services, db *database, bin, slot string, args, env []string, metricsAddr string, load loadInfo) (*child, map[string]float64, error) {
	broker0, busy0 := cpuOrZero(svc.brokerPID), busySeconds()
	c, err := startChild(ctx, "cdc-relay", bin, args, env)
	if err != nil {
		return nil, nil, err
	}
	d.ClientPID = c.pid()
	rss := sampleRSS(c.pid(), rssPoll)
	defer rss.Stop()
	if err := waitConfirmed(ctx, o, db, c, slot, metricsAddr, load, d); err != nil {
		return c, nil, err
	}
	if d.ClientCPUSeconds, err = cpuSeconds(c.pid()); err != nil {
		return c, nil, c.failure("read CPU time: %v", err)
	}
	hwm, err := statusKB(c.pid(), "VmHWM")
	if err != nil {
		return c, nil, c.failure("read peak RSS: %v", err)
	}
	d.PeakRSSKB = max(rss.Stop(), hwm)
	d.BrokerCPUSeconds = cpuOrZero(svc.brokerPID) - broker0
	d.OtherCPUSeconds = busySeconds() - busy0 - d.ClientCPUSeconds - d.WalsenderCPUSeconds - d.BrokerCPUSeconds
	m, err := scrapeMetrics(ctx, metricsAddr)
	if err != nil {
		return c, nil, c.failure("%v", err)
	}
	return c, m, nil
}

// waitConfirmed polls the slot every 20 ms until its confirmed_flush_lsn
// reaches the load's end LSN, recording the drain time, the startup time,
// the walsender's CPU and the relay's in-flight events at the moment the
// walsender had sent everything in d.
func waitConfirmed(ctx context.Context, o options, db *database, c *child, slot, metricsAddr string, load loadInfo, d *drainResult) error {
	tick := time.NewTicker(slotPoll)
	defer tick.Stop()
	deadline := time.NewTimer(o.timeout)
	defer deadline.Stop()
	for {
		select {
		case <-c.done:
			return c.failure("exited (%v) before confirming %s", c.err, load.EndLSN)
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return c.failure("did not confirm %s within %s (confirmed %s)", load.EndLSN, o.timeout, d.ConfirmedLSN)
		case <-tick.C:
		}
		st, err := db.slot(ctx, slot)
		if err != nil {
			return err
		}
		now := time.Now()
		d.ConfirmedLSN = st.confirmed
		d.sampleActive(st, c, now)
		if d.SentSeconds == 0 && st.sent >= load.EndLSN {
			d.SentSeconds = now.Sub(c.start).Seconds()
			d.LagAtSentBytes = int64(load.EndLSN) - int64(st.confirmed)
			if m, err := scrapeMetrics(ctx, metricsAddr); err == nil {
				d.InFlightAtSent = int64(m["cdc_relay_inflight_events"])
			}
		}
		if st.confirmed >= load.EndLSN {
			d.Seconds = now.Sub(c.start).Seconds()
			return nil
		}
	}
}

// relayArgs are the `cdc-relay run` flags both scenarios use: their own slot,
// topics under prefix, and a metrics port.
func relayArgs(pgURL, slot, publication string, svc *services, schemasDir, prefix, metricsAddr string) []string {
	return []string{"run",
		"--pg-url", pgURL,
		"--slot", slot,
		"--publication", publication,
		"--table", "public.outbox",
		"--kafka-brokers", svc.broker.Addr(),
		"--topic-template", prefix + ".{aggregate_type}",
		"--schema-registry-url", svc.registry.URL(),
		"--schemas-dir", schemasDir,
		"--dlq-topic", prefix + ".dlq",
		"--metrics-addr", metricsAddr,
		"--log-level", "warn",
	}
}

// sampleActive notes, from one look at the slot, when the client first held
// it (startup time and the CPU spent until then) and the CPU of the
// walsender serving it.
func (d *drainResult) sampleActive(st slotState, c *child, now time.Time) {
	if st.activePID == 0 {
		return
	}
	if d.StartupSeconds == 0 {
		d.StartupSeconds = now.Sub(c.start).Seconds()
		d.StartupCPUSeconds, _ = cpuSeconds(c.pid())
	}
	if cpu := cpuOrZero(st.activePID); cpu > 0 {
		d.WalsenderCPUSeconds, d.WalsenderPID = cpu, st.activePID
	}
}
