package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	recordpkg "github.com/cdc-relay/cdc-relay/record"
)

// TestCloudEventsModeSetting: --cloudevents-mode defaults to binary, is
// read from the flag, the environment and the YAML file, and exits 2
// naming itself and the fix when unknown or given without --cloudevents.
func TestCloudEventsModeSetting(t *testing.T) {
	withCE := append(append([]string{}, required...), "--cloudevents", "--cloudevents-source", "/orders")
	c, err := LoadConfig(withCE, env(nil), &bytes.Buffer{})
	if err != nil || c.CloudEventsMode != recordpkg.CloudEventsBinary {
		t.Fatalf("default: mode %v, err %v; want binary", c.CloudEventsMode, err)
	}
	yaml := filepath.Join(t.TempDir(), "relay.yaml")
	if err := os.WriteFile(yaml, []byte("cloudevents-mode: structured\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		args []string
		env  map[string]string
	}{
		"flag": {append(append([]string{}, withCE...), "--cloudevents-mode", "structured"), nil},
		"env":  {withCE, map[string]string{"CDC_RELAY_CLOUDEVENTS_MODE": "structured"}},
		"yaml": {append([]string{"--config", yaml}, withCE...), nil},
	} {
		c, err := LoadConfig(tc.args, env(tc.env), &bytes.Buffer{})
		if err != nil || c.CloudEventsMode != recordpkg.CloudEventsStructured {
			t.Errorf("%s: mode %v, err %v; want structured", name, c.CloudEventsMode, err)
		}
	}
	for _, tc := range []struct {
		name  string
		args  []string
		env   map[string]string
		wants []string
	}{
		{"structured without --cloudevents", append(append([]string{}, required...), "--cloudevents-mode", "structured"), nil,
			[]string{"--cloudevents-mode", "--cloudevents true"}},
		{"structured without --cloudevents, env", required, map[string]string{"CDC_RELAY_CLOUDEVENTS_MODE": "structured"},
			[]string{"--cloudevents-mode", "--cloudevents true"}},
		{"unknown mode", append(append([]string{}, withCE...), "--cloudevents-mode", "envelope"), nil,
			[]string{"--cloudevents-mode", `"envelope"`, "structured"}},
		{"unknown mode, env", withCE, map[string]string{"CDC_RELAY_CLOUDEVENTS_MODE": "Binary"}, []string{"--cloudevents-mode", "binary"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if code := run(append([]string{"run"}, tc.args...), env(tc.env), &bytes.Buffer{}, &stderr); code != exitConfig {
				t.Fatalf("exit code %d, want %d; stderr: %s", code, exitConfig, stderr.String())
			}
			out := strings.TrimSpace(stderr.String())
			for _, want := range tc.wants {
				if !strings.Contains(out, want) {
					t.Errorf("stderr %q does not say %s", out, want)
				}
			}
			if strings.Contains(out, "\n") {
				t.Errorf("want a one-line message, got %q", out)
			}
		})
	}
}

// cloudEventsPython is the virtualenv scripts/setup.sh installs the
// CloudEvents Python SDK into.
func cloudEventsPython(t *testing.T) string {
	t.Helper()
	cache := os.Getenv("CDC_RELAY_CACHE")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Fatal(err)
		}
		cache = filepath.Join(home, ".cache", "cdc-relay")
	}
	py := filepath.Join(cache, "venv-cloudevents", "bin", "python")
	if _, err := os.Stat(py); err != nil {
		t.Fatalf("the CloudEvents Python SDK is not installed (%v): run make setup", err)
	}
	return py
}

