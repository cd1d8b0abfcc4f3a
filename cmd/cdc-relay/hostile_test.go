package main

// The hostile input matrix (issue 3) beyond invalid_test.go: each kind of bad
// row goes to the dead-letter topic with a precise error header, or halts the
// relay under --on-invalid halt; valid rows around it arrive; odd but valid
// input (NULL or non-string headers, non-ASCII text, int64 limits) survives
// exactly; the outbox table changing mid-stream; a dead-letter publish that
// fails is retried and never confirmed early.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	recordpkg "github.com/cdc-relay/cdc-relay/record"
)

// nullableDDL is an outbox table whose user allows NULL in aggregate_id,
// payload and headers.
const nullableDDL = `CREATE TABLE %s (
	id bigserial PRIMARY KEY,
	aggregate_type text NOT NULL,
	aggregate_id text,
	event_type text NOT NULL,
	payload jsonb,
	headers jsonb,
	created_at timestamptz NOT NULL DEFAULT now()
)`

// nrow is one outbox row for insertRows; a nil field inserts NULL.
type nrow struct {
	AggregateType, AggregateID, EventType, Payload, Headers *string
}

func sp(s string) *string { return &s }

// validRow is a valid OrderCreated row with "{}" headers.
func validRow(agg string, n int) nrow {
	return nrow{sp("Order"), sp(agg), sp("OrderCreated"), sp(orderCreated(agg, n)), sp("{}")}
}

// insertRows inserts rows in one transaction. It returns their ids and
// pg_current_wal_insert_lsn() read inside the transaction after the inserts,
// just before COMMIT: the commit record starts at or after it. (A position
// inside an open transaction may be confirmed by the idle rule, which is
// safe: PostgreSQL resends every transaction that commits after the
// confirmed LSN; so "before" must be read after the inserts.)
func (f *fixture) insertRows(ctx context.Context, conn *pgx.Conn, rows []nrow) (ids []int64, beforeCommit uint64) {
	f.t.Helper()
	tx, err := conn.Begin(ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, r := range rows {
		var id int64
		if err := tx.QueryRow(ctx, fmt.Sprintf(`INSERT INTO public.%s (aggregate_type, aggregate_id, event_type, payload, headers)
			VALUES ($1, $2, $3, $4::jsonb, $5::jsonb) RETURNING id`, f.table), r.AggregateType, r.AggregateID, r.EventType, r.Payload, r.Headers).Scan(&id); err != nil {
			f.t.Fatalf("insert: %v", err)
		}
		ids = append(ids, id)
	}
	var lsn string
	if err := tx.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&lsn); err != nil {
		f.t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		f.t.Fatal(err)
	}
	return ids, parseLSN(f.t, lsn)
}

// consumeFast is the harness's consume with a short fetch wait: franz-go
// adds a topic that appears while a fetch is in flight (a dead-letter topic
// created by the relay) only to the next fetch, which by default waits up to
// 5 s on the quiet topics first.
func consumeFast(t *testing.T, topicRegex string) *consumer {
	t.Helper()
	return consume(t, topicRegex)
}

// byID returns the first record of each id.
func byID(recs []record) map[string]record {
	m := map[string]record{}
	for _, r := range recs {
		if _, ok := m[r.Headers["id"]]; !ok {
			m[r.Headers["id"]] = r
		}
	}
	return m
}

// hostileCase is one bad row and what the relay must do with it.
type hostileCase struct {
	name string
	row  nrow
	// wantError is the exact error header, or, starting with "~", a regexp
	// it must match.
	wantError string
}

func (tc hostileCase) checkError(t *testing.T, got string) {
	t.Helper()
	if re, ok := strings.CutPrefix(tc.wantError, "~"); ok {
		if !regexp.MustCompile(re).MatchString(got) {
			t.Errorf("%s: error %q does not match %q", tc.name, got, re)
		}
		return
	}
	if got != tc.wantError {
		t.Errorf("%s: error %q, want %q", tc.name, got, tc.wantError)
	}
}

// dlqReasons are the reason codes of cdc_relay_dlq_events_total, which a
// dead letter's error_kind header carries.
var dlqReasons = []string{recordpkg.ReasonSchema, recordpkg.ReasonNoSchema, recordpkg.ReasonAggregateID, recordpkg.ReasonTopic,
	recordpkg.ReasonTooLarge, recordpkg.ReasonHeaders, recordpkg.ReasonNull, recordpkg.ReasonPayload, recordpkg.ReasonTimestamp,
	recordpkg.ReasonColumn, recordpkg.ReasonMessage, recordpkg.ReasonNonTransactional, recordpkg.ReasonUnconfigured, recordpkg.ReasonUnknownField}

