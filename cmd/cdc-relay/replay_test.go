package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/config"
	"github.com/cdc-relay/cdc-relay/outbox"
	replaypkg "github.com/cdc-relay/cdc-relay/replay"
)

// replayArgs are the fixture's settings for `cdc-relay replay`, plus extra.
func (f *fixture) replayArgs(extra ...string) []string {
	return append(append([]string{"replay"}, f.args()[1:]...), extra...)
}

// runReplay runs `cdc-relay replay` in process and returns its exit code,
// stdout and stderr.
func runReplay(t *testing.T, getenv func(string) string, args []string) (int, string, string) {
	t.Helper()
	if getenv == nil {
		getenv = env(nil)
	}
	var out, errOut bytes.Buffer
	code := run(args, getenv, &out, &errOut)
	t.Logf("%s\nexit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out.String(), tailString(errOut.String(), 3000))
	return code, out.String(), errOut.String()
}

// lines returns the lines of out that start with prefix.
func lines(out, prefix string) []string {
	var ls []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, prefix) {
			ls = append(ls, l)
		}
	}
	return ls
}

// Aggregate ids of the replay tests (OrderCreated's order_id is a uuid).
var o1, o2 = uuidFor(9001), uuidFor(9002)

// replayDDL is the default outbox with two more columns published as
// headers: a boolean (pgoutput's "t", Debezium's "true") and a timestamptz
// of precision 3.
const replayDDL = `CREATE TABLE %s (
	id bigserial PRIMARY KEY,
	aggregate_type text NOT NULL,
	aggregate_id text NOT NULL,
	event_type text NOT NULL,
	payload jsonb NOT NULL,
	headers jsonb NOT NULL DEFAULT '{}',
	created_at timestamptz NOT NULL DEFAULT now(),
	urgent boolean,
	due timestamptz(3)
)`

// TestReplaySameBytesAsRun: run publishes some rows from the slot, then
// replay publishes the same rows from the table: every record arrives
// again with the same topic, partition, key, headers and value bytes,
// dead letters included.
func TestReplaySameBytesAsRun(t *testing.T) {
	t.Parallel()
	f := newFixture(t, replayDDL)
	ids, byID, out := replaySameBytes(t, f, "--header-columns", "urgent,due:due_at,created_at:created")
	// The text forms are pgoutput's, read through the same builder.
	rec0 := byID[strconv.FormatInt(ids[0], 10)][1]
	if rec0.Headers["urgent"] != "true" || rec0.Headers["due_at"] != "2026-12-01T10:00:00.500Z" || rec0.Headers["traceparent"] == "" {
		t.Errorf("replayed headers %v", rec0.Headers)
	}
	if dl := byID[strconv.FormatInt(ids[3], 10)][1]; dl.Topic != f.dlq || !strings.Contains(dl.Headers["error"], "no schema") {
		t.Errorf("the invalid row went to %s with error %q, want %s", dl.Topic, dl.Headers["error"], f.dlq)
	}

	published := lines(out, "published ")
	if len(published) != 3 || len(lines(out, "dead-lettered ")) != 1 {
		t.Fatalf("stdout lines: %q", out)
	}
	for i, l := range published {
		want := fmt.Sprintf("published id=%d topic=%s key=", ids[i], f.topic("Order"))
		if !strings.HasPrefix(l, want) {
			t.Errorf("line %d %q, want prefix %q", i, l, want)
		}
	}
	if !strings.HasPrefix(lines(out, "dead-lettered ")[0], fmt.Sprintf("dead-lettered id=%d topic=%s key=i-1 reason=", ids[3], f.dlq)) {
		t.Errorf("dead-letter line %q", lines(out, "dead-lettered ")[0])
	}
	if s := lines(out, "replayed "); len(s) != 1 || !strings.HasPrefix(s[0], "replayed 4 events (1 to the dead-letter topic) from public."+f.table+", created_at >= ") {
		t.Errorf("summary %q", s)
	}
}