// sdkRead decodes records with the CloudEvents Python SDK's Kafka binding
// (testdata/cloudevents/decode.py) and returns each event's attributes.
func sdkRead(t *testing.T, recs []record) []map[string]string {
	t.Helper()
	var in bytes.Buffer
	for _, r := range recs {
		h := map[string]string{}
		for k, v := range r.Headers {
			h[k] = base64.StdEncoding.EncodeToString([]byte(v))
		}
		line, _ := json.Marshal(map[string]any{"headers": h, "key": base64.StdEncoding.EncodeToString([]byte(r.Key)),
			"value": base64.StdEncoding.EncodeToString(r.Value)})
		in.Write(append(line, '\n'))
	}
	cmd := exec.Command(cloudEventsPython(t), "../../testdata/cloudevents/decode.py")
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("CloudEvents SDK: %v\n%s", err, stderr)
	}
	var events []map[string]string
	for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		var ev map[string]string
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatalf("SDK output %q: %v", line, err)
		}
		events = append(events, ev)
	}
	return events
}

// TestCloudEvents: with --cloudevents the records carry the binary-mode
// headers, and the CloudEvents Python SDK reads each as an event with the
// outbox id, source, type, subject, commit time and content type, and the
// record value as its data; with Avro values and with JSON values, each
// at-least-once and exactly-once (delivery_test.go: read_committed, every
// event exactly once).
func TestCloudEvents(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		format, contentType string
	}{{"avro", "application/avro"}, {"json", "application/json"}} {
		t.Run(tc.format, func(t *testing.T) {
			eachDelivery(t, true, func(t *testing.T, d delivery) {
				f := newFixture(t, "")
				c := d.consume(t, "^"+f.topicPrefix+`\..*`)
				r := startRelay(t, d.with(f.args("--cloudevents", "true", "--cloudevents-source", "/shop/orders", "--value-format", tc.format)))
				r.waitStreaming(60 * time.Second)
				ctx := context.Background()
				conn := connect(t)
				agg := uuidFor(700)
				before := time.Now()
				ids, err := f.insertTx(ctx, conn, []event{
					{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, 1)},
					{AggregateType: "Order", AggregateID: agg, EventType: "OrderCancelled", Payload: orderCancelled(agg, 2)},
				})
				if err != nil {
					t.Fatal(err)
				}
				after := time.Now()
				recs := c.waitIDs(60*time.Second, ids)
				events := sdkRead(t, recs)
				if len(events) != len(recs) {
					t.Fatalf("SDK read %d events from %d records", len(events), len(recs))
				}
				for i, ev := range events {
					rec := recs[i]
					want := map[string]string{"specversion": "1.0", "id": rec.Headers["id"], "source": "/shop/orders",
						"type": rec.Headers["event_type"], "subject": agg, "datacontenttype": tc.contentType}
					for k, v := range want {
						if ev[k] != v {
							t.Errorf("event %d: %s = %q, want %q (%v)", i, k, ev[k], v, ev)
						}
					}
					ts, err := time.Parse(time.RFC3339Nano, ev["time"])
					if err != nil || len(rec.Headers["ce_time"]) != len("2006-01-02T15:04:05.000Z") ||
						ts.Before(before.Truncate(time.Millisecond)) || ts.After(after) || !ts.Equal(rec.Timestamp) {
						t.Errorf("event %d: time %q (%v), want the commit time in RFC 3339 with milliseconds, the record's timestamp %v", i, ev["time"], err, rec.Timestamp)
					}
					if ev["data"] != base64.StdEncoding.EncodeToString(rec.Value) {
						t.Errorf("event %d: data is not the record value", i)
					}
				}
				if events[0]["id"] != strconv.FormatInt(ids[0], 10) || events[1]["type"] != "OrderCancelled" {
					t.Errorf("events %v", events)
				}
				if d.once() {
					end := currentLSN(t, conn)
					waitFor(t, 30*time.Second, "the slot to confirm past the events", func() bool { return f.confirmedFlush() >= end })
					checkOnce(t, c.records(), []string{strconv.FormatInt(ids[0], 10), strconv.FormatInt(ids[1], 10)})
				}
			})
		})
	}
}