// hostileCases are the invalid rows that invalid_test.go does not cover.
func hostileCases(f *fixture, agg string) []hostileCase {
	long := strings.Repeat("A", 250-len(f.topicPrefix)-1) // topic of 250 characters
	withPayload := func(p string) nrow { r := validRow(agg, 1); r.Payload = sp(p); return r }
	withHeaders := func(h string) nrow { r := validRow(agg, 2); r.Headers = sp(h); return r }
	withAggType := func(a string) nrow { r := validRow(agg, 3); r.AggregateType = sp(a); return r }
	nullAgg := validRow(agg, 4)
	nullAgg.AggregateID = nil
	nullPayload := validRow(agg, 5)
	nullPayload.Payload = nil
	// ~1.2 MB: above the default --max-record-bytes (1,000,000) and the
	// broker's default message.max.bytes (1,048,588).
	huge := strings.Replace(orderCreated(agg, 6), `"c-6"`, `"`+strings.Repeat("H", 1200000)+`"`, 1)
	return []hostileCase{
		{name: "float for int", row: withPayload(strings.Replace(orderCreated(agg, 7), `"quantity": 1`, `"quantity": 1.5`, 1)),
			wantError: `payload of OrderCreated: field "items[0].quantity": 1.5 is not an integer`},
		{name: "float for long", row: withPayload(strings.Replace(orderCreated(agg, 8), `"amount_cents": 8`, `"amount_cents": 8.25`, 1)),
			wantError: `payload of OrderCreated: field "amount_cents": 8.25 is not an integer`},
		{name: "payload is a number", row: withPayload(`42`), wantError: `payload of OrderCreated: payload is a JSON number, want object`},
		{name: "payload is a string", row: withPayload(`"an order"`), wantError: `payload of OrderCreated: payload is a JSON string, want object`},
		{name: "payload is JSON null", row: withPayload(`null`), wantError: `payload of OrderCreated: payload is a JSON null, want object`},
		{name: "payload is NULL", row: nullPayload, wantError: `payload is NULL`},
		{name: "aggregate_id NULL", row: nullAgg, wantError: `aggregate_id is NULL`},
		{name: "aggregate_type empty", row: withAggType(""), wantError: `invalid topic name: aggregate_type is empty`},
		{name: "topic with slash", row: withAggType("Or/der"),
			wantError: `invalid topic name: "` + f.topic("Or/der") + `" has character '/'; Kafka allows only a-z A-Z 0-9 . _ -`},
		{name: "topic of 250 characters", row: withAggType(long), wantError: `invalid topic name: 250 characters, Kafka allows at most 249`},
		{name: "larger than message.max.bytes", row: withPayload(huge),
			wantError: `~^record is \d+ bytes, larger than the broker accepts \(--max-record-bytes 1000000\); the \d+-byte payload is omitted because it does not fit in a record$`},
		// Parts of a too-large row that the dead-letter record must drop too.
		{name: "headers larger than a record", row: withHeaders(`{"blob": "` + strings.Repeat("h", 1100000) + `"}`),
			wantError: `~^record is \d+ bytes, larger than the broker accepts \(--max-record-bytes 1000000\); the 11000\d\d-byte headers column is omitted because it does not fit in a record$`},
		{name: "aggregate_id larger than a record", row: nrow{sp("Order"), sp(strings.Repeat("k", 1100000)), sp("OrderCreated"), sp(orderCreated(agg, 9)), sp("{}")},
			wantError: `~^record is \d+ bytes, larger than the broker accepts \(--max-record-bytes 1000000\); the 1100000-byte key is omitted because it does not fit in a record$`},
		{name: "headers an array", row: withHeaders(`["traceparent", "00-x-01"]`), wantError: `headers column is not a JSON object: got an array`},
		{name: "headers a string", row: withHeaders(`"traceparent"`), wantError: `headers column is not a JSON object: got a string`},
		// The row's own "error" header must not mask the relay's reason:
		// consumers read the last header of a name (Java's lastHeader).
		{name: "row header named error", row: nrow{sp("Order"), sp(agg), sp("OrderCreated"), sp(`7`), sp(`{"error": "the row's own"}`)},
			wantError: `payload of OrderCreated: payload is a JSON number, want object`},
		{name: "headers set the id header", row: withHeaders(`{"id": "spoofed", "tenant": "t1"}`),
			wantError: `headers column sets "id", a header the relay reserves for the outbox id, event_type and aggregate_type`},
	}
}

// TestHostileInputDLQ: every hostile row lands in the dead-letter topic
// with its exact reason, the raw payload (unless it cannot fit) and the
// fixed headers; the valid rows in the same transactions arrive; odd but
// valid rows arrive exactly. It runs at-least-once and exactly-once
// (delivery_test.go), where the dead letters go inside the Kafka
// transactions of their PostgreSQL transactions: a read_committed consumer
// reads every row and every dead letter exactly once, in order, and each
// dead letter is counted once.
func TestHostileInputDLQ(t *testing.T) { t.Parallel(); eachDelivery(t, true, testHostileInputDLQ) }