// TestReplaySameBytesJSON: the same with Debezium's formats: JSON values,
// JSON-with-schema keys, the id header alone and the timestamp from a
// column (which is the same for run and replay).
func TestReplaySameBytesJSON(t *testing.T) {
	t.Parallel()
	f := newFixture(t, replayDDL)
	ids, byID, out := replaySameBytes(t, f, "--value-format", "json", "--key-format", "json-schema", "--builtin-headers", "id",
		"--header-columns", "urgent", "--timestamp-column", "due")
	for _, id := range ids {
		pair := byID[strconv.FormatInt(id, 10)]
		if pair[1].Topic == f.dlq || pair[1].Value[0] != '{' || !pair[1].Timestamp.Equal(pair[0].Timestamp) && id != ids[1] && id != ids[3] {
			t.Errorf("id %d: %s value %q at %s, run's at %s", id, pair[1].Topic, pair[1].Value, pair[1].Timestamp, pair[0].Timestamp)
		}
	}
	if got := byID[strconv.FormatInt(ids[0], 10)][1].Timestamp; !got.Equal(time.Date(2026, 12, 1, 10, 0, 0, 500e6, time.UTC)) {
		t.Errorf("the timestamp column gave %s", got)
	}
	if n := len(lines(out, "published ")); n != len(ids) {
		t.Errorf("%d published lines, want %d: %q", n, len(ids), out)
	}
	if want := fmt.Sprintf(`published id=%d topic=%s key="{\"schema\":`, ids[0], f.topic("Order")); !strings.HasPrefix(lines(out, "published ")[0], want) {
		t.Errorf("a JSON key is quoted: %q, want prefix %q", lines(out, "published ")[0], want)
	}
}

// replaySameBytes inserts rows while run streams them, then replays them
// with the same flags, and checks that each replayed record has the
// topic, partition, key, headers and value of run's. It returns the ids,
// both records of each id (run's first), and replay's stdout.
func replaySameBytes(t *testing.T, f *fixture, flags ...string) ([]int64, map[string][]record, string) {
	t.Helper()
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	r := startRelay(t, f.args(flags...))
	r.waitStreaming(60 * time.Second)

	conn := f.connect()
	ctx := context.Background()
	var ids []int64
	for i, e := range []struct {
		aggType, aggID, evType, payload, headers, urgent, due string
	}{
		{"Order", o1, "OrderCreated", orderCreated(o1, 1), `{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`, "true", "2026-12-01 10:00:00.5+00"},
		{"Order", o1, "OrderCancelled", orderCancelled(o1, 2), `{}`, "false", ""},
		{"Order", o2, "OrderCreated", orderCreated(o2, 3), `{"tenant": "acme", "n": 3}`, "", "2026-12-01 10:00:00+05:30"},
		{"Invoice", "i-1", "InvoiceIssued", `{"invoice": 1}`, `{}`, "true", ""}, // no schema: a dead letter
	} {
		var id int64
		err := conn.QueryRow(ctx, fmt.Sprintf(`INSERT INTO public.%s (aggregate_type, aggregate_id, event_type, payload, headers, urgent, due)
			VALUES ($1, $2, $3, $4::jsonb, $5::jsonb, NULLIF($6, '')::boolean, NULLIF($7, '')::timestamptz) RETURNING id`, f.table),
			e.aggType, e.aggID, e.evType, e.payload, e.headers, e.urgent, e.due).Scan(&id)
		if err != nil {
			t.Fatalf("insert %d: %v", i, err)
		}
		ids = append(ids, id)
	}
	first := c.waitIDs(90*time.Second, ids)
	if code := r.terminate(); code != 0 {
		t.Fatalf("run exited %d", code)
	}
	if len(first) != len(ids) {
		t.Fatalf("run published %d records for %d rows", len(first), len(ids))
	}

	code, out, _ := runReplay(t, nil, f.replayArgs(append(flags, "--since", "1h")...))
	if code != 0 {
		t.Fatalf("replay exited %d", code)
	}
	var all []record
	waitFor(t, 90*time.Second, "every row twice", func() bool {
		all = c.records()
		for _, n := range distinctIDs(all) {
			if n < 2 {
				return false
			}
		}
		return len(all) >= 2*len(ids)
	})
	if len(all) != 2*len(ids) {
		t.Fatalf("%d records, want %d", len(all), 2*len(ids))
	}
	byID := map[string][]record{}
	for _, rec := range all {
		byID[rec.Headers["id"]] = append(byID[rec.Headers["id"]], rec)
	}
	for _, id := range ids {
		pair := byID[strconv.FormatInt(id, 10)]
		if len(pair) != 2 {
			t.Fatalf("id %d: %d records", id, len(pair))
		}
		got, want := pair[1], pair[0]
		if got.Topic != want.Topic || got.Partition != want.Partition || got.Key != want.Key || !bytes.Equal(got.Value, want.Value) || !reflect.DeepEqual(got.Headers, want.Headers) {
			t.Errorf("id %d: replayed %s[%d] key %q headers %v value % x\nrun wrote %s[%d] key %q headers %v value % x",
				id, got.Topic, got.Partition, got.Key, got.Headers, got.Value, want.Topic, want.Partition, want.Key, want.Headers, want.Value)
		}
	}
	return ids, byID, out
}

