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

// TestCloudEventsStructured: with --cloudevents-mode structured each record
// value is the application/cloudevents+json envelope, which the CloudEvents
// Python SDK reads as an event (its JSON event format reader, given the
// record's content-type header): every attribute is the row's, the time is
// its transaction's commit time (bracketed by the clock inside the
// transaction and after COMMIT, and the record's timestamp), and the data
// is the row's payload: JSON as it is, Avro as data_base64 in the Confluent
// wire format, decoded by goavro with the writer schema from the registry.
// No ce_* header is written; the others stay.
func TestCloudEventsStructured(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		format, contentType string
	}{{"avro", "application/avro"}, {"json", "application/json"}} {
		t.Run(tc.format, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, "")
			c := consume(t, "^"+f.topicPrefix+`\..*`)
			r := startRelay(t, f.args("--cloudevents", "--cloudevents-source", "https://shop.example/orders", "--cloudevents-mode", "structured",
				"--value-format", tc.format))
			r.waitStreaming(60 * time.Second)
			ctx := context.Background()
			conn := connect(t)
			agg1, agg2 := uuidFor(710), uuidFor(711)
			evs := []event{
				{AggregateType: "Order", AggregateID: agg1, EventType: "OrderCreated", Payload: orderCreated(agg1, 1),
					Headers: `{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}`},
				{AggregateType: "Order", AggregateID: agg2, EventType: "OrderCancelled",
					Payload: `{"order_id": "` + agg2 + `", "customer_id": "c-2", "reason": "CUSTOMER_REQUEST", "amount_cents": 2, "currency": "EUR", "cancelled_at": 1700000000001}`},
			}
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			ids := make([]int64, len(evs))
			for i, e := range evs {
				h := e.Headers
				if h == "" {
					h = "{}"
				}
				if err := tx.QueryRow(ctx, "INSERT INTO public."+f.table+` (aggregate_type, aggregate_id, event_type, payload, headers)
					VALUES ($1, $2, $3, $4::jsonb, $5::jsonb) RETURNING id`, e.AggregateType, e.AggregateID, e.EventType, e.Payload, h).Scan(&ids[i]); err != nil {
					t.Fatal(err)
				}
			}
			var lo time.Time // the commit is after the transaction's last statement
			if err := tx.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&lo); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			hi := time.Now()
			// The aggregates may sit on different partitions: take each
			// event's first record, in the order of the rows.
			byID := map[string]record{}
			for _, rec := range c.waitIDs(60*time.Second, ids) {
				if _, dup := byID[rec.Headers["id"]]; !dup {
					byID[rec.Headers["id"]] = rec
				}
			}
			recs := make([]record, len(ids))
			for i, id := range ids {
				recs[i] = byID[strconv.FormatInt(id, 10)]
			}
			events := sdkRead(t, recs)
			if len(events) != len(recs) {
				t.Fatalf("SDK read %d events from %d records", len(events), len(recs))
			}
			dec := f.avroDecoder()
			for i, ev := range events {
				rec := recs[i]
				e := evs[i]
				if got := rec.Headers["content-type"]; got != "application/cloudevents+json" || ev["mode"] != "structured" {
					t.Errorf("event %d: content-type header %q, read as %s; want application/cloudevents+json, structured", i, got, ev["mode"])
				}
				for k := range rec.Headers {
					if strings.HasPrefix(k, "ce_") {
						t.Errorf("event %d: header %s in structured mode", i, k)
					}
				}
				if rec.Headers["event_type"] != e.EventType || rec.Headers["aggregate_type"] != "Order" || rec.Key != e.AggregateID {
					t.Errorf("event %d: key %q headers %v", i, rec.Key, rec.Headers)
				}
				if i == 0 && rec.Headers["traceparent"] != "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" {
					t.Errorf("event %d: traceparent header %q", i, rec.Headers["traceparent"])
				}
				want := map[string]string{"specversion": "1.0", "id": strconv.FormatInt(ids[i], 10), "source": "https://shop.example/orders",
					"type": e.EventType, "subject": e.AggregateID, "datacontenttype": tc.contentType}
				for k, v := range want {
					if ev[k] != v {
						t.Errorf("event %d: %s = %q, want %q (%v)", i, k, ev[k], v, ev)
					}
				}
				// The SDK keeps the envelope's members and nothing else: no
				// header became an attribute.
				if n := len(want) + 3; len(ev) != n { // + time, mode and the data
					t.Errorf("event %d: %d members, want %d: %v", i, len(ev), n, ev)
				}
				ts, err := time.Parse(time.RFC3339Nano, ev["time"])
				if err != nil || len(ev["time"]) != len("2006-01-02T15:04:05.000Z") || ts.Before(lo.Truncate(time.Millisecond)) || ts.After(hi) || !ts.Equal(rec.Timestamp) {
					t.Errorf("event %d: time %q (%v), want the commit time, between %v and %v, in RFC 3339 with milliseconds, the record's timestamp %v",
						i, ev["time"], err, lo, hi, rec.Timestamp)
				}
				var data []byte
				switch tc.format {
				case "json":
					data = []byte(ev["data_json"])
				case "avro":
					wire, err := base64.StdEncoding.DecodeString(ev["data"])
					if err != nil {
						t.Fatalf("event %d: data %q: %v", i, ev["data"], err)
					}
					native, _, err := dec.decode(wire)
					if err != nil {
						t.Fatalf("event %d: data_base64 is not a Confluent wire-format Avro value: %v", i, err)
					}
					if data, err = json.Marshal(avroAsDebeziumJSON(native)); err != nil {
						t.Fatal(err)
					}
				}
				if !jsonEqual(data, []byte(e.Payload)) {
					t.Errorf("event %d: data %s, want the row's payload %s", i, data, e.Payload)
				}
			}
		})
	}
}