func testHostileInputDLQ(t *testing.T, d delivery) {
	f := newFixture(t, nullableDDL)
	c := d.consume(t, "^"+f.topicPrefix+`\..*`)
	// --max-record-bytes is left at its default.
	r := startRelay(t, d.with(f.args()))
	r.waitStreaming(60 * time.Second)
	ctx := context.Background()
	conn := connect(t)
	agg := uuidFor(301)

	cases := hostileCases(f, agg)
	var validIDs []int64
	var order []string // every id in commit order
	bad := map[string]hostileCase{}
	for i, tc := range cases {
		ids, _ := f.insertRows(ctx, conn, []nrow{validRow(agg, 1000+i), tc.row, validRow(agg, 2000+i)})
		validIDs = append(validIDs, ids[0], ids[2])
		for _, id := range ids {
			order = append(order, strconv.FormatInt(id, 10))
		}
		bad[strconv.FormatInt(ids[1], 10)] = tc
	}

	// Valid rows that look hostile.
	// 1. headers NULL: only the fixed headers.
	nullHeaders := validRow(agg, 3001)
	nullHeaders.Headers = nil
	// 2. Non-string header values: numbers and booleans become their text,
	// nested values their JSON text (as jsonb prints it), strings unescaped.
	mixed := validRow(agg, 3002)
	mixed.Headers = sp(`{"n": 42, "neg": -7, "dec": 1.50, "big": 123456789012345678901234567890, "t": true, "f": false,
		"o": {"b": {"c": null}, "a": [1, "x"]}, "arr": [1, 2.5, "}"], "s": "q\"uote\\ \u00e9 😀", "ce_source": "/ö/😀"}`)
	// 3. A topic of exactly 249 characters is valid.
	longest := validRow(agg, 3003)
	longest.AggregateType = sp(strings.Repeat("B", 249-len(f.topicPrefix)-1))
	odd, _ := f.insertRows(ctx, conn, []nrow{nullHeaders, mixed, longest})
	// 4. Non-ASCII text, emoji, escapes and the int64 and int32 limits.
	uni := unicodeRows(agg)
	uniIDs, _ := f.insertRows(ctx, conn, uni)

	all := append(append(append([]int64(nil), validIDs...), odd...), uniIDs...)
	for id := range bad {
		n, _ := strconv.ParseInt(id, 10, 64)
		all = append(all, n)
	}
	recs := byID(c.waitIDs(120*time.Second, all))

	for _, id := range validIDs {
		if rec := recs[strconv.FormatInt(id, 10)]; rec.Topic != f.topic("Order") {
			t.Errorf("valid event %d went to %q", id, rec.Topic)
		}
	}
	for id, tc := range bad {
		rec := recs[id]
		if rec.Topic != f.dlq {
			t.Errorf("%s: event %s went to %q, want the DLQ %q", tc.name, id, rec.Topic, f.dlq)
			continue
		}
		tc.checkError(t, rec.Headers[recordpkg.HeaderError])
		if rec.Headers["event_type"] != "OrderCreated" || rec.Headers["aggregate_type"] != deref(tc.row.AggregateType) {
			t.Errorf("%s: DLQ headers %v", tc.name, rec.Headers)
		}
		wantKey := deref(tc.row.AggregateID)
		if strings.Contains(rec.Headers[recordpkg.HeaderError], "-byte key is omitted") {
			wantKey = ""
		}
		if rec.Key != wantKey {
			t.Errorf("%s: DLQ key %.40q, want %.40q", tc.name, rec.Key, wantKey)
		}
		if strings.Contains(rec.Headers[recordpkg.HeaderError], "headers column is omitted") && (len(rec.Headers) != 6 || !strings.Contains(rec.Headers[recordpkg.HeaderRow], `"omitted":true`)) {
			t.Errorf("%s: DLQ headers %.200q, want only id, event_type, aggregate_type, outbox_row (omitted) error_kind and error", tc.name, rec.Headers)
		}
		if kind := rec.Headers[recordpkg.HeaderErrorKind]; !slices.Contains(dlqReasons, kind) {
			t.Errorf("%s: DLQ error_kind %q, want one of %v", tc.name, kind, dlqReasons)
		}
		switch {
		case strings.Contains(rec.Headers[recordpkg.HeaderError], "-byte payload is omitted") || tc.row.Payload == nil:
			if len(rec.Value) != 0 {
				t.Errorf("%s: DLQ value has %d bytes, want none", tc.name, len(rec.Value))
			}
		case !jsonEqual(rec.Value, []byte(*tc.row.Payload)):
			t.Errorf("%s: DLQ value %.200q, want the raw payload %.200q", tc.name, rec.Value, *tc.row.Payload)
		}
	}

	// headers NULL: exactly the three fixed headers.
	rec := recs[strconv.FormatInt(odd[0], 10)]
	wantFixed := map[string]string{"id": strconv.FormatInt(odd[0], 10), "event_type": "OrderCreated", "aggregate_type": "Order"}
	if rec.Topic != f.topic("Order") || !maps.Equal(rec.Headers, wantFixed) {
		t.Errorf("headers NULL: topic %q headers %v, want %v", rec.Topic, rec.Headers, wantFixed)
	}
	// Non-string header values, compared exactly.
	rec = recs[strconv.FormatInt(odd[1], 10)]
	wantMixed := map[string]string{"id": strconv.FormatInt(odd[1], 10), "event_type": "OrderCreated", "aggregate_type": "Order",
		"n": "42", "neg": "-7", "dec": "1.50", "big": "123456789012345678901234567890", "t": "true", "f": "false",
		"o": `{"a": [1, "x"], "b": {"c": null}}`, "arr": `[1, 2.5, "}"]`, "s": "q\"uote\\ é 😀", "ce_source": "/ö/😀"}
	if rec.Topic != f.topic("Order") || !maps.Equal(rec.Headers, wantMixed) {
		t.Errorf("non-string headers: topic %q\n got %q\nwant %q", rec.Topic, rec.Headers, wantMixed)
	}
	if rec := recs[strconv.FormatInt(odd[2], 10)]; rec.Topic != f.topic(*longest.AggregateType) || len(rec.Topic) != 249 {
		t.Errorf("249-character topic: event went to %q (%d characters)", rec.Topic, len(rec.Topic))
	}
	checkUnicode(t, uni, uniIDs, recs)

	want := float64(len(cases))
	if got := r.waitMetric("cdc_relay_dlq_events_total", 10*time.Second, func(v float64) bool { return v >= want }); got != want {
		t.Fatalf("cdc_relay_dlq_events_total = %v, want %v", got, want)
	}
	if d.once() {
		for _, id := range append(odd, uniIDs...) {
			order = append(order, strconv.FormatInt(id, 10))
		}
		end := currentLSN(t, conn)
		waitFor(t, 30*time.Second, "the slot to confirm past the events", func() bool { return f.confirmedFlush() >= end })
		checkOnce(t, c.records(), order)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// unicodeRows are valid OrderCreated rows with non-ASCII text, emoji (also
// as escaped surrogate pairs), escapes, and the limits of long and int.
func unicodeRows(agg string) []nrow {
	payloads := []string{
		`{"order_id": "` + agg + `", "customer_id": "Zoë Ünïcødé — 東京の注文 — 🚀👩‍👩‍👧 — \"q\" \\ \t \u0001 \u00e9 \ud83d\ude00 end",
		  "status": "PENDING", "amount_cents": 9223372036854775807, "currency": "€",
		  "items": [{"sku": "ß-ø-😀", "quantity": 2147483647, "unit_price_cents": -9223372036854775808}],
		  "coupon_code": "ünï ✓", "created_at": 1700000000000}`,
		`{"order_id": "` + agg + `", "customer_id": "مرحبا שלום नमस्ते 🇺🇦", "status": "CONFIRMED",
		  "amount_cents": -9223372036854775808, "currency": "¥",
		  "items": [{"sku": "Ω", "quantity": -2147483648, "unit_price_cents": 9223372036854775807}],
		  "created_at": 1700000000001}`,
	}
	rows := make([]nrow, len(payloads))
	for i, p := range payloads {
		rows[i] = nrow{sp("Order"), sp(agg), sp("OrderCreated"), sp(p), sp(`{"note": "Grüße 🙂"}`)}
	}
	return rows
}

// checkUnicode decodes the records with goavro (schema fetched by id) and
// compares every field with the payload as encoding/json reads it: strings
// byte for byte, integers exactly.
func checkUnicode(t *testing.T, rows []nrow, ids []int64, recs map[string]record) {
	t.Helper()
	dec := newAvroDecoder()
	for i, row := range rows {
		rec := recs[strconv.FormatInt(ids[i], 10)]
		if rec.Headers["note"] != "Grüße 🙂" {
			t.Errorf("unicode %d: header note = %q", i, rec.Headers["note"])
		}
		got, _, err := dec.decode(rec.Value)
		if err != nil {
			t.Fatalf("unicode %d: %v", i, err)
		}
		var want map[string]any
		d := json.NewDecoder(strings.NewReader(*row.Payload))
		d.UseNumber()
		if err := d.Decode(&want); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"customer_id", "currency"} {
			if got[k] != want[k] {
				t.Errorf("unicode %d: %s = %q, want %q", i, k, got[k], want[k])
			}
			if !bytes.Contains(rec.Value, []byte(want[k].(string))) {
				t.Errorf("unicode %d: the Avro body does not hold the UTF-8 bytes of %s", i, k)
			}
		}
		if wantAmount, _ := want["amount_cents"].(json.Number).Int64(); got["amount_cents"] != wantAmount {
			t.Errorf("unicode %d: amount_cents = %v, want %d", i, got["amount_cents"], wantAmount)
		}
		gotItem := got["items"].([]any)[0].(map[string]any)
		wantItem := want["items"].([]any)[0].(map[string]any)
		wantQty, _ := wantItem["quantity"].(json.Number).Int64()
		wantPrice, _ := wantItem["unit_price_cents"].(json.Number).Int64()
		if gotItem["sku"] != wantItem["sku"] || gotItem["quantity"] != int32(wantQty) || gotItem["unit_price_cents"] != wantPrice {
			t.Errorf("unicode %d: item %v, want %v", i, gotItem, wantItem)
		}
		wantCoupon := any(nil)
		if s, ok := want["coupon_code"].(string); ok {
			wantCoupon = map[string]any{"string": s}
		}
		if fmt.Sprint(got["coupon_code"]) != fmt.Sprint(wantCoupon) {
			t.Errorf("unicode %d: coupon_code = %v, want %v", i, got["coupon_code"], wantCoupon)
		}
	}
}

// TestHostileInputHalt: under --on-invalid halt each kind of bad row stops
// the relay (exit 1) with a message naming its id and the reason; what came
// before is confirmed, nothing past it; restarted in dlq mode the relay
// delivers the row to the DLQ and the valid rows around it. Each case runs
// at-least-once and exactly-once (delivery_test.go), where the halt leaves
// nothing of the invalid event's transaction visible to read_committed and
// after the restart each event is read once.
func TestHostileInputHalt(t *testing.T) {
	t.Parallel()
	agg := uuidFor(302)
	// The cases, picked by name: one per family (payload, NULL key, topic,
	// size, headers).
	for _, name := range []string{"float for int", "payload is a number", "aggregate_id NULL", "topic with slash",
		"topic of 250 characters", "larger than message.max.bytes", "headers an array"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			eachDelivery(t, true, func(t *testing.T, d delivery) {
				f := newFixture(t, nullableDDL)
				var tc hostileCase
				for _, c := range hostileCases(f, agg) {
					if c.name == name {
						tc = c
					}
				}
				c := d.consume(t, "^"+f.topicPrefix+`\..*`)
				r := startRelay(t, d.with(f.args("--on-invalid", "halt", "--halt-linger", "1s")))
				r.waitStreaming(60 * time.Second)
				ctx := context.Background()
				conn := connect(t)
				// goodBefore is read inside the earlier transaction, before its
				// commit: the other parallel subtests write WAL too, so a position
				// read after the commit may lie beyond its end, which a halted
				// relay (no idle advance) never confirms.
				good, goodBefore := f.insertRows(ctx, conn, []nrow{validRow(agg, 1)})
				ids, before := f.insertRows(ctx, conn, []nrow{validRow(agg, 2), tc.row, validRow(agg, 3)})
				if code := r.wait(60 * time.Second); code != exitFailed {
					t.Fatalf("exit code = %d, want %d", code, exitFailed)
				}
				out := r.Output()
				if !strings.Contains(out, fmt.Sprintf("id=%d ", ids[1])) {
					t.Errorf("halt output does not name event %d:\n%s", ids[1], tailString(out, 3000))
				}
				reason := tc.wantError
				if strings.HasPrefix(reason, "~") {
					reason = "larger than the broker accepts"
				}
				if !strings.Contains(out, reason) {
					t.Errorf("halt output does not give the reason %q:\n%s", reason, tailString(out, 3000))
				}
				if got := f.confirmedFlush(); got > before {
					t.Fatalf("confirmed_flush_lsn %X passed the invalid event's transaction (its commit starts after %X)", got, before)
				}
				if !d.once() {
					// What came before was drained and confirmed.
					waitFor(t, 10*time.Second, "the earlier transaction confirmed", func() bool { return f.confirmedFlush() > goodBefore })
					c.waitIDs(30*time.Second, good)
				} else {
					// The earlier transaction may share the open Kafka
					// transaction with the start of the halted one, which
					// can only commit where that one ends: the relay aborts
					// it at once instead of waiting for --shutdown-timeout, and
					// read_committed sees nothing of the halted transaction.
					if !strings.Contains(out, "so it is aborted, not drained") {
						t.Errorf("the halt does not say the open Kafka transaction is aborted:\n%s", tailString(out, 3000))
					}
					for _, rec := range c.records() {
						if id := rec.Headers["id"]; id != strconv.FormatInt(good[0], 10) {
							t.Errorf("read_committed saw record %s of the halted transaction on %s", id, rec.Topic)
						}
					}
				}

				r2 := startRelay(t, d.with(f.args()))
				recs := byID(c.waitIDs(60*time.Second, ids))
				if got := recs[strconv.FormatInt(ids[1], 10)].Topic; got != f.dlq {
					t.Errorf("after restart in dlq mode the bad event went to %q", got)
				}
				for _, id := range []int64{ids[0], ids[2]} {
					if got := recs[strconv.FormatInt(id, 10)].Topic; got != f.topic("Order") {
						t.Errorf("valid event %d went to %q", id, got)
					}
				}
				if d.once() {
					end := currentLSN(t, conn)
					waitFor(t, 30*time.Second, "the slot to confirm past the events", func() bool { return f.confirmedFlush() >= end })
					checkOnce(t, c.records(), idStrings(append(good, ids...)))
				}
				if code := r2.terminate(); code != 0 {
					t.Fatalf("exit code %d", code)
				}
			})
		})
	}
}