// TestReplayWindow: --since/--until choose rows by created_at; --dry-run
// publishes nothing. All rows have one key, so they share a partition and a
// later record proves that nothing was published before it.
func TestReplayWindow(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	var ids []int64
	for _, ago := range []string{"3 hours", "2 hours", "30 minutes"} {
		var id int64
		err := f.connect().QueryRow(context.Background(), fmt.Sprintf(`INSERT INTO public.%s (aggregate_type, aggregate_id, event_type, payload, created_at)
			VALUES ('Order', $3, 'OrderCreated', $1::jsonb, now() - $2::interval) RETURNING id`, f.table), orderCreated(o1, len(ids)), ago, o1).Scan(&id)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	now := time.Now().UTC()
	since, until := now.Add(-150*time.Minute).Format(time.RFC3339), now.Add(-90*time.Minute).Format(time.RFC3339)
	code, out, _ := runReplay(t, nil, f.replayArgs("--since", since, "--until", until))
	if code != 0 {
		t.Fatalf("replay exited %d", code)
	}
	if got := lines(out, "published "); len(got) != 1 || !strings.HasPrefix(got[0], fmt.Sprintf("published id=%d topic=%s key="+o1, ids[1], f.topic("Order"))) {
		t.Fatalf("--since %s --until %s published %q, want id %d alone", since, until, got, ids[1])
	}
	if s := lines(out, "replayed "); len(s) != 1 || s[0] != fmt.Sprintf("replayed 1 events (0 to the dead-letter topic) from public.%s, created_at >= %s < %s", f.table, since, until) {
		t.Errorf("summary %q", s)
	}

	code, out, _ = runReplay(t, nil, f.replayArgs("--since", "1h", "--dry-run"))
	if code != 0 {
		t.Fatalf("dry run exited %d", code)
	}
	if got := lines(out, "would be published "); len(got) != 1 || !strings.HasPrefix(got[0], fmt.Sprintf("would be published id=%d ", ids[2])) {
		t.Fatalf("dry run printed %q, want id %d alone", got, ids[2])
	}
	if len(lines(out, "published ")) != 0 || len(lines(out, "dry run: would replay 1 events (0 to the dead-letter topic)")) != 1 {
		t.Fatalf("dry run output %q", out)
	}

	code, _, _ = runReplay(t, nil, f.replayArgs("--from-id", strconv.FormatInt(ids[0], 10), "--to-id", strconv.FormatInt(ids[0], 10)))
	if code != 0 {
		t.Fatalf("replay by id exited %d", code)
	}
	recs := c.waitIDs(90*time.Second, []int64{ids[0]})
	var got []string
	for _, r := range recs {
		got = append(got, r.Headers["id"])
	}
	if want := []string{strconv.FormatInt(ids[1], 10), strconv.FormatInt(ids[0], 10)}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Kafka holds ids %v, want %v (the window's row, then the id range's; nothing from the dry run)", got, want)
	}
}

