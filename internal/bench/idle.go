package main

// The idle window of the latency scenario (--idle): with no writer
// committing, pg_recvlogical and the relay (in each --delivery mode) each
// stream a slot of their own, all at once, and the CPU each of them and
// its walsender uses is measured: what a relay costs on a day without
// events, beside PostgreSQL's own client.

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// idleSettle is how long the idle clients run before their window starts:
// connecting and the first status updates are not idle.
const idleSettle = 5 * time.Second

// idleResult is one client's CPU over the idle window.
type idleResult struct {
	Tool    string  `json:"tool"` // pg_recvlogical, cdc-relay or cdc-relay exactly-once
	Seconds float64 `json:"seconds"`
	// CPU milliseconds per minute of the window, the client's and its
	// walsender's (schedstat: nanoseconds, summed over the threads).
	CPUMsPerMinute          float64 `json:"cpu_ms_per_minute"`
	WalsenderCPUMsPerMinute float64 `json:"walsender_cpu_ms_per_minute"`
	// How often its threads and its walsender were put on a CPU, per
	// minute: their wake-ups.
	RunsPerMinute          float64 `json:"cpu_runs_per_minute"`
	WalsenderRunsPerMinute float64 `json:"walsender_cpu_runs_per_minute"`
}

// idleClient is one client of the idle window while it runs.
type idleClient struct {
	name            string
	slot            string
	pid, walsender  int
	cpu0, wal0      float64
	runs0, walRuns0 int64
	stop            func() error
}

// measureIdle runs the idle window: pg_recvlogical and the relay in each
// of o.deliveries, each on a fresh slot, for idleSettle and then o.idle.
func measureIdle(ctx context.Context, o options, svc *services, db *database, relayBin string) ([]idleResult, error) {
	progress("latency: idle for %s: pg_recvlogical and %d relay(s), each on a slot of its own, no events", o.idle, len(o.deliveries))
	var clients []*idleClient
	defer func() {
		for _, c := range clients {
			if c.stop != nil {
				c.stop()
			}
		}
	}()
	anchorSlot := latencySlot + "_idle_anchor"
	if err := createSlot(ctx, db, anchorSlot); err != nil {
		return nil, err
	}
	anc, err := startAnchor(ctx, db, anchorSlot, newEventTimes(0, 0))
	if err != nil {
		return nil, err
	}
	ac := &idleClient{name: "pg_recvlogical", slot: anchorSlot, pid: anc.c.pid(), stop: anc.stop}
	clients = append(clients, ac)
	if ac.walsender, err = waitActive(ctx, db, anc.c, anchorSlot); err != nil {
		return nil, err
	}
	for _, d := range o.deliveries {
		tool := relayTool(o, svc, db, relayBin, d)
		slot := tool.slot + "_idle"
		if err := createSlot(ctx, db, slot); err != nil {
			return nil, err
		}
		proc, kill, _, err := tool.start(ctx, slot)
		if err != nil {
			return nil, err
		}
		c := &idleClient{name: tool.name, slot: slot, pid: proc.pid(), stop: func() error {
			defer kill()
			return stopTool(ctx, tool, proc)
		}}
		clients = append(clients, c)
		if c.walsender, err = waitActive(ctx, db, proc, slot); err != nil {
			return nil, err
		}
	}
	sleepUntil(ctx, time.Now().Add(idleSettle))
	start := time.Now()
	for _, c := range clients {
		c.cpu0, c.runs0 = schedStat(c.pid)
		c.wal0, c.walRuns0 = schedStat(c.walsender)
	}
	sleepUntil(ctx, start.Add(o.idle))
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	secs := time.Since(start).Seconds()
	var rs []idleResult
	for _, c := range clients {
		cpu, runs := schedStat(c.pid)
		wal, walRuns := schedStat(c.walsender)
		perMin := 60 / secs
		rs = append(rs, idleResult{Tool: c.name, Seconds: secs,
			CPUMsPerMinute: 1000 * (cpu - c.cpu0) * perMin, WalsenderCPUMsPerMinute: 1000 * (wal - c.wal0) * perMin,
			RunsPerMinute: float64(runs-c.runs0) * perMin, WalsenderRunsPerMinute: float64(walRuns-c.walRuns0) * perMin})
	}
	for _, c := range clients {
		err := c.stop()
		c.stop = nil
		if err != nil {
			return rs, err
		}
	}
	for _, c := range clients {
		if err := dropSlot(ctx, db, c.slot); err != nil {
			return rs, err
		}
	}
	return rs, nil
}

// printIdle prints the idle window's table.
func printIdle(w io.Writer, o options, rs []idleResult) {
	fmt.Fprintf(w, "\nIdle: no events for %s, every client at once on a slot of its own (after %s settling); CPU ms per minute, from each thread's /proc schedstat\n", o.idle, idleSettle)
	tw := tabwriter.NewWriter(w, 2, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "client\tCPU ms/min\twalsender CPU ms/min\truns/min\twalsender runs/min\t")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.0f\t%.0f\t\n", r.Tool, r.CPUMsPerMinute, r.WalsenderCPUMsPerMinute, r.RunsPerMinute, r.WalsenderRunsPerMinute)
	}
	tw.Flush()
}

// schedStat sums /proc/<pid>/task/*/schedstat over the threads of pid
// alive now: the CPU time they used, in seconds (nanoseconds there, where
// /proc/<pid>/stat counts 10 ms ticks: too coarse for an idle minute), and
// how many times they were put on a CPU (each wake-up, and each return
// after a preemption). Both are 0 when pid is 0 or gone.
func schedStat(pid int) (cpu float64, runs int64) {
	if pid == 0 {
		return 0, 0
	}
	tasks, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "schedstat"))
	var ns int64
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // the thread exited
		}
		if f := strings.Fields(string(b)); len(f) == 3 {
			n, _ := strconv.ParseInt(f[0], 10, 64)
			r, _ := strconv.ParseInt(f[2], 10, 64)
			ns, runs = ns+n, runs+r
		}
	}
	return float64(ns) / 1e9, runs
}

// schedRuns is how many times the threads of pid alive now were put on a
// CPU (schedStat).
func schedRuns(pid int) int64 {
	_, runs := schedStat(pid)
	return runs
}