// TestUnparsableSchemaRefusesStart: a .avsc that is not JSON, or not Avro,
// stops the relay before it connects anywhere (exit 2), naming each file.
func TestUnparsableSchemaRefusesStart(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	dir := t.TempDir()
	copySchemas(t, dir)
	files := map[string]string{
		"Broken.avsc":  `{"type": "record", "name": "Broken", "fields": [`,
		"BadType.avsc": `{"type": "record", "name": "BadType", "fields": [{"name": "a", "type": "no_such_type"}]}`,
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	args := withSchemasDir(f.args(), dir)
	start := time.Now()
	r := startRelay(t, args)
	if code := r.wait(30 * time.Second); code != exitConfig {
		t.Fatalf("exit code = %d, want %d; output:\n%s", code, exitConfig, r.Output())
	}
	out := r.Output()
	for name, why := range map[string]string{"Broken.avsc": "invalid JSON", "BadType.avsc": "no_such_type"} {
		path := filepath.Join(dir, name)
		if !regexp.MustCompile(regexp.QuoteMeta(path) + `: [^\n]*` + regexp.QuoteMeta(why)).MatchString(out) {
			t.Errorf("output does not name %s with %q:\n%s", path, why, out)
		}
	}
	// It refused before creating anything.
	var n int
	connect(t).QueryRow(context.Background(), "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", f.slot).Scan(&n)
	if n != 0 {
		t.Errorf("a slot was created although the schemas are bad")
	}
	t.Logf("refused in %s", time.Since(start).Round(time.Millisecond))
}

// copySchemas copies testdata/schemas/*.avsc into dir.
func copySchemas(t *testing.T, dir string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(schemaDir, "*.avsc"))
	if len(files) == 0 {
		t.Fatalf("no schemas in %s", schemaDir)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(file)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// withSchemasDir returns args with --schemas-dir replaced by dir.
func withSchemasDir(args []string, dir string) []string {
	out := append([]string(nil), args...)
	for i := range out {
		if out[i] == "--schemas-dir" {
			out[i+1] = dir
		}
	}
	return out
}

// TestOutboxTableChanges: ADD COLUMN (and dropping an optional column) needs
// no restart; dropping or renaming a required column halts with exit 1 and a
// message naming the column, with nothing confirmed past the event.
func TestOutboxTableChanges(t *testing.T) {
	t.Parallel()
	agg := uuidFor(303)
	t.Run("add column, drop optional column", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, "")
		c := consumeFast(t, "^"+f.topicPrefix+`\..*`)
		r := startRelay(t, f.args())
		r.waitStreaming(60 * time.Second)
		ctx := context.Background()
		conn := connect(t)
		first, _ := f.insertRows(ctx, conn, []nrow{validRow(agg, 1)})
		c.waitIDs(60*time.Second, first)

		f.exec(fmt.Sprintf("ALTER TABLE public.%s ADD COLUMN tenant text NOT NULL DEFAULT 'acme', ADD COLUMN extra jsonb", f.table))
		afterAdd, _ := f.insertRows(ctx, conn, []nrow{validRow(agg, 2), validRow(agg, 3)})
		// A row that sets the new columns, in the same transaction as a DDL.
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tx.Exec(ctx, fmt.Sprintf("ALTER TABLE public.%s ADD COLUMN region text", f.table))
		var inTx int64
		if err := tx.QueryRow(ctx, fmt.Sprintf(`INSERT INTO public.%s (aggregate_type, aggregate_id, event_type, payload, headers, tenant, extra, region)
			VALUES ('Order', $1, 'OrderCreated', $2::jsonb, '{"h": "1"}', 'globex', '{"x": 1}', 'eu') RETURNING id`, f.table), agg, orderCreated(agg, 4)).Scan(&inTx); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		f.exec(fmt.Sprintf("ALTER TABLE public.%s DROP COLUMN headers", f.table))
		var noHeaders int64
		if err := conn.QueryRow(ctx, fmt.Sprintf(`INSERT INTO public.%s (aggregate_type, aggregate_id, event_type, payload)
			VALUES ('Order', $1, 'OrderCreated', $2::jsonb) RETURNING id`, f.table), agg, orderCreated(agg, 5)).Scan(&noHeaders); err != nil {
			t.Fatal(err)
		}
		recs := byID(c.waitIDs(60*time.Second, append(afterAdd, inTx, noHeaders)))
		if h := recs[strconv.FormatInt(inTx, 10)].Headers; h["h"] != "1" {
			t.Errorf("row inserted with the DDL lost its headers: %v", h)
		}
		if h := recs[strconv.FormatInt(noHeaders, 10)].Headers; len(h) != 3 {
			t.Errorf("row without a headers column: headers %v, want only the fixed three", h)
		}
		for _, id := range append(afterAdd, inTx, noHeaders) {
			if got := recs[strconv.FormatInt(id, 10)].Topic; got != f.topic("Order") {
				t.Errorf("event %d went to %q", id, got)
			}
		}
		select {
		case <-r.done:
			t.Fatalf("the relay exited after ALTER TABLE:\n%s", tailString(r.Output(), 3000))
		default:
		}
		if code := r.terminate(); code != 0 {
			t.Fatalf("exit code %d", code)
		}
	})
	for _, tt := range []struct {
		name, ddl, column string
		insert            string // the insert after the change
		args              func(agg, payload string) []any
	}{
		{"drop payload", "ALTER TABLE public.%s DROP COLUMN payload", "payload",
			"INSERT INTO public.%s (aggregate_type, aggregate_id, event_type) VALUES ('Order', $1, 'OrderCreated') RETURNING id",
			func(agg, _ string) []any { return []any{agg} }},
		{"rename event_type", "ALTER TABLE public.%s RENAME COLUMN event_type TO type", "event_type",
			"INSERT INTO public.%s (aggregate_type, aggregate_id, type, payload) VALUES ('Order', $1, 'OrderCreated', $2::jsonb) RETURNING id",
			func(agg, payload string) []any { return []any{agg, payload} }},
		{"drop aggregate_id", "ALTER TABLE public.%s DROP COLUMN aggregate_id", "aggregate_id",
			"INSERT INTO public.%s (aggregate_type, event_type, payload) VALUES ('Order', 'OrderCreated', $1::jsonb) RETURNING id",
			func(_, payload string) []any { return []any{payload} }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, "")
			c := consumeFast(t, "^"+f.topicPrefix+`\..*`)
			r := startRelay(t, f.args("--halt-linger", "0s")) // dlq mode: a missing column halts all the same
			r.waitStreaming(60 * time.Second)
			ctx := context.Background()
			conn := connect(t)
			first, _ := f.insertRows(ctx, conn, []nrow{validRow(agg, 1)})
			c.waitIDs(60*time.Second, first)
			f.exec(fmt.Sprintf(tt.ddl, f.table))

			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var id int64
			if err := tx.QueryRow(ctx, fmt.Sprintf(tt.insert, f.table), tt.args(agg, orderCreated(agg, 2))...).Scan(&id); err != nil {
				t.Fatal(err)
			}
			var before string // the commit record starts at or after it
			if err := tx.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&before); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			if code := r.wait(60 * time.Second); code != exitFailed {
				t.Fatalf("exit code = %d, want %d", code, exitFailed)
			}
			out := r.Output()
			want := fmt.Sprintf("has no column %q (row id=%d)", tt.column, id)
			if !strings.Contains(out, want) || !strings.Contains(out, f.table) {
				t.Fatalf("halt output does not name table %s and say %s:\n%s", f.table, want, tailString(out, 3000))
			}
			if got := f.confirmedFlush(); got > parseLSN(t, before) {
				t.Fatalf("confirmed_flush_lsn %X passed the event after the change (its commit starts after %s)", got, before)
			}
			// The proof that matters: started again, the relay meets the
			// same row and stops again.
			r2 := startRelay(t, f.args("--halt-linger", "0s"))
			if code := r2.wait(60 * time.Second); code != exitFailed || !strings.Contains(r2.Output(), want) {
				t.Fatalf("restarted relay: exit code %d, want %d and %s again:\n%s", code, exitFailed, want, tailString(r2.Output(), 3000))
			}
		})
	}
}

