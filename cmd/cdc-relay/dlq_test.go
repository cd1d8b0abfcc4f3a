package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	dlqpkg "github.com/cdc-relay/cdc-relay/dlq"
	"github.com/cdc-relay/cdc-relay/internal/relaytest"
)

// orderShipped is the schema of an event type testdata/schemas lacks:
// its events are dead letters (no_schema) until it is deployed.
const orderShipped = `{"type": "record", "name": "OrderShipped", "namespace": "com.example.orders", "fields": [
  {"name": "order_id", "type": "string"}, {"name": "carrier", "type": "string"}]}`

// schemasPlus returns a schemas directory of testdata/schemas with the
// given files written over it ("OrderShipped.avsc": text).
func schemasPlus(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	copySchemas(t, dir)
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// dlqArgs are the fixture's settings for `cdc-relay dlq VERB`, with its
// own consumer group, the schemas of dir ("" for testdata/schemas) and
// extra.
func (f *fixture) dlqArgs(verb, dir string, extra ...string) []string {
	args := append([]string{"dlq", verb}, f.args()[1:]...)
	if dir != "" {
		args = withSchemasDir(args, dir)
	}
	return append(append(args, "--group", "g_"+f.name), extra...)
}

// statsArgs are the settings of dlq stats, which reads Kafka only.
func (f *fixture) statsArgs(extra ...string) []string {
	relaytest.Need(f.t, broker)
	return append([]string{"dlq", "stats", "--kafka-brokers", broker.Addr(), "--dlq-topic", f.dlq, "--group", "g_" + f.name}, extra...)
}

// dlqStatsJSON runs dlq stats --json, with extra settings.
func dlqStatsJSON(t *testing.T, f *fixture, extra ...string) dlqpkg.Counts {
	t.Helper()
	code, out, _ := runReplay(t, nil, f.statsArgs(append([]string{"--json"}, extra...)...))
	if code != 0 {
		t.Fatalf("dlq stats exited %d", code)
	}
	var c dlqpkg.Counts
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatalf("dlq stats --json: %v: %s", err, out)
	}
	return c
}

// inTopic returns the records of topic with id header id.
func inTopic(recs []record, topic, id string) []record {
	var out []record
	for _, r := range recs {
		if r.Topic == topic && r.Headers["id"] == id {
			out = append(out, r)
		}
	}
	return out
}

// shippedEvent is an OrderShipped event of aggregate agg: a dead letter
// (no_schema) until its schema is deployed.
func shippedEvent(agg string) event {
	return event{"Order", agg, "OrderShipped", fmt.Sprintf(`{"order_id": %q, "carrier": "ups"}`, agg), ""}
}

// redriveRows are the rows of the redrive tests, written in one
// transaction: an OrderShipped event (testdata/schemas has no schema for
// it) with a traceparent and an attempt header, an OrderCreated whose
// amount no schema takes, and a valid OrderCreated.
type redriveRows struct {
	agg1, agg2, tp     string // the aggregates, the traceparent
	shipped, bad, good string // the events' ids
	ids                []int64
}

