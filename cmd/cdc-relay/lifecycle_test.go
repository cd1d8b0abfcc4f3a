package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestShutdownDrainsAndConfirms: SIGTERM stops reading, lets Kafka
// acknowledge what is in flight, confirms the final LSN and exits 0. It
// stays serial: it compares the slot with the shared server's WAL end,
// which tests running beside it would move.
func TestShutdownDrainsAndConfirms(t *testing.T) {
	f := newFixture(t, "")
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	// A long status interval: only the final status update can confirm the end in time.
	r := startRelay(t, f.args("--status-interval", "10s"))
	r.waitStreaming(60 * time.Second)
	ctx := context.Background()
	conn := connect(t)
	var ids []int64
	for i := 0; i < 20; i++ {
		evs := make([]event, 50)
		for j := range evs {
			agg := uuidFor(j)
			evs[j] = event{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, i*50+j)}
		}
		got, err := f.insertTx(ctx, conn, evs)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, got...)
	}
	end := currentLSN(t, conn)
	r.waitMetric("cdc_relay_events_read_total", 60*time.Second, func(v float64) bool { return v >= float64(len(ids)) })
	if code := r.terminate(); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d, want 0", code)
	}
	if got := f.confirmedFlush(); got < end-4096 {
		// Everything was read and acknowledged, so the final update confirms the last commit.
		t.Fatalf("confirmed_flush_lsn %X after shutdown, want at least the last commit (WAL end %X)", got, end)
	}
	if !strings.Contains(r.Output(), "final_lsn") {
		t.Fatalf("no shutdown line with the final LSN:\n%s", tailString(r.Output(), 2000))
	}
	c.waitIDs(30*time.Second, ids)
}

// TestSecondSignalExitsAtOnce: with Kafka down the drain would wait; a second
// SIGTERM exits immediately.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	f.ownBroker() // stopped below, and not started again
	r := startRelay(t, f.args("--shutdown-timeout", "5m"))
	r.waitStreaming(60 * time.Second)
	f.stopBroker()
	agg := uuidFor(1)
	if _, err := f.insertTx(context.Background(), connect(t), []event{{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, 1)}}); err != nil {
		t.Fatal(err)
	}
	r.waitMetric("cdc_relay_events_read_total", 30*time.Second, func(v float64) bool { return v >= 1 })
	before := f.confirmedFlush()
	r.cmd.Process.Signal(syscall.SIGTERM)
	waitFor(t, 10*time.Second, "the drain to start", func() bool { return strings.Contains(r.Output(), "shutdown requested") })
	select {
	case <-r.done:
		t.Fatalf("relay exited on the first signal although Kafka was down (code %d)", r.exitCode)
	default:
	}
	r.cmd.Process.Signal(syscall.SIGTERM)
	if code := r.wait(5 * time.Second); code == 0 {
		t.Fatalf("exit code after the second signal = 0, want non-zero")
	}
	if got := f.confirmedFlush(); got != before {
		t.Fatalf("confirmed_flush_lsn moved from %X to %X although Kafka never acknowledged", before, got)
	}
}