// TestReplayIDRanges: --from-id and --to-id choose rows by a bigint id and
// by a UUIDv7 id, inclusive, in id order; a v4 uuid bound is refused.
func TestReplayIDRanges(t *testing.T) {
	t.Parallel()
	t.Run("bigint", func(t *testing.T) {
		f := newFixture(t, "")
		evs := make([]event, 5)
		for i := range evs {
			evs[i] = event{AggregateType: "Order", AggregateID: uuidFor(i), EventType: "OrderCreated", Payload: orderCreated(uuidFor(i), i)}
		}
		ids, err := f.insertTx(context.Background(), f.connect(), evs)
		if err != nil {
			t.Fatal(err)
		}
		c := consume(t, "^"+f.topicPrefix+`\..*`)
		code, out, _ := runReplay(t, nil, f.replayArgs("--from-id", strconv.FormatInt(ids[1], 10), "--to-id", strconv.FormatInt(ids[3], 10)))
		if code != 0 {
			t.Fatalf("replay exited %d", code)
		}
		got := lines(out, "published ")
		if len(got) != 3 {
			t.Fatalf("published %q, want ids %v", got, ids[1:4])
		}
		for i, l := range got {
			if want := fmt.Sprintf("published id=%d topic=%s key=%s", ids[1+i], f.topic("Order"), uuidFor(1+i)); l != want {
				t.Errorf("line %q, want %q", l, want)
			}
		}
		if s := lines(out, "replayed "); len(s) != 1 || s[0] != fmt.Sprintf("replayed 3 events (0 to the dead-letter topic) from public.%s, id >= %d <= %d", f.table, ids[1], ids[3]) {
			t.Errorf("summary %q", s)
		}
		recs := c.waitIDs(90*time.Second, ids[1:4])
		for _, r := range recs {
			if r.Headers["id"] == strconv.FormatInt(ids[0], 10) || r.Headers["id"] == strconv.FormatInt(ids[4], 10) {
				t.Errorf("id %s is outside the range", r.Headers["id"])
			}
		}
		if code, _, stderr := runReplay(t, nil, f.replayArgs("--from-id", "0192f0c4-6f5e-7a3b-9c1d-2e4f6a8b0c1d")); code != exitConfig || !strings.Contains(stderr, "--from-id") || !strings.Contains(stderr, "not an integer") {
			t.Errorf("a uuid bound on a bigint id: exit %d, %q", code, stderr)
		}
	})
	t.Run("uuidv7", func(t *testing.T) {
		f := newFixture(t, strings.Replace(outboxDDL, "id bigserial PRIMARY KEY", "id uuid PRIMARY KEY", 1))
		conn := f.connect()
		var ids []string
		for i := 0; i < 5; i++ {
			id := outbox.NewID()
			if _, err := conn.Exec(context.Background(), fmt.Sprintf(`INSERT INTO public.%s (id, aggregate_type, aggregate_id, event_type, payload)
				VALUES ($1, 'Order', $3, 'OrderCreated', $2::jsonb)`, f.table), id, orderCreated(o1, i), o1); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		c := consume(t, "^"+f.topicPrefix+`\..*`)
		code, out, _ := runReplay(t, nil, f.replayArgs("--from-id", ids[1], "--to-id", strings.ToUpper(ids[3])))
		if code != 0 {
			t.Fatalf("replay exited %d", code)
		}
		got := lines(out, "published ")
		if len(got) != 3 {
			t.Fatalf("published %q, want ids %v", got, ids[1:4])
		}
		for i, l := range got {
			if want := fmt.Sprintf("published id=%s topic=%s key="+o1, ids[1+i], f.topic("Order")); l != want {
				t.Errorf("line %q, want %q", l, want)
			}
		}
		waitFor(t, 90*time.Second, "the three events in Kafka", func() bool { return len(c.records()) >= 3 })
		var inKafka []string
		for _, r := range c.records() {
			inKafka = append(inKafka, r.Headers["id"])
		}
		if !reflect.DeepEqual(inKafka, ids[1:4]) {
			t.Fatalf("Kafka holds %v, want %v in order", inKafka, ids[1:4])
		}
		for _, bound := range []string{uuidFor(1), "12"} {
			code, _, stderr := runReplay(t, nil, f.replayArgs("--from-id", ids[0], "--to-id", bound))
			if code != exitConfig || !strings.Contains(stderr, "--to-id") {
				t.Errorf("--to-id %s: exit %d, %q", bound, code, stderr)
			}
			if bound == uuidFor(1) && !strings.Contains(stderr, "version 4") {
				t.Errorf("a v4 bound is refused without saying why: %q", stderr)
			}
		}
	})
}

// TestReplayRefusals: settings replay cannot work with exit 2 naming the
// setting, before anything is read or published.
func TestReplayRefusals(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	noCreated := newFixture(t, `CREATE TABLE %s (id bigserial PRIMARY KEY, aggregate_type text, aggregate_id text, event_type text, payload jsonb)`)
	dir := t.TempDir()
	yamlWithSince := filepath.Join(dir, "relay.yaml")
	if err := os.WriteFile(yamlWithSince, []byte("since: 1h\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		env    map[string]string
		args   []string
		stderr []string
	}{
		{"no selector", nil, f.replayArgs(), []string{"--since", "--from-id"}},
		{"until alone", nil, f.replayArgs("--until", "1h"), []string{"--until", "needs --since"}},
		{"to-id alone", nil, f.replayArgs("--to-id", "5"), []string{"--to-id", "needs --from-id"}},
		{"bad time", nil, f.replayArgs("--since", "yesterday"), []string{"--since", "RFC 3339", "duration"}},
		{"bad until", nil, f.replayArgs("--since", "2h", "--until", "2026-13-01"), []string{"--until"}},
		{"until before since", nil, f.replayArgs("--since", "1h", "--until", "2h"), []string{"--until", "not after"}},
		{"negative duration", nil, f.replayArgs("--since", "-5m"), []string{"--since", "negative"}},
		{"since from the environment", map[string]string{"CDC_RELAY_SINCE": "1h", "CDC_RELAY_FROM_ID": "1"}, f.replayArgs(), []string{"--since"}},
		{"since from YAML", nil, f.replayArgs("--config", yamlWithSince), []string{"unknown key", "since"}},
		{"no created_at column", nil, noCreated.replayArgs("--since", "1h"), []string{"--since", "created_at", "--from-id"}},
		{"table-less outbox", nil, withTables(f.replayArgs("--since", "1h"), ""), []string{"--table", "nothing to read back"}},
		{"two tables, one without created_at", nil, withTables(f.replayArgs("--since", "1h"), "public."+f.table, "public."+noCreated.table), []string{"--since", noCreated.table, "created_at"}},
		{"non-integer id", nil, f.replayArgs("--from-id", "abc"), []string{"--from-id", "not an integer"}},
		{"to-id before from-id", nil, f.replayArgs("--from-id", "5", "--to-id", "4"), []string{"--to-id", "before"}},
		{"missing table", nil, withTables(f.replayArgs("--since", "1h"), "public.nope_"+f.name), []string{"--table", "does not exist"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, stderr := runReplay(t, env(tc.env), tc.args)
			if code != exitConfig {
				t.Fatalf("exit %d, want %d", code, exitConfig)
			}
			for _, want := range tc.stderr {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr %q does not say %q", stderr, want)
				}
			}
			if strings.Contains(out, "published") {
				t.Errorf("published something: %q", out)
			}
		})
	}

	// A table without created_at is replayed by id.
	if _, err := noCreated.connect().Exec(context.Background(), fmt.Sprintf(`INSERT INTO public.%s (aggregate_type, aggregate_id, event_type, payload)
		VALUES ('Order', $2, 'OrderCreated', $1::jsonb)`, noCreated.table), orderCreated(o1, 1), o1); err != nil {
		t.Fatal(err)
	}
	code, out, _ := runReplay(t, nil, noCreated.replayArgs("--from-id", "1", "--dry-run"))
	if code != 0 || len(lines(out, "would be published id=1 topic="+noCreated.topic("Order")+" key="+o1)) != 1 {
		t.Errorf("a table without created_at replayed by id: exit %d, %q", code, out)
	}
}

// TestReplayHelp: replay -h prints its own usage and exits 0.
func TestReplayHelp(t *testing.T) {
	for _, arg := range []string{"--help", "-h"} {
		var out bytes.Buffer
		if code := run([]string{"replay", arg}, env(nil), &out, &bytes.Buffer{}); code != 0 {
			t.Fatalf("replay %s exited %d", arg, code)
		}
		for _, want := range []string{"Usage: cdc-relay replay", "--since TIME", "--from-id", "--to-id", "--until", "--dry-run", "UUIDv7"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("replay %s does not mention %q:\n%s", arg, want, out.String())
			}
		}
	}
}

