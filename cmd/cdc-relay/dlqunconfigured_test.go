package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	dlqpkg "github.com/cdc-relay/cdc-relay/dlq"
)

// withTables is args with its --table flags replaced by tables.
func withTables(args []string, tables ...string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		if args[i] == "--table" {
			i++
			continue
		}
		out = append(out, args[i])
	}
	for _, t := range tables {
		out = append(out, "--table", t)
	}
	return out
}

// insertRows inserts events into table in one transaction and returns
// their ids.
func insertRows(t *testing.T, conn *pgx.Conn, table string, evs []event) []int64 {
	t.Helper()
	ctx := context.Background()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	ids := make([]int64, len(evs))
	for i, e := range evs {
		h := e.Headers
		if h == "" {
			h = "{}"
		}
		if err := tx.QueryRow(ctx, "INSERT INTO "+table+` (aggregate_type, aggregate_id, event_type, payload, headers)
			VALUES ($1, $2, $3, $4::jsonb, $5::jsonb) RETURNING id`, e.AggregateType, e.AggregateID, e.EventType, e.Payload, h).Scan(&ids[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestDLQRedriveUnconfiguredTable: a second outbox table added to the
// publication while the relay runs without it: its rows are
// unconfigured_table dead letters. dlq redrive without the table in
// --table refuses them, saying to add it, and appends them again (still
// pending); with the table in --table it builds each one as a live row of
// the table: the topic, key, id and other headers, value bytes and
// partition that cdc-relay replay (run's row → record step) gives the same
// row, the commit time as timestamp, in their original order. The row too
// large for its dead letter keeps its other columns, names the omitted
// one, is refused with the replay to run, and once replayed is retired
// with a reason: dlq stats counts it retired, the pending letters reach 0,
// an independent consumer reads the reason from --dlq-retired-topic, and a
// later redrive passes over it.
func TestDLQRedriveUnconfiguredTable(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	t.Cleanup(func() { f.exec("DROP PUBLICATION IF EXISTS " + f.publication) })
	other := "public.other_" + f.name
	f.exec(fmt.Sprintf(outboxDDL, other))
	t.Cleanup(func() { f.exec("DROP TABLE IF EXISTS " + other) })
	f.exec("ALTER SEQUENCE " + other + "_id_seq RESTART WITH 1000") // ids apart from the outbox's in the topic
	retiredTopic := f.dlq + ".retired"
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	r := startRelay(t, f.args("--max-record-bytes", "20000"))
	r.waitStreaming(60 * time.Second)
	f.exec(fmt.Sprintf("ALTER PUBLICATION %s ADD TABLE %s", f.publication, other))

	conn := f.connect()
	agg, agg2 := uuidFor(7301), uuidFor(7302)
	tp := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	first := insertRows(t, conn, other, []event{
		{"Order", agg, "OrderCreated", orderCreated(agg, 1), fmt.Sprintf(`{"traceparent": %q}`, tp)},
		{"Order", agg, "OrderCreated", orderCreated(agg, 2), ""},
	})
	insertInto(t, conn, "public."+f.table, 3)
	big := strings.Replace(orderCreated(agg2, 5), `"currency": "EUR"`, fmt.Sprintf(`"currency": "EUR", "note": %q`, strings.Repeat("x", 30000)), 1)
	second := insertRows(t, conn, other, []event{
		{"Order", agg, "OrderCreated", orderCreated(agg, 4), ""},
		{"Order", agg2, "OrderCreated", big, ""},
	})
	last := insertInto(t, conn, "public."+f.table, 6)
	rows := []int64{first[0], first[1], second[0]}
	bigID := strconv.FormatInt(second[1], 10)
	c.waitIDs(90*time.Second, []int64{last})
	var letters []record
	waitFor(t, 60*time.Second, "4 unconfigured_table dead letters", func() bool {
		letters = nil
		for _, rec := range c.records() {
			if rec.Topic == f.dlq && rec.Headers["error_kind"] == "unconfigured_table" {
				letters = append(letters, rec)
			}
		}
		return len(letters) >= 4
	})
	if code := r.terminate(); code != 0 {
		t.Fatalf("run exited %d", code)
	}
	bigLetter := letters[3]
	var kept map[string]*string
	if err := json.Unmarshal(bigLetter.Value, &kept); err != nil || bigLetter.Headers["omitted_columns"] != `["payload"]` ||
		kept["id"] == nil || *kept["id"] != bigID || kept["created_at"] == nil || kept["payload"] != nil ||
		!strings.Contains(bigLetter.Headers["error"], "cdc-relay replay --table "+other) {
		t.Fatalf("the dead letter of the large row: value %.300s (%v), headers %v", bigLetter.Value, err, bigLetter.Headers)
	}

	// Without the table in --table: refused, appended again, still pending.
	redrive := func(tables ...string) (int, string) {
		code, out, _ := runReplay(t, nil, withTables(f.dlqArgs("redrive", "", "--dlq-retired-topic", retiredTopic), tables...))
		return code, out
	}
	code, out := redrive("public." + f.table)
	if code != 0 || len(lines(out, `skipped id="" `)) != 4 || strings.Count(out, "is not a configured outbox table: add it to --table first") != 3 ||
		!strings.Contains(out, "redrive: redriven 0, still failing 0, skipped 4 (0 left out by the filters and re-appended, 4 that cannot be built again)") {
		t.Fatalf("redrive without the table: exit %d", code)
	}
	st := dlqStatsJSON(t, f, "--dlq-retired-topic", retiredTopic)
	if st.Pending != 4 || st.InTopic != 8 || st.Kinds["unconfigured_table"] != 4 || st.Retired != 0 {
		t.Fatalf("stats after the refused redrive: %+v", st)
	}

	// With the table: every row is an event, as a live row would be.
	code, out = redrive("public."+f.table, other)
	if code != 0 || !strings.Contains(out, "redrive: redriven 3, still failing 0, skipped 1 (0 left out by the filters and re-appended, 1 that cannot be built again)") ||
		!strings.Contains(out, "columns [\"payload\"] of the row did not fit in the dead letter") || !strings.Contains(out, "cdc-relay replay --table "+other+" --since") {
		t.Fatalf("redrive with the table: exit %d", code)
	}
	for _, id := range rows {
		if len(lines(out, fmt.Sprintf("redriven id=%d topic=%s key=%s ", id, f.topic("Order"), agg))) != 1 {
			t.Errorf("no redriven line for id %d", id)
		}
	}
	var got []record
	waitFor(t, 60*time.Second, "the redriven events", func() bool {
		got = nil
		for _, id := range rows {
			if recs := inTopic(c.records(), f.topic("Order"), strconv.FormatInt(id, 10)); len(recs) == 1 {
				got = append(got, recs[0])
			}
		}
		return len(got) == len(rows)
	})
	for i, g := range got {
		if g.Key != agg || g.Headers["event_type"] != "OrderCreated" || g.Headers["aggregate_type"] != "Order" || g.Headers["error"] != "" || g.Headers["outbox_row"] != "" {
			t.Errorf("event %d: key %q headers %v", rows[i], g.Key, g.Headers)
		}
		if !g.Timestamp.Equal(letters[i].Timestamp) {
			t.Errorf("event %d: timestamp %v, want the commit time %v", rows[i], g.Timestamp, letters[i].Timestamp)
		}
		if i > 0 && (g.Partition != got[0].Partition || g.Offset <= got[i-1].Offset) {
			t.Errorf("event %d at %d/%d, after %d/%d: not in the rows' order", rows[i], g.Partition, g.Offset, got[i-1].Partition, got[i-1].Offset)
		}
		v, _, err := newAvroDecoder().decode(g.Value)
		if err != nil || v["order_id"] != agg || fmt.Sprint(v["amount_cents"]) != fmt.Sprint([]int{1, 2, 4}[i]) {
			t.Errorf("event %d: value %v, %v", rows[i], v, err)
		}
	}
	if got[0].Headers["traceparent"] != tp {
		t.Errorf("the row's own header: %v", got[0].Headers)
	}

	// The same rows through run's row → record step (replay): the same
	// record but for the timestamp (replay's is created_at).
	replay := withTables(f.replayArgs("--from-id", strconv.FormatInt(rows[0], 10), "--to-id", strconv.FormatInt(rows[2], 10)), other)
	if code, _, _ := runReplay(t, nil, replay); code != 0 {
		t.Fatalf("replay exited %d", code)
	}
	waitFor(t, 60*time.Second, "the replayed events", func() bool {
		for _, id := range rows {
			if len(inTopic(c.records(), f.topic("Order"), strconv.FormatInt(id, 10))) != 2 {
				return false
			}
		}
		return true
	})
	for i, id := range rows {
		recs := inTopic(c.records(), f.topic("Order"), strconv.FormatInt(id, 10))
		live := recs[1]
		if live.Key != got[i].Key || live.Partition != got[i].Partition || !bytes.Equal(live.Value, got[i].Value) || !maps.Equal(live.Headers, got[i].Headers) {
			t.Errorf("event %d: redriven key %q partition %d headers %v value %x; replayed key %q partition %d headers %v value %x",
				id, got[i].Key, got[i].Partition, got[i].Headers, got[i].Value, live.Key, live.Partition, live.Headers, live.Value)
		}
	}

	// The large row: replayed as the letter says, then retired.
	if code, out, _ := runReplay(t, nil, withTables(f.replayArgs("--from-id", bigID, "--to-id", bigID), other)); code != 0 || len(lines(out, "published id="+bigID+" ")) != 1 {
		t.Fatalf("replay of the large row: exit %d", code)
	}
	if st = dlqStatsJSON(t, f, "--dlq-retired-topic", retiredTopic); st.Pending != 1 || st.Kinds["unconfigured_table"] != 1 {
		t.Fatalf("stats after the redrive: %+v", st)
	}
	reason := "replayed with cdc-relay replay --from-id " + bigID
	retire := append([]string{"dlq", "retire"}, f.statsArgs("--dlq-retired-topic", retiredTopic, "--kind", "unconfigured_table", "--reason", reason)[2:]...)
	code, out, _ = runReplay(t, nil, retire)
	if code != 0 || !strings.Contains(out, "retire: retired 1, already retired 0, left out by the filters 0") {
		t.Fatalf("dlq retire: exit %d", code)
	}
	if st = dlqStatsJSON(t, f, "--dlq-retired-topic", retiredTopic); st.Pending != 0 || st.Retired != 1 {
		t.Fatalf("stats after the retirement: %+v", st)
	}
	var ret dlqpkg.Retirement
	waitFor(t, 60*time.Second, "the retirement record", func() bool {
		for _, rec := range c.records() {
			if rec.Topic == retiredTopic {
				return json.Unmarshal(rec.Value, &ret) == nil
			}
		}
		return false
	})
	if ret.Reason != reason || ret.DLQTopic != f.dlq || ret.ErrorKind != "unconfigured_table" || ret.Table != other {
		t.Errorf("retirement %+v", ret)
	}
	code, out = redrive("public."+f.table, other)
	if code != 0 || !strings.Contains(out, "redrive: redriven 0, still failing 0, skipped 1 (0 left out by the filters and re-appended, 0 that cannot be built again, 1 retired)") ||
		len(lines(out, `skipped id="" `)) != 1 || !strings.Contains(out, "retired (dlq retire, reason "+strconv.Quote(reason)+")") {
		t.Fatalf("redrive after the retirement: exit %d", code)
	}
	if st = dlqStatsJSON(t, f, "--dlq-retired-topic", retiredTopic); st.Pending != 0 || st.Retired != 1 {
		t.Errorf("stats at the end: %+v", st)
	}
}

// TestDLQRedriveFollowUnconfigured: dlq redrive --follow appends an
// unconfigured_table letter whose table is not in --table again once, then
// holds the partition at that copy (a letter without an id header is known
// by its table and value) instead of taking it round again.
func TestDLQRedriveFollowUnconfigured(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	t.Cleanup(func() { f.exec("DROP PUBLICATION IF EXISTS " + f.publication) })
	other := "public.other_" + f.name
	f.exec(fmt.Sprintf(outboxDDL, other))
	t.Cleanup(func() { f.exec("DROP TABLE IF EXISTS " + other) })
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	r := startRelay(t, f.args())
	r.waitStreaming(60 * time.Second)
	f.exec(fmt.Sprintf("ALTER PUBLICATION %s ADD TABLE %s", f.publication, other))
	conn := f.connect()
	agg := uuidFor(7311)
	insertRows(t, conn, other, []event{{"Order", agg, "OrderCreated", orderCreated(agg, 1), ""}})
	last := insertInto(t, conn, "public."+f.table, 2)
	c.waitIDs(90*time.Second, []int64{last})
	letters := func() int {
		n := 0
		for _, rec := range c.records() {
			if rec.Topic == f.dlq && rec.Headers["table"] == other {
				n++
			}
		}
		return n
	}
	waitFor(t, 60*time.Second, "the dead letter", func() bool { return letters() == 1 })

	rd := startRelay(t, f.dlqArgs("redrive", "", "--follow", "--dlq-retired-topic", f.dlq+".retired"))
	waitFor(t, 90*time.Second, "the redrive holding the partition at its own copy", func() bool {
		return strings.Contains(rd.Output(), "reached a letter this run re-appended")
	})
	time.Sleep(3 * time.Second)
	if code := rd.terminate(); code != 0 {
		t.Errorf("redrive --follow exited %d after SIGTERM, want 0", code)
	}
	if out := rd.Output(); !strings.Contains(out, "redrive: redriven 0, still failing 0, skipped 1 (0 left out by the filters and re-appended, 1 that cannot be built again)") {
		t.Errorf("summary missing: %s", tailString(out, 2000))
	}
	if code := r.terminate(); code != 0 {
		t.Fatalf("run exited %d", code)
	}
	if n := letters(); n != 2 {
		t.Errorf("the letter is in the DLQ %d times, want twice (the relay's and one re-append)", n)
	}
}