// TestHealthEndpoints: /healthz answers while the process lives; /readyz is
// 200 while streaming and 503 with a JSON reason as a standby.
func TestHealthEndpoints(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	active := startRelay(t, f.args())
	active.waitStreaming(60 * time.Second)
	get := (*relay).getJSON
	if code, _ := get(active, "/healthz"); code != 200 {
		t.Fatalf("/healthz = %d", code)
	}
	if code, body := get(active, "/readyz"); code != 200 || body["state"] != "streaming" || !strings.Contains(body["reason"], "streaming") {
		t.Fatalf("/readyz = %d %v, want 200 streaming", code, body)
	}
	// A second instance on the same slot is a standby: alive, not ready, not exiting.
	standby := startRelay(t, f.args())
	waitFor(t, 30*time.Second, "standby state", func() bool {
		code, body := get(standby, "/readyz")
		return code == 503 && body["state"] == "standby" && strings.Contains(body["reason"], "another instance")
	})
	if code, _ := get(standby, "/healthz"); code != 200 {
		t.Fatalf("standby /healthz = %d", code)
	}
	if v, err := standby.metric("cdc_relay_active"); err != nil || v != 0 {
		t.Fatalf("standby cdc_relay_active = %v (%v), want 0", v, err)
	}
	// When the active one goes, the standby takes over.
	active.kill()
	standby.waitStreaming(30 * time.Second)
	agg := uuidFor(3)
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	ids, err := f.insertTx(context.Background(), connect(t), []event{{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	c.waitIDs(30*time.Second, ids)
	if !strings.Contains(standby.Output(), "takeover") {
		t.Fatalf("no takeover line in the standby's log")
	}
}

// TestHealthcheckCommand: the Docker HEALTHCHECK command reflects /healthz.
func TestHealthcheckCommand(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	r := startRelay(t, f.args())
	r.waitStreaming(60 * time.Second)
	var out strings.Builder
	if code := run([]string{"healthcheck", "--metrics-addr", r.metricsAddr}, env(nil), &out, &out); code != 0 {
		t.Fatalf("healthcheck against a live relay = %d: %s", code, out.String())
	}
	r.kill()
	if code := run([]string{"healthcheck", "--metrics-addr", r.metricsAddr}, env(nil), &out, &out); code != exitFailed {
		t.Fatalf("healthcheck against a dead relay = %d, want %d", code, exitFailed)
	}
}

// TestSecretsNeverLogged: a password in --pg-url (and in the registry URL)
// appears neither in the logs, JSON or text, nor in /metrics, also when a
// connection fails.
func TestSecretsNeverLogged(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-Pa55"
	f := newFixture(t, "")
	args := f.args("--log-format", "json")
	setFlag(args, "--pg-url", strings.Replace(dbURL, "postgres://postgres@", "postgres://postgres:"+secret+"@", 1))
	setFlag(args, "--schema-registry-url", strings.Replace(registry.URL(), "http://", "http://user:"+secret+"@", 1))
	r := startRelay(t, args)
	r.waitStreaming(60 * time.Second)
	resp, err := http.Get("http://" + r.metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	var body strings.Builder
	io.Copy(&body, resp.Body)
	resp.Body.Close()
	if code := r.terminate(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	// A failing connection: the error text must be redacted too.
	bad := f.args()
	setFlag(bad, "--pg-url", "postgres://postgres:"+secret+"@127.0.0.1:1/nodb?connect_timeout=1")
	r2 := startRelay(t, bad)
	waitFor(t, 20*time.Second, "a reconnect line", func() bool { return strings.Contains(r2.Output(), "reconnect") })
	r2.kill()
	for name, text := range map[string]string{"log": r.Output(), "metrics": body.String(), "failing log": r2.Output()} {
		if strings.Contains(text, secret) {
			t.Fatalf("the password appears in the %s:\n%s", name, tailString(text, 2000))
		}
	}
	if !strings.Contains(r.Output(), `"pg_url":"postgres://postgres:xxxxx@`) {
		t.Fatalf("start line does not show the redacted URL:\n%s", tailString(r.Output(), 2000))
	}
}

// TestMetricsDuringKafkaOutage: slot lag, in-flight, backpressure and
// replication delay rise while Kafka is down and fall back after it.
func TestMetricsDuringKafkaOutage(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	f.ownBroker() // stopped below
	r := startRelay(t, f.args("--max-in-flight-events", "40"))
	r.waitStreaming(60 * time.Second)
	ctx := context.Background()
	conn := connect(t)
	write := func(n int) []int64 {
		var ids []int64
		for i := 0; i < n; i++ {
			agg := uuidFor(i % 5)
			got, err := f.insertTx(ctx, conn, []event{{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, i)}})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, got...)
		}
		return ids
	}
	write(5)
	r.waitMetric("cdc_relay_events_published_total", 30*time.Second, func(v float64) bool { return v >= 5 })
	r.waitMetric("cdc_relay_slot_lag_bytes", 30*time.Second, func(v float64) bool { return v < 64<<10 })

	restartBroker := f.stopBroker()
	ids := write(60)
	// The lag is measured from the protocol: it rises with what the relay
	// reads until the in-flight bound stops the reader (backpressure).
	lag := r.waitMetric("cdc_relay_slot_lag_bytes", 30*time.Second, func(v float64) bool { return v > 8<<10 })
	r.waitMetric("cdc_relay_backpressure", 30*time.Second, func(v float64) bool { return v == 1 })
	r.waitMetric("cdc_relay_inflight_events", 10*time.Second, func(v float64) bool { return v == 40 })
	r.waitMetric("cdc_relay_replication_delay_seconds", 10*time.Second, func(v float64) bool { return v > 0 })
	t.Logf("during the outage: slot lag %.0f bytes", lag)

	restartBroker()
	r.waitMetric("cdc_relay_events_published_total", 60*time.Second, func(v float64) bool { return v >= float64(5+len(ids)) })
	r.waitMetric("cdc_relay_slot_lag_bytes", 30*time.Second, func(v float64) bool { return v < 64<<10 })
	r.waitMetric("cdc_relay_backpressure", 10*time.Second, func(v float64) bool { return v == 0 })
	r.waitMetric("cdc_relay_inflight_events", 10*time.Second, func(v float64) bool { return v == 0 })
	r.waitMetric("cdc_relay_replication_delay_seconds", 10*time.Second, func(v float64) bool { return v == 0 })
	if v, err := r.metric("cdc_relay_schema_cache_lookups_total"); err != nil || v < float64(5+len(ids)) {
		t.Fatalf("schema cache lookups = %v (%v), want one per event", v, err)
	}
}
