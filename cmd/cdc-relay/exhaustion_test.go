package main

// Time to disaster: the slot poller's metrics, and the alert on them
// evaluated in Go (promtool is not available from the allowed registries).

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// alertRule is one rule of deploy/k8s/prometheusrule.yaml.
type alertRule struct {
	name, expr, forDuration string
}

func findAlert(t *testing.T, name string) alertRule {
	t.Helper()
	for _, doc := range yamlDocs(t, filepath.Join("../../deploy/k8s", "prometheusrule.yaml")) {
		groups, _ := dig(doc, "spec", "groups").([]any)
		for _, g := range groups {
			rs, _ := dig(g, "rules").([]any)
			for _, r := range rs {
				if n, _ := dig(r, "alert").(string); n == name {
					expr, _ := dig(r, "expr").(string)
					f, _ := dig(r, "for").(string)
					return alertRule{name: n, expr: expr, forDuration: f}
				}
			}
		}
	}
	t.Fatalf("no alert %s in deploy/k8s/prometheusrule.yaml", name)
	return alertRule{}
}

// simpleAlertExpr is the PromQL subset evalAlert understands: an
// aggregation of one metric compared with a constant.
var simpleAlertExpr = regexp.MustCompile(`^(min|max|sum)\((cdc_relay_[a-z_]+)\) (<|>|<=|>=) ([0-9.eE+]+)$`)

// evalAlert evaluates the rule's expression once against one scrape of
// /metrics, as Prometheus would against this single target: it fires when
// the aggregation has a value and the comparison holds. An aggregation of
// no series has no value, so an absent metric never fires.
func evalAlert(t *testing.T, rule alertRule, metricsText string) (firing bool, value float64) {
	t.Helper()
	m := simpleAlertExpr.FindStringSubmatch(strings.TrimSpace(rule.expr))
	if m == nil {
		t.Fatalf("alert %s: expression %q is not agg(metric) op constant; extend evalAlert", rule.name, rule.expr)
	}
	agg, name, op := m[1], m[2], m[3]
	threshold, err := strconv.ParseFloat(m[4], 64)
	if err != nil {
		t.Fatal(err)
	}
	// The text exposition format: one sample per line, name{labels} value.
	samples := regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(name)+`(\{[^}]*\})? (\S+)$`).FindAllStringSubmatch(metricsText, -1)
	if len(samples) == 0 {
		return false, math.NaN()
	}
	for i, sm := range samples {
		v, err := strconv.ParseFloat(sm[2], 64)
		if err != nil {
			t.Fatalf("metric %s: value %q: %v", name, sm[2], err)
		}
		switch {
		case i == 0:
			value = v
		case agg == "min":
			value = min(value, v)
		case agg == "max":
			value = max(value, v)
		default:
			value += v
		}
	}
	switch op {
	case "<":
		return value < threshold, value
	case ">":
		return value > threshold, value
	case "<=":
		return value <= threshold, value
	}
	return value >= threshold, value
}

// TestAlertEvaluator: the Go evaluation of the alert agrees with PromQL on
// hand-made scrapes, so the end-to-end test below can rely on it.
func TestAlertEvaluator(t *testing.T) {
	rule := findAlert(t, "CDCRelaySlotWALExhaustionSoon")
	if d, err := time.ParseDuration(rule.forDuration); err != nil || d > 10*time.Minute {
		t.Fatalf("alert for: %q, want a duration of at most 10m", rule.forDuration)
	}
	tests := []struct {
		name, scrape string
		want         bool
	}{
		{"absent", "cdc_relay_slot_lag_bytes 5\n", false},
		{"far", "cdc_relay_slot_exhaustion_seconds 86400\n", false},
		{"near", "cdc_relay_slot_exhaustion_seconds 1200\n", true},
		{"boundary", "cdc_relay_slot_exhaustion_seconds 3600\n", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got, v := evalAlert(t, rule, tc.scrape); got != tc.want {
				t.Fatalf("firing = %v (value %v), want %v", got, v, tc.want)
			}
		})
	}
}

