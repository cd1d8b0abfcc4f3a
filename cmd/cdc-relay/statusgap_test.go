package main

// Messages that tell the truth (issue 37, item 5): the tests that need
// PostgreSQL and Kafka.

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStatusDroppedSlotWithCheckpoint: status on a missing slot says what
// run does, from the checkpoint topic: before the first start a first
// start; once the relay has a checkpoint and the slot was dropped, that run
// exits 3, with slot recreate --accept-gap --reason TEXT and replay --since.
// Without --kafka-brokers it says both cases.
func TestStatusDroppedSlotWithCheckpoint(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	ckpt := "t" + f.name + ".checkpoints"
	args := f.args("--checkpoint-topic", ckpt, "--halt-linger", "0s")
	status := func(extra ...string) (int, string, string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		a := append([]string{"status", "--pg-url", f.pg.url, "--slot", f.slot, "--kafka-brokers", broker.Addr(), "--checkpoint-topic", ckpt}, extra...)
		code := run(a, env(nil), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}

	code, _, out := status()
	if code != exitFailed || !strings.Contains(out, "holds no checkpoint") || !strings.Contains(out, "first start") || strings.Contains(out, "exits 3") {
		t.Fatalf("status before the first start = %d, want %d and a first start:\n%s", code, exitFailed, out)
	}

	r := startRelay(t, args)
	r.waitStreaming(60 * time.Second)
	conn := f.connect()
	agg := uuidFor(1)
	if _, err := f.insertTx(context.Background(), conn, []event{{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, 1)}}); err != nil {
		t.Fatal(err)
	}
	after := currentLSN(t, conn)
	waitFor(t, 30*time.Second, "the row confirmed", func() bool { return f.confirmedFlush() >= after })
	if code := r.terminate(); code != exitOK {
		t.Fatalf("exit %d", code)
	}
	f.exec("SELECT pg_drop_replication_slot($1)", f.slot)

	code, _, out = status()
	for _, want := range []string{`no replication slot "` + f.slot + `"`, "cdc-relay run exits 3", "may be missing from Kafka", "last commit at",
		"cdc-relay slot recreate --accept-gap --reason TEXT", "cdc-relay replay --since 20"} {
		if code != exitFailed || !strings.Contains(out, want) {
			t.Fatalf("status on the dropped slot = %d, lacks %q:\n%s", code, want, out)
		}
	}
	if strings.Contains(out, "first start") {
		t.Fatalf("status on the dropped slot promises a first start:\n%s", out)
	}
	t.Logf("status on the dropped slot:\n%s", out)

	code, stdout, _ := status("--json")
	var js struct {
		Slot   string `json:"slot"`
		Exists *bool  `json:"exists"`
		Error  string `json:"error"`
	}
	if err := json.Unmarshal([]byte(stdout), &js); err != nil || code != exitFailed || js.Exists == nil || *js.Exists || !strings.Contains(js.Error, "cdc-relay run exits 3") {
		t.Fatalf("status --json on the dropped slot = %d %v: %s", code, err, stdout)
	}

	// run agrees: exit 3.
	wantGapExit(t, startRelay(t, args), f.slot)

	// Without Kafka settings status cannot tell, and says both.
	var so, se bytes.Buffer
	code = run([]string{"status", "--pg-url", f.pg.url, "--slot", f.slot}, env(nil), &so, &se)
	if out := se.String(); code != exitFailed || !strings.Contains(out, "cdc-relay run exits 3") || !strings.Contains(out, "slot recreate --accept-gap --reason TEXT") ||
		!strings.Contains(out, "without a checkpoint, run creates the slot on first start") || !strings.Contains(out, "--kafka-brokers") {
		t.Fatalf("status without Kafka settings = %d:\n%s", code, out)
	}
}

// TestShutdownUndrainedLogsError: a SIGTERM while Kafka is down leaves
// events in flight past --shutdown-timeout: the relay still exits 0
// (stopped on request), and logs an ERROR with the count in flight.
func TestShutdownUndrainedLogsError(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	f.ownBroker() // stopped below
	r := startRelay(t, f.args("--shutdown-timeout", "2s"))
	r.waitStreaming(60 * time.Second)
	conn := f.connect()
	ctx := context.Background()
	agg := uuidFor(1)
	if _, err := f.insertTx(ctx, conn, []event{{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, 1)}}); err != nil {
		t.Fatal(err)
	}
	r.waitMetric("cdc_relay_events_published_total", 30*time.Second, func(v float64) bool { return v >= 1 })

	restartBroker := f.stopBroker()
	for i := 2; i <= 4; i++ {
		agg := uuidFor(i)
		if _, err := f.insertTx(ctx, conn, []event{{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, i)}}); err != nil {
			t.Fatal(err)
		}
	}
	r.waitMetric("cdc_relay_inflight_events", 30*time.Second, func(v float64) bool { return v == 3 })
	// With Kafka down, the session's Close waits for the client only
	// briefly when the relay is stopping (it waited a request timeout and
	// more, 40 s, before): the exit follows --shutdown-timeout within
	// Terminate's bound.
	r.Cmd.Process.Signal(syscall.SIGTERM)
	began := time.Now()
	code := r.Wait(60 * time.Second)
	t.Logf("exited %s after SIGTERM", time.Since(began).Round(time.Millisecond))
	<-r.done
	if code != exitOK {
		t.Fatalf("exit %d after SIGTERM with events in flight, want 0 (stopped on request):\n%s", code, tailString(r.Output(), 3000))
	}
	restartBroker()
	var line string
	for _, l := range strings.Split(r.Output(), "\n") {
		if strings.Contains(l, "stopped on request before Kafka acknowledged every event in flight") {
			line = l
		}
	}
	if !strings.Contains(line, "level=ERROR") || !strings.Contains(line, "in_flight_events=3") || !strings.Contains(line, "shutdown_timeout=2s") {
		t.Fatalf("no ERROR with in_flight_events=3:\n%s", tailString(r.Output(), 3000))
	}
}