// TestReplayActionFlags: the action flags are taken from the command line
// in every flag form, and run's settings resolve beside them.
func TestReplayActionFlags(t *testing.T) {
	load := func(args ...string) (replaypkg.Flags, *config.Values, error) {
		v, err := config.Load(config.Replay, append(append([]string{}, required...), args...), env(nil), io.Discard, nil)
		if err != nil {
			return replaypkg.Flags{}, nil, err
		}
		rf, err := replayActions(v)
		return rf, v, err
	}
	if rf, _, err := load("--from-id", "1", "--from-id=3"); err == nil {
		t.Fatalf("--from-id given twice is accepted: %+v", rf)
	}
	rf, v, err := load("-since", "1h", "--until=5m", "--dry-run",
		"--cloudevents", "true", "--table", "", "--from-id", "3", "--to-id", "9", "--topic-template", "x.{event_type}")
	if err != nil {
		t.Fatal(err)
	}
	if want := (replaypkg.Flags{Since: "1h", Until: "5m", FromID: "3", ToID: "9", DryRun: true}); rf != want {
		t.Errorf("flags %+v, want %+v", rf, want)
	}
	if !v.Bool("cloudevents") || v.String("table") != "" || v.String("topic-template") != "x.{event_type}" {
		t.Errorf("settings: cloudevents %v, table %q, topic-template %q", v.Bool("cloudevents"), v.String("table"), v.String("topic-template"))
	}
	if _, _, err := load("--since"); err == nil {
		t.Error("--since without a value is accepted")
	}
	if _, _, err := load("--since", " "); err == nil || !strings.Contains(err.Error(), "--since") {
		t.Errorf("an empty --since: %v", err)
	}
	if rf, _, err := load("--dry-run", "false", "--since", "1h"); err != nil || rf.DryRun || rf.Since != "1h" {
		t.Errorf("--dry-run false: %+v, %v", rf, err)
	}
	if _, _, err := load("--dry-run", "yes"); err == nil || !strings.Contains(err.Error(), "--dry-run") {
		t.Errorf("--dry-run yes: %v", err)
	}
}