// TestUpdateDeleteTruncateIgnored: UPDATE (also of a TOASTed row, and with
// REPLICA IDENTITY FULL), DELETE and TRUNCATE on the outbox change nothing:
// no error, no DLQ record, no extra record; with the relay's own publication
// (inserts only) and with a user-made one that publishes every operation.
func TestUpdateDeleteTruncateIgnored(t *testing.T) {
	t.Parallel()
	agg := uuidFor(304)
	for _, userPub := range []bool{false, true} {
		name := "relay publication"
		if userPub {
			name = "user publication for all operations"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, "")
			if userPub {
				f.exec(fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE public.%s", f.publication, f.table))
			}
			c := consumeFast(t, "^"+f.topicPrefix+`\..*`)
			r := startRelay(t, f.args())
			r.waitStreaming(60 * time.Second)
			ctx := context.Background()
			conn := connect(t)

			// A payload large enough to be stored out of line (TOAST), so an
			// UPDATE of another column sends it as "unchanged".
			big := `{"order_id": "` + agg + `", "customer_id": "c", "status": "PENDING", "amount_cents": 1, "created_at": 1, "coupon_code": "`
			var toasted int64
			if err := conn.QueryRow(ctx, fmt.Sprintf(`INSERT INTO public.%s (aggregate_type, aggregate_id, event_type, payload)
				VALUES ('Order', $1, 'OrderCreated', ($2 || (SELECT string_agg(md5(i::text), '') FROM generate_series(1, 2000) i) || '"}')::jsonb) RETURNING id`, f.table),
				agg, big).Scan(&toasted); err != nil {
				t.Fatal(err)
			}
			first, _ := f.insertRows(ctx, conn, []nrow{validRow(agg, 1), validRow(agg, 2), validRow(agg, 3)})
			first = append(first, toasted)
			c.waitIDs(60*time.Second, first)

			for _, sql := range []string{
				`UPDATE public.%s SET headers = '{"changed": true}' WHERE id = ` + strconv.FormatInt(toasted, 10),
				`UPDATE public.%s SET aggregate_id = 'moved', payload = '[1]'`,
				`UPDATE public.%s SET id = id + 1000 WHERE id = ` + strconv.FormatInt(first[0], 10),
				`DELETE FROM public.%s WHERE id = ` + strconv.FormatInt(first[1], 10),
				`ALTER TABLE public.%s REPLICA IDENTITY FULL`,
				`UPDATE public.%s SET event_type = 'NoSuchEvent'`,
				`DELETE FROM public.%s WHERE id = ` + strconv.FormatInt(first[2], 10),
				`TRUNCATE public.%s`,
			} {
				f.exec(fmt.Sprintf(sql, f.table))
			}
			last, _ := f.insertRows(ctx, conn, []nrow{validRow(agg, 4)})
			end := currentLSN(t, conn)
			c.waitIDs(60*time.Second, last)
			waitFor(t, 30*time.Second, "confirmed_flush_lsn to pass the changes", func() bool { return f.confirmedFlush() >= end })

			// Only the inserts are published (duplicates would be allowed:
			// delivery is at least once), all to the event topic.
			inserted := map[string]bool{}
			for _, id := range append(first, last...) {
				inserted[strconv.FormatInt(id, 10)] = true
			}
			for _, rec := range c.records() {
				if !inserted[rec.Headers["id"]] || rec.Topic != f.topic("Order") {
					t.Errorf("unexpected record: %s id=%s error=%q", rec.Topic, rec.Headers["id"], rec.Headers[recordpkg.HeaderError])
				}
			}
			if n, err := r.metric("cdc_relay_dlq_events_total"); err == nil && n != 0 {
				t.Errorf("cdc_relay_dlq_events_total = %v, want 0", n)
			}
			if n, _ := r.metric("cdc_relay_events_read_total"); n != float64(len(first)+len(last)) {
				t.Errorf("cdc_relay_events_read_total = %v, want %d", n, len(first)+len(last))
			}
			if code := r.terminate(); code != 0 {
				t.Fatalf("exit code %d:\n%s", code, tailString(r.Output(), 3000))
			}
			// Without error: no reconnect, no error logged.
			if out := r.Output(); strings.Contains(out, "msg=reconnect") || strings.Contains(out, "level=ERROR") {
				t.Fatalf("the relay logged an error or reconnected:\n%s", tailString(out, 3000))
			}
		})
	}
}