// TestSlotExhaustionEstimate: on a server with max_slot_wal_keep_size set,
// the relay held back by a Kafka outage while WAL keeps coming: the
// time-to-exhaustion metric appears, falls as the lag grows, and the alert
// fires. Without max_slot_wal_keep_size the safe size and the estimate are
// absent; wal_status and the spill counters are there.
func TestSlotExhaustionEstimate(t *testing.T) {
	t.Parallel()
	rule := findAlert(t, "CDCRelaySlotWALExhaustionSoon")
	t.Run("unlimited", func(t *testing.T) {
		f := newFixture(t, "")
		r := startRelay(t, f.args("--slot-poll-interval", "200ms"))
		r.waitStreaming(60 * time.Second)
		r.waitMetric("cdc_relay_slot_wal_status", 30*time.Second, func(v float64) bool { return v == 1 })
		text := r.metricsText(t)
		for _, absent := range []string{"cdc_relay_slot_safe_wal_size_bytes", "cdc_relay_slot_exhaustion_seconds"} {
			if strings.Contains(text, "\n"+absent+" ") {
				t.Errorf("%s is exported although max_slot_wal_keep_size is unset", absent)
			}
		}
		for _, present := range []string{`cdc_relay_slot_wal_status{status="reserved"} 1`, "cdc_relay_slot_spill_bytes_total 0", "cdc_relay_slot_spill_txns_total 0"} {
			if !strings.Contains(text, present) {
				t.Errorf("/metrics lacks %q", present)
			}
		}
		if firing, _ := evalAlert(t, rule, text); firing {
			t.Fatal("the exhaustion alert fires on a healthy relay")
		}
	})

	target := startTarget(t, 16, map[string]string{"max_slot_wal_keep_size": "1GB", "max_wal_size": "256MB"})
	f := newFixtureOn(t, target, "")
	f.ownBroker() // stopped below
	f.exec(fmt.Sprintf("CREATE TABLE busy_%s (id serial PRIMARY KEY, v text)", f.name))
	r := startRelay(t, f.args("--slot-poll-interval", "500ms"))
	r.waitStreaming(60 * time.Second)
	safe := r.waitMetric("cdc_relay_slot_safe_wal_size_bytes", 30*time.Second, func(v float64) bool { return v > 0 })
	if firing, _ := evalAlert(t, rule, r.metricsText(t)); firing {
		t.Fatal("the exhaustion alert fires before the lag grows")
	}

	restartBroker := f.stopBroker()
	ctx := context.Background()
	conn := f.connect()
	agg := uuidFor(1)
	// An event Kafka cannot take holds the confirmed LSN where it is.
	if _, err := f.insertTx(ctx, conn, []event{{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, 1)}}); err != nil {
		t.Fatal(err)
	}
	r.waitMetric("cdc_relay_inflight_events", 30*time.Second, func(v float64) bool { return v >= 1 })
	// WAL keeps coming, from a table outside the publication.
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		wconn, err := f.pg.cluster.Connect(ctx, f.pg.db)
		if err != nil {
			done <- err
			return
		}
		defer wconn.Close(ctx)
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if _, err := wconn.Exec(ctx, fmt.Sprintf("INSERT INTO busy_%s (v) SELECT repeat('w', 1000) FROM generate_series(1, 2000)", f.name)); err != nil {
				done <- err
				return
			}
		}
	}()
	defer func() {
		close(stop)
		if err := <-done; err != nil {
			t.Errorf("WAL writer: %v", err)
		}
	}()
	first := r.waitMetric("cdc_relay_slot_exhaustion_seconds", 60*time.Second, func(v float64) bool { return v > 0 })
	// The estimate follows the lag's growth over the last few samples: on
	// a loaded machine the first ones can see little of the writer, so
	// wait for the alert itself, not for a fixed fall from the first.
	var firing bool
	var last float64
	for deadline := time.Now().Add(90 * time.Second); ; {
		if firing, last = evalAlert(t, rule, r.metricsText(t)); firing {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("alert %s (%s) did not fire within 90 s of steady WAL writes: %.0f s to exhaustion (first estimate %.0f s)", rule.name, rule.expr, last, first)
		}
		time.Sleep(500 * time.Millisecond) // polling interval, not synchronisation
	}
	nowSafe, _ := r.metric("cdc_relay_slot_safe_wal_size_bytes")
	if nowSafe >= safe {
		t.Fatalf("safe WAL size did not fall while the lag grew: %.0f then %.0f", safe, nowSafe)
	}
	t.Logf("safe WAL %.0f MB -> %.0f MB; time to exhaustion %.0f s -> %.0f s; alert fires", safe/1e6, nowSafe/1e6, first, last)
	restartBroker()
}