// TestReplayManyRows: more rows than one FETCH reads, with a small
// in-flight bound, all arrive, each key's rows in id order.
func TestReplayManyRows(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	const n = 2500 // more than two fetches of replayFetch
	f.exec(fmt.Sprintf(`INSERT INTO public.%s (aggregate_type, aggregate_id, event_type, payload)
		SELECT 'Order', agg, 'OrderCreated', jsonb_build_object('order_id', agg, 'customer_id', 'c', 'status', 'PENDING',
			'amount_cents', i, 'created_at', 1700000000000)
		FROM generate_series(1, %d) AS i, LATERAL (SELECT format('00000000-0000-4000-8000-%%s', lpad((i %% 7)::text, 12, '0')) AS agg) a`, f.table, n))
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	code, out, _ := runReplay(t, nil, f.replayArgs("--since", "1h", "--max-in-flight-events", "100", "--log-level", "info"))
	if code != 0 {
		t.Fatalf("replay exited %d", code)
	}
	if got := len(lines(out, "published ")); got != n {
		t.Fatalf("%d published lines, want %d", got, n)
	}
	want := make([]int64, n)
	for i := range want {
		want[i] = int64(i + 1)
	}
	recs := c.waitIDs(120*time.Second, want)
	last := map[string]int64{}
	for _, r := range recs {
		id, _ := strconv.ParseInt(r.Headers["id"], 10, 64)
		if id <= last[r.Key] {
			t.Fatalf("key %s: id %d after %d", r.Key, id, last[r.Key])
		}
		last[r.Key] = id
	}
}