// TestDLQPublishFailureRetried: a dead-letter record that cannot be written
// (the broker is down) is retried; while it is not in Kafka the slot is not
// confirmed past its transaction; once Kafka is back it arrives and only
// then the confirmed LSN moves past it. It runs at-least-once and
// exactly-once (delivery_test.go), in parallel (each stops a broker of its
// own): a read_committed consumer then reads the three events exactly
// once. In both the dead letter is counted once.
func TestDLQPublishFailureRetried(t *testing.T) {
	t.Parallel()
	eachDelivery(t, true, testDLQPublishFailureRetried)
}

func testDLQPublishFailureRetried(t *testing.T, d delivery) {
	f := newFixture(t, "")
	f.ownBroker() // stopped below
	r := startRelay(t, d.with(f.args()))
	r.waitStreaming(60 * time.Second)
	ctx := context.Background()
	conn := connect(t)
	agg := uuidFor(305)
	good, _ := f.insertRows(ctx, conn, []nrow{validRow(agg, 1)})
	afterGood := currentLSN(t, conn)
	waitFor(t, 60*time.Second, "the valid event confirmed", func() bool { return f.confirmedFlush() >= afterGood })

	restartBroker := f.stopBroker()
	badRow := validRow(agg, 2)
	badRow.EventType = sp("NoSuchEvent")
	bad, before := f.insertRows(ctx, conn, []nrow{badRow})
	after, _ := f.insertRows(ctx, conn, []nrow{validRow(agg, 3)})
	r.waitMetric("cdc_relay_events_read_total", 60*time.Second, func(v float64) bool { return v >= 3 })
	// The dead-letter publish fails and is retried (these failures are in
	// the topic's metadata lookup, which cdc_relay_produce_errors_total
	// does not count: the log says it)...
	waitFor(t, 60*time.Second, "the dead-letter publish to be retried", func() bool {
		return regexp.MustCompile(`kafka error, retrying[^\n]*` + regexp.QuoteMeta(f.dlq) + `[^\n]*consecutive_errors=[2-9]`).MatchString(r.Output())
	})
	// ...and status updates keep going out without confirming it.
	read := float64(time.Now().UnixNano()) / 1e9
	r.waitMetric("cdc_relay_last_status_update_timestamp_seconds", 30*time.Second, func(v float64) bool { return v > read+1 })
	if got := f.confirmedFlush(); got > before {
		t.Fatalf("confirmed_flush_lsn %X passed the dead-letter event's transaction (its commit starts after %X) while Kafka was down", got, before)
	}
	select {
	case <-r.done:
		t.Fatalf("the relay exited while Kafka was down:\n%s", tailString(r.Output(), 3000))
	default:
	}

	restartBroker()
	c := d.consumeFrom(f, "^"+f.topicPrefix+`\..*`)
	recs := byID(c.waitIDs(120*time.Second, append(append(good, bad...), after...)))
	rec := recs[strconv.FormatInt(bad[0], 10)]
	if rec.Topic != f.dlq || !strings.Contains(rec.Headers[recordpkg.HeaderError], `no schema for event_type "NoSuchEvent"`) {
		t.Fatalf("dead-letter record: topic %q error %q", rec.Topic, rec.Headers[recordpkg.HeaderError])
	}
	end := currentLSN(t, conn)
	waitFor(t, 60*time.Second, "confirmed_flush_lsn to pass the dead-letter event", func() bool { return f.confirmedFlush() >= end })
	if d.once() {
		checkOnce(t, c.records(), idStrings(append(append(good, bad...), after...)))
	}
	if n, err := r.metric("cdc_relay_dlq_events_total"); err != nil || n != 1 {
		t.Errorf("cdc_relay_dlq_events_total = %v (%v), want 1: the dead letter counted once", n, err)
	}
	if code := r.terminate(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}