// insertRedriveRows writes the redrive rows, of aggregates uuidFor(base)
// and uuidFor(base+1).
func (f *fixture) insertRedriveRows(base int) redriveRows {
	f.t.Helper()
	r := redriveRows{agg1: uuidFor(base), agg2: uuidFor(base + 1), tp: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	var err error
	r.ids, err = f.insertTx(context.Background(), f.connect(), []event{
		{"Order", r.agg1, "OrderShipped", fmt.Sprintf(`{"order_id": %q, "carrier": "dhl"}`, r.agg1), fmt.Sprintf(`{"traceparent": %q, "attempt": 3}`, r.tp)},
		{"Order", r.agg2, "OrderCreated", strings.Replace(orderCreated(r.agg2, 2), `"amount_cents": 2`, `"amount_cents": "lots"`, 1), ""},
		{"Order", r.agg2, "OrderCreated", orderCreated(r.agg2, 3), ""},
	})
	if err != nil {
		f.t.Fatal(err)
	}
	r.shipped, r.bad, r.good = strconv.FormatInt(r.ids[0], 10), strconv.FormatInt(r.ids[1], 10), strconv.FormatInt(r.ids[2], 10)
	return r
}

// TestDLQRedrive: a dead letter of an event type without a schema is
// redriven once the schema is deployed: it arrives in its topic with its
// key, id, headers and commit-time timestamp, decoded by an independent
// client; one that still fails is appended to the DLQ again with
// redrive_attempts one higher (exit 1), and a second run redrives nothing
// twice. dlq stats counts what is pending.
func TestDLQRedrive(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	r := startRelay(t, f.args())
	r.waitStreaming(60 * time.Second)
	rows := f.insertRedriveRows(7101)
	agg1, agg2, tp, shipped, bad, good := rows.agg1, rows.agg2, rows.tp, rows.shipped, rows.bad, rows.good
	recs := c.waitIDs(90*time.Second, rows.ids)
	if code := r.terminate(); code != 0 {
		t.Fatalf("run exited %d", code)
	}
	letters := inTopic(recs, f.dlq, shipped)
	if len(letters) != 1 || letters[0].Headers["error_kind"] != "no_schema" || letters[0].Headers["outbox_row"] == "" {
		t.Fatalf("dead letter of %s: %+v", shipped, letters)
	}
	letter := letters[0]
	if l := inTopic(recs, f.dlq, bad); len(l) != 1 || l[0].Headers["error_kind"] != "schema_mismatch" {
		t.Fatalf("dead letter of %s: %+v", bad, l)
	}

	st := dlqStatsJSON(t, f)
	if st.Pending != 2 || st.InTopic != 2 || st.Kinds["no_schema"] != 1 || st.Kinds["schema_mismatch"] != 1 ||
		st.EventTypes["OrderShipped"] != 1 || st.EventTypes["OrderCreated"] != 1 || st.Ages["1h"] != 2 || st.Reappended != 0 {
		t.Errorf("stats before the redrive: %+v", st)
	}

	fixed := schemasPlus(t, map[string]string{"OrderShipped.avsc": orderShipped})
	code, out, _ := runReplay(t, nil, f.dlqArgs("redrive", fixed, "--dry-run"))
	if code != 1 || len(lines(out, "would be redriven id="+shipped+" ")) != 1 || len(lines(out, "would be still failing id="+bad+" kind=schema_mismatch")) != 1 ||
		!strings.Contains(out, "dry run: would have: redriven 1, still failing 1, skipped 0") {
		t.Fatalf("dry run: exit %d", code)
	}

	code, out, _ = runReplay(t, nil, f.dlqArgs("redrive", fixed))
	if code != 1 || len(lines(out, "redriven id="+shipped+" topic="+f.topic("Order"))) != 1 ||
		len(lines(out, "still failing id="+bad+" kind=schema_mismatch redrive_attempts=1")) != 1 ||
		!strings.Contains(out, "redrive: redriven 1, still failing 1, skipped 0") {
		t.Fatalf("redrive: exit %d, want 1 (a letter still fails) with one redriven and one still failing", code)
	}
	var copy1 record
	waitFor(t, 60*time.Second, "the redriven event and the re-appended letter", func() bool {
		recs = c.records()
		again := inTopic(recs, f.dlq, bad)
		if len(again) < 2 {
			return false
		}
		copy1 = again[1]
		return len(inTopic(recs, f.topic("Order"), shipped)) > 0
	})
	got := inTopic(recs, f.topic("Order"), shipped)[0]
	if got.Key != agg1 || got.Headers["event_type"] != "OrderShipped" || got.Headers["aggregate_type"] != "Order" ||
		got.Headers["traceparent"] != tp || got.Headers["attempt"] != "3" || got.Headers["outbox_row"] != "" || got.Headers["error"] != "" {
		t.Errorf("redriven record: key %q headers %v", got.Key, got.Headers)
	}
	if !got.Timestamp.Equal(letter.Timestamp) {
		t.Errorf("redriven timestamp %v, want the commit time %v the dead letter kept", got.Timestamp, letter.Timestamp)
	}
	if good := inTopic(recs, f.topic("Order"), good); len(good) != 1 || !good[0].Timestamp.Equal(got.Timestamp) {
		t.Errorf("the valid event of the same transaction: %+v (its commit time is the redriven one's)", good)
	}
	v, _, err := newAvroDecoder().decode(got.Value)
	if err != nil || v["carrier"] != "dhl" || v["order_id"] != agg1 {
		t.Errorf("redriven value %v, %v", v, err)
	}
	if copy1.Headers["redrive_attempts"] != "1" || copy1.Headers["error_kind"] != "schema_mismatch" || copy1.Key != agg2 || copy1.Headers["outbox_row"] == "" {
		t.Errorf("re-appended letter: key %q headers %v", copy1.Key, copy1.Headers)
	}

	// A second run meets only the re-appended letter.
	code, out, _ = runReplay(t, nil, f.dlqArgs("redrive", fixed))
	if code != 1 || !strings.Contains(out, "redrive: redriven 0, still failing 1, skipped 0") ||
		len(lines(out, "still failing id="+bad+" kind=schema_mismatch redrive_attempts=2")) != 1 {
		t.Fatalf("second redrive: exit %d", code)
	}
	waitFor(t, 60*time.Second, "the letter re-appended a second time", func() bool {
		recs = c.records()
		return len(inTopic(recs, f.dlq, bad)) >= 3
	})
	if n := len(inTopic(recs, f.topic("Order"), shipped)); n != 1 {
		t.Errorf("the redriven event is in its topic %d times, want once", n)
	}
	st = dlqStatsJSON(t, f)
	if st.Pending != 1 || st.InTopic != 4 || st.Kinds["schema_mismatch"] != 1 || st.Reappended != 1 {
		t.Errorf("stats after two redrives: %+v", st)
	}
	code, out, _ = runReplay(t, nil, f.statsArgs())
	if code != 0 || !strings.Contains(out, "1 dead letters pending for group g_"+f.name+" (4 in the topic)") {
		t.Errorf("dlq stats: exit %d", code)
	}
}

// TestDLQUnknownFieldsRedrive: under --unknown-fields dlq an event whose
// payload has a field its schema lacks is a dead letter (unknown_field),
// counted and logged once per event type and field; once a schema with
// the field is deployed, dlq redrive sends it on and it arrives with the
// field.
func TestDLQUnknownFieldsRedrive(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	r := startRelay(t, f.args("--unknown-fields", "dlq"))
	r.waitStreaming(60 * time.Second)
	conn := f.connect()
	agg := uuidFor(7201)
	extra := strings.Replace(orderCreated(agg, 1), `"currency": "EUR",`, `"currency": "EUR", "extra_field": "surprise",`, 1)
	ids, err := f.insertTx(context.Background(), conn, []event{{"Order", agg, "OrderCreated", extra, ""}, {"Order", agg, "OrderCreated", extra, ""}})
	if err != nil {
		t.Fatal(err)
	}
	recs := c.waitIDs(90*time.Second, ids)
	for _, id := range ids {
		l := inTopic(recs, f.dlq, strconv.FormatInt(id, 10))
		if len(l) != 1 || l[0].Headers["error_kind"] != "unknown_field" || !strings.Contains(l[0].Headers["error"], `"extra_field"`) {
			t.Fatalf("event %d: %+v, want a dead letter of kind unknown_field", id, l)
		}
	}
	r.waitMetric("cdc_relay_unknown_fields_total", 30*time.Second, func(v float64) bool { return v == 2 })
	if code := r.terminate(); code != 0 {
		t.Fatalf("run exited %d", code)
	}
	if n := strings.Count(r.Output(), "payload field not in the event type's schema"); n != 1 {
		t.Errorf("%d WARN lines about the unknown field, want 1 (once per event type and field)", n)
	}

	schema, err := os.ReadFile(filepath.Join(schemaDir, "OrderCreated.avsc"))
	if err != nil {
		t.Fatal(err)
	}
	withField := strings.Replace(string(schema), `"fields": [`, `"fields": [
    {"name": "extra_field", "type": "string", "default": ""},`, 1)
	dir := schemasPlus(t, map[string]string{"OrderCreated.avsc": withField})
	code, out, _ := runReplay(t, nil, f.dlqArgs("redrive", dir, "--unknown-fields", "dlq", "--kind", "unknown_field"))
	if code != 0 || !strings.Contains(out, "redrive: redriven 2, still failing 0, skipped 0") {
		t.Fatalf("redrive: exit %d", code)
	}
	waitFor(t, 60*time.Second, "the redriven events", func() bool {
		recs = c.records()
		for _, id := range ids {
			if len(inTopic(recs, f.topic("Order"), strconv.FormatInt(id, 10))) == 0 {
				return false
			}
		}
		return true
	})
	for _, id := range ids {
		got := inTopic(recs, f.topic("Order"), strconv.FormatInt(id, 10))[0]
		v, _, err := newAvroDecoder().decode(got.Value)
		if err != nil || v["extra_field"] != "surprise" || got.Key != agg {
			t.Errorf("event %d: key %q value %v, %v; want extra_field surprise", id, got.Key, v, err)
		}
	}
}

// TestDLQRedriveKill: a redrive killed with -9 in the middle, then run
// again, leaves every letter's event in its topic at least once and none
// more than the batch in flight twice; a third run finds nothing to do.
func TestDLQRedriveKill(t *testing.T) {
	t.Parallel()
	// Enough letters that a redrive cannot finish between its first
	// redriven letter and the kill: over a hundred batches are left.
	const n = 12000
	f := newFixture(t, "")
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	r := startRelay(t, f.args())
	r.waitStreaming(60 * time.Second)
	f.exec(fmt.Sprintf(`INSERT INTO public.%s (aggregate_type, aggregate_id, event_type, payload)
		SELECT 'Order', 'o-' || (i %% 50), 'OrderShipped', jsonb_build_object('order_id', 'o-' || i, 'carrier', 'dhl')
		FROM generate_series(1, %d) i`, f.table, n))
	waitFor(t, 120*time.Second, fmt.Sprintf("%d dead letters", n), func() bool { return len(c.records()) >= n })
	if code := r.terminate(); code != 0 {
		t.Fatalf("run exited %d", code)
	}
	letters := map[string]bool{}
	for _, rec := range c.records() {
		if rec.Topic == f.dlq {
			letters[rec.Headers["id"]] = true
		}
	}
	if len(letters) != n {
		t.Fatalf("%d distinct dead letters, want %d", len(letters), n)
	}

	fixed := schemasPlus(t, map[string]string{"OrderShipped.avsc": orderShipped})
	rd := startRelay(t, f.dlqArgs("redrive", fixed))
	topic := f.topic("Order")
	redriven := func() map[string]int {
		m := map[string]int{}
		for _, rec := range c.records() {
			if rec.Topic == topic {
				m[rec.Headers["id"]]++
			}
		}
		return m
	}
	// Kill at the redrive's own first report of a redriven letter (it
	// comes after Kafka acknowledged that batch), not when a consumer sees
	// it, which can be after the redrive is done.
	waitFor(t, 120*time.Second, "the first redriven letter", func() bool { return strings.Contains(rd.Output(), "redriven id=") })
	rd.kill()
	if rd.exitCode == 0 {
		t.Fatalf("the redrive finished before the kill: nothing shows a kill in the middle (output: %s)", tailString(rd.Output(), 2000))
	}
	t.Logf("killed after %d events had arrived", len(redriven()))

	code, out, _ := runReplay(t, nil, f.dlqArgs("redrive", fixed))
	if code != 0 || !strings.Contains(out, "still failing 0, skipped 0") {
		t.Fatalf("redrive after the kill: exit %d", code)
	}
	var got map[string]int
	deadline := time.Now().Add(120 * time.Second)
	for got = redriven(); len(got) < n && time.Now().Before(deadline); got = redriven() {
		waitFor(t, 10*time.Second, "more events", func() bool { return len(redriven()) > len(got) || len(got) >= n })
	}
	if len(got) != n {
		t.Fatalf("%d of the %d letters' events arrived", len(got), n)
	}
	total := 0
	for id, k := range got {
		if !letters[id] {
			t.Errorf("event %s was never a dead letter", id)
		}
		total += k
	}
	t.Logf("%d duplicates after the kill", total-n)
	if dups := total - n; dups > dlqpkg.RedriveBatch {
		t.Errorf("%d duplicates, more than the %d letters one batch holds in flight", dups, dlqpkg.RedriveBatch)
	}
	code, out, _ = runReplay(t, nil, f.dlqArgs("redrive", fixed))
	if code != 0 || !strings.Contains(out, "redrive: redriven 0, still failing 0, skipped 0") {
		t.Errorf("third redrive: exit %d, want nothing left", code)
	}
}

// TestCheckWarnsIntegerIDs: check warns when two configured tables have
// integer ids (their ids can meet in one topic), and not when one of them
// has uuid ids.
func TestCheckWarnsIntegerIDs(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	serial, uuids := "public."+f.table+"_b", "public."+f.table+"_u"
	f.exec(fmt.Sprintf(outboxDDL, serial))
	f.exec(fmt.Sprintf(strings.Replace(outboxDDL, "id bigserial PRIMARY KEY", "id uuid PRIMARY KEY", 1), uuids))
	args := func(second string) []string {
		a := commandArgs("check", f.args())
		return append(a, "--table", second) // after the fixture's own
	}
	code, out := runCommand(args(serial))
	want := fmt.Sprintf("WARN  tables public.%s (id bigint), %s (id bigint) have integer ids, and their events can route to one topic", f.table, serial)
	if code != 0 || !strings.Contains(out, want) || !strings.Contains(out, "docs/outbox.sql") {
		t.Errorf("check with two bigserial tables = %d, want the warning %q:\n%s", code, want, out)
	}
	code, out = runCommand(args(uuids))
	if code != 0 || strings.Contains(out, "have integer ids") {
		t.Errorf("check with a bigserial and a uuid table = %d, want no warning:\n%s", code, out)
	}
}

// TestDLQRedriveFollow: with --follow the redrive goes on past the end
// offsets of its start and sends a letter the relay writes later; a letter
// that still fails is re-appended once and not taken round again by the
// same run; SIGTERM ends it with its summary.
func TestDLQRedriveFollow(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	r := startRelay(t, f.args())
	r.waitStreaming(60 * time.Second)
	conn := f.connect()
	ctx := context.Background()
	agg := uuidFor(7301)
	first, err := f.insertTx(ctx, conn, []event{shippedEvent(agg)})
	if err != nil {
		t.Fatal(err)
	}
	c.waitIDs(90*time.Second, first)

	fixed := schemasPlus(t, map[string]string{"OrderShipped.avsc": orderShipped})
	rd := startRelay(t, f.dlqArgs("redrive", fixed, "--follow"))
	topic := f.topic("Order")
	waitFor(t, 90*time.Second, "the first letter redriven", func() bool {
		return len(inTopic(c.records(), topic, strconv.FormatInt(first[0], 10))) == 1
	})
	// Written after the redrive started: one it can send, one that still fails.
	later, err := f.insertTx(ctx, conn, []event{shippedEvent(agg), {"Order", agg, "OrderCreated", `{"order_id": "not enough"}`, ""}})
	if err != nil {
		t.Fatal(err)
	}
	good, bad := strconv.FormatInt(later[0], 10), strconv.FormatInt(later[1], 10)
	waitFor(t, 90*time.Second, "the later letter redriven and the failing one re-appended", func() bool {
		recs := c.records()
		return len(inTopic(recs, topic, good)) == 1 && len(inTopic(recs, f.dlq, bad)) >= 2
	})
	waitFor(t, 60*time.Second, "the redrive holding the partition at its own letter", func() bool {
		return strings.Contains(rd.Output(), "reached a letter this run re-appended")
	})
	if code := rd.terminate(); code != 1 {
		t.Errorf("redrive --follow exited %d after SIGTERM, want 1 (a letter still fails)", code)
	}
	if out := rd.Output(); !strings.Contains(out, "redrive: redriven 2, still failing 1, skipped 0") {
		t.Errorf("summary missing: %s", tailString(out, 2000))
	}
	if code := r.terminate(); code != 0 {
		t.Fatalf("run exited %d", code)
	}
	if n := len(inTopic(c.records(), f.dlq, bad)); n != 2 {
		t.Errorf("the failing letter is in the DLQ %d times, want twice (the relay's and one re-append)", n)
	}
}