// TestReplayCreatedAtMapping: with several tables configured, replay reads
// each, or the one --table chooses, and a YAML entry's own columns: names
// the created_at column that --since compares with in its table.
func TestReplayCreatedAtMapping(t *testing.T) {
	t.Parallel()
	f := newFixture(t, strings.Replace(outboxDDL, "created_at timestamptz", "made_at timestamptz", 1))
	if _, err := f.connect().Exec(context.Background(), fmt.Sprintf(`INSERT INTO public.%s (aggregate_type, aggregate_id, event_type, payload, made_at)
		VALUES ('Order', $2, 'OrderCreated', $1::jsonb, now() - interval '2 hours'), ('Order', $2, 'OrderCreated', $1::jsonb, now())`, f.table), orderCreated(o1, 1), o1); err != nil {
		t.Fatal(err)
	}
	other := newFixture(t, "")
	config := filepath.Join(t.TempDir(), "relay.yaml")
	yaml := fmt.Sprintf("table:\n  - public.%s\n  - name: public.%s\n    columns: {created_at: made_at}\n", other.table, f.table)
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	var args []string // the fixture's, without --table
	for i, a := range f.replayArgs() {
		if a == "--table" || (i > 0 && f.replayArgs()[i-1] == "--table") {
			continue
		}
		args = append(args, a)
	}
	args = append(args, "--config", config, "--since", "1h", "--dry-run")
	// Without --table, each table, each by its own created_at column.
	code, out, _ := runReplay(t, nil, args)
	summaries := lines(out, "dry run: would replay ")
	if code != 0 || len(lines(out, "would be published id=2 ")) != 1 || len(lines(out, "would be published ")) != 1 || len(summaries) != 3 ||
		!strings.HasPrefix(summaries[0], "dry run: would replay 0 events (0 to the dead-letter topic) from public."+other.table+", created_at >= ") ||
		!strings.HasPrefix(summaries[1], "dry run: would replay 1 events (0 to the dead-letter topic) from public."+f.table+", made_at >= ") ||
		summaries[2] != "dry run: would replay 1 events (0 to the dead-letter topic) from 2 tables in total; published nothing" {
		t.Fatalf("two tables in YAML, no --table: exit %d, %q: want id 2 alone, chosen by made_at, and a line per table and the total", code, out)
	}
	code, out, _ = runReplay(t, nil, append(args, "--table", "public."+f.table))
	if code != 0 || len(lines(out, "would be published id=2 ")) != 1 || len(lines(out, "would be published ")) != 1 ||
		!strings.Contains(out, "made_at >= ") || len(lines(out, "dry run: would replay ")) != 1 {
		t.Fatalf("exit %d, %q: want id 2 alone, chosen by made_at", code, out)
	}
	// Without the mapping the table has no created_at column.
	code, _, stderr := runReplay(t, nil, f.replayArgs("--since", "1h"))
	if code != exitConfig || !strings.Contains(stderr, "created_at") {
		t.Fatalf("no mapping: exit %d, %q", code, stderr)
	}
}

// TestReplayHalt: under --on-invalid halt an invalid row stops the replay
// (exit 1, naming the event) after the rows before it were published.
func TestReplayHalt(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	ids, err := f.insertTx(context.Background(), f.connect(), []event{
		{AggregateType: "Order", AggregateID: o1, EventType: "OrderCreated", Payload: orderCreated(o1, 1)},
		{AggregateType: "Order", AggregateID: o1, EventType: "NoSuchEvent", Payload: `{}`},
		{AggregateType: "Order", AggregateID: o1, EventType: "OrderCreated", Payload: orderCreated(o1, 3)},
	})
	if err != nil {
		t.Fatal(err)
	}
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	code, out, stderr := runReplay(t, nil, f.replayArgs("--since", "1h", "--on-invalid", "halt"))
	if code != exitFailed || !strings.Contains(stderr, fmt.Sprintf("id=%d", ids[1])) || !strings.Contains(stderr, "no schema") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if got := lines(out, "published "); len(got) != 1 || !strings.HasPrefix(got[0], fmt.Sprintf("published id=%d ", ids[0])) {
		t.Fatalf("published %q, want id %d alone", got, ids[0])
	}
	if len(lines(out, "replay incomplete: 1 events acknowledged (0 to the dead-letter topic) of 1 read from public."+f.table)) != 1 {
		t.Errorf("summary: %q", out)
	}
	c.waitIDs(90*time.Second, ids[:1])
}

// TestReplayEveryTable: with three tables configured and no --table of its
// own, replay --since reads every table with the one window: each row of
// each table in the window reaches Kafka (a dead letter included), none
// before the window does, each aggregate's rows in id order, and stdout
// has one summary line per table and their total.
func TestReplayEveryTable(t *testing.T) {
	t.Parallel()
	fs := []*fixture{newFixture(t, ""), newFixture(t, ""), newFixture(t, "")}
	ctx := context.Background()
	conn := fs[0].connect()
	args := fs[0].replayArgs("--since", "1h") // the first fixture's topics and dead-letter topic
	var tableArgs []string
	for i := 0; i < len(args); i++ {
		if args[i] == "--table" {
			i++
			for _, f := range fs {
				tableArgs = append(tableArgs, "--table", "public."+f.table)
			}
			continue
		}
		tableArgs = append(tableArgs, args[i])
	}
	want := make([][]int64, len(fs)) // each table's ids in the window
	var dead int64                   // the dead letter's id, in the third table
	for i, f := range fs {
		// Distinct ids, so that a record in Kafka names its table.
		base := int64(i+1) * 1_000_000
		f.exec(fmt.Sprintf("ALTER SEQUENCE public.%s_id_seq RESTART WITH %d", f.table, base))
		var old int64 // before the window
		if err := conn.QueryRow(ctx, fmt.Sprintf(`INSERT INTO public.%s (aggregate_type, aggregate_id, event_type, payload, created_at)
			VALUES ('Order', $2, 'OrderCreated', $1::jsonb, now() - interval '3 hours') RETURNING id`, f.table), orderCreated(uuidFor(100*i), 0), uuidFor(100*i)).Scan(&old); err != nil {
			t.Fatal(err)
		}
		var evs []event
		for k := 0; k < 2+i; k++ { // 2, 3 and 4 rows in the window
			agg := uuidFor(100*i + k%2)
			evs = append(evs, event{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, k)})
		}
		if i == 2 {
			evs = append(evs, event{AggregateType: "Invoice", AggregateID: "i-1", EventType: "InvoiceIssued", Payload: `{"invoice": 1}`}) // no schema
		}
		ids, err := f.insertTx(ctx, conn, evs)
		if err != nil {
			t.Fatal(err)
		}
		if old != base || ids[0] <= old {
			t.Fatalf("table %d: ids %d then %v, want from %d", i, old, ids, base)
		}
		want[i] = ids
		if i == 2 {
			dead = ids[len(ids)-1]
		}
	}

	c := consume(t, "^"+fs[0].topicPrefix+`\..*`)
	code, out, _ := runReplay(t, nil, tableArgs)
	if code != 0 {
		t.Fatalf("replay of three tables exited %d", code)
	}
	summaries := lines(out, "replayed ")
	if len(summaries) != len(fs)+1 {
		t.Fatalf("summary lines %q, want one per table and the total", summaries)
	}
	total := 0
	for i, f := range fs {
		deadN := 0
		if i == 2 {
			deadN = 1
		}
		prefix := fmt.Sprintf("replayed %d events (%d to the dead-letter topic) from public.%s, created_at >= ", len(want[i]), deadN, f.table)
		if !strings.HasPrefix(summaries[i], prefix) {
			t.Errorf("summary %q, want prefix %q", summaries[i], prefix)
		}
		total += len(want[i])
	}
	if s := fmt.Sprintf("replayed %d events (1 to the dead-letter topic) from 3 tables in total", total); summaries[len(fs)] != s {
		t.Errorf("total %q, want %q", summaries[len(fs)], s)
	}
	if n := len(lines(out, "published ")) + len(lines(out, "dead-lettered ")); n != total {
		t.Errorf("%d event lines, want %d", n, total)
	}

	var all []int64
	for _, ids := range want {
		all = append(all, ids...)
	}
	recs := c.waitIDs(90*time.Second, all)
	got := make([][]int64, len(fs)) // by table, in Kafka's order
	last := map[string]int64{}      // by key
	for _, r := range recs {
		id, err := strconv.ParseInt(r.Headers["id"], 10, 64)
		if err != nil {
			t.Fatalf("record %s[%d]@%d has id header %q", r.Topic, r.Partition, r.Offset, r.Headers["id"])
		}
		table := int(id/1_000_000) - 1
		if table < 0 || table >= len(fs) {
			t.Fatalf("record with id %d is of no table", id)
		}
		got[table] = append(got[table], id)
		if id <= last[r.Key] {
			t.Errorf("key %s: id %d after %d", r.Key, id, last[r.Key])
		}
		last[r.Key] = id
		if wantTopic := fs[0].topic("Order"); id == dead {
			wantTopic = fs[0].dlq
			if r.Topic != wantTopic {
				t.Errorf("id %d went to %s, want the dead-letter topic %s", id, r.Topic, wantTopic)
			}
		} else if r.Topic != wantTopic {
			t.Errorf("id %d went to %s, want %s", id, r.Topic, wantTopic)
		}
	}
	for i := range fs {
		sorted := append([]int64(nil), got[i]...)
		slices.Sort(sorted)
		if !reflect.DeepEqual(sorted, want[i]) {
			t.Errorf("table %d (public.%s): Kafka holds ids %v, want %v, each once", i, fs[i].table, sorted, want[i])
		}
	}
}
