package main

// Issue 10, against a real Debezium: the PostgreSQL connector with its
// Outbox Event Router in Kafka Connect standalone (internal/debeziumtest,
// jars from scripts/debezium.sh) and the relay write the same rows; their
// records must be interchangeable for a consumer (TestDebeziumParity), and
// the relay must take over Debezium's slot and publication without a gap
// (TestDebeziumCutover). TestRecordTimestampIsCommitTime needs no Debezium.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/internal/debeziumtest"
)

const (
	// dbzWait bounds waits on Debezium: Connect starts in 5-20 s and each
	// connector in a few more, slower while other tests load the machine.
	dbzWait = 3 * time.Minute
	// dbzFlush is the workers' offset.flush.interval.ms: how often Debezium
	// confirms to PostgreSQL (Connect's default is 60 s).
	dbzFlush = time.Second
	// dbzPass bounds the wait of docs/MIGRATING.md B step 2, for Debezium's
	// slot to confirm past the relay's slot's start: one offset flush
	// after Debezium published a row committed after it, minutes when
	// other tests load the machine and Debezium lags.
	dbzPass = 5 * time.Minute
)

// startConnect starts a Connect standalone worker on the harness's broker;
// the test's cleanup kills it and, if the test failed, logs its log's tail.
func startConnect(t *testing.T) *debeziumtest.Worker {
	t.Helper()
	w, err := debeziumtest.Start(debeziumtest.WorkerOptions{Broker: broker.Addr(), OffsetFlushInterval: dbzFlush})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Connect log (tail):\n%s", w.Output(60))
		}
		w.Close()
	})
	return w
}

// dbzConnector is a Debezium outbox connector on f's table writing to
// topicPrefix.<aggregate_type>, values as JsonConverter without schemas
// with the payload expanded, as cdc-relay's --value-format json writes.
func dbzConnector(f *fixture, name, slot, publication, topicPrefix string, key debeziumtest.Converter) debeziumtest.Connector {
	return debeziumtest.Connector{Name: name, PGPort: pg.Port(), Database: testDB, Table: "public." + f.table,
		Slot: slot, Publication: publication, KeyConverter: key, ValueConverter: debeziumtest.JSONConverter,
		ExpandJSONPayload: true, TopicReplacement: topicPrefix + ".${routedByValue}"}
}

// readTopics reads every topic matching topicRegex from the start.
func readTopics(t *testing.T, topicRegex string) *debeziumtest.Reader {
	t.Helper()
	r, err := debeziumtest.NewReader(broker.Addr(), topicRegex)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// createSlots creates logical slots (pgoutput) that the test's cleanup
// drops.
func createSlots(t *testing.T, f *fixture, slots ...string) {
	t.Helper()
	for _, s := range slots {
		f.exec("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", s)
	}
	t.Cleanup(func() { dropSlots(slots...) })
}

// dropSlots drops the slots that exist and are not in use.
func dropSlots(slots ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if conn, err := pgx.Connect(ctx, dbURL); err == nil {
		conn.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = ANY($1) AND NOT active", slots)
		conn.Close(ctx)
	}
}

// recordsByID indexes records whose topic starts with prefix+"." by their id
// header; each id's records in the order read.
func recordsByID(recs []debeziumtest.Record, prefix string) map[string][]debeziumtest.Record {
	m := map[string][]debeziumtest.Record{}
	for _, r := range recs {
		if !strings.HasPrefix(r.Topic, prefix+".") {
			continue
		}
		id, _ := r.Header("id")
		m[string(id)] = append(m[string(id)], r)
	}
	return m
}

// hasAll reports whether m holds a record of every id.
func hasAll(m map[string][]debeziumtest.Record, ids []string) bool {
	for _, id := range ids {
		if len(m[id]) == 0 {
			return false
		}
	}
	return true
}

// failIfExited fails the test at once when one of the relays has exited
// (a relay of these tests runs until the test ends), with its exit code
// and output.
func failIfExited(t *testing.T, relays ...*relay) {
	t.Helper()
	for _, r := range relays {
		select {
		case <-r.done:
			t.Fatalf("relay exited with code %d:\n%s", r.exitCode, tailString(r.Output(), 3000))
		default:
		}
	}
}

// fromDebezium reports whether Debezium wrote r: it adds its
// __debezium.context.* headers, the relay does not.
func fromDebezium(r debeziumtest.Record) bool {
	_, ok := r.Header("__debezium.context.connectorName")
	return ok
}

// parityDDL is the outbox table plus the columns the parity test copies
// into headers.
const parityDDL = `CREATE TABLE %s (
	id bigserial PRIMARY KEY,
	aggregate_type text NOT NULL,
	aggregate_id text NOT NULL,
	event_type text NOT NULL,
	payload jsonb,
	headers jsonb NOT NULL DEFAULT '{}',
	created_at timestamptz NOT NULL DEFAULT now(),
	c_uuid uuid,
	c_bigint bigint,
	c_tstz timestamptz,
	c_ts timestamp,
	c_event timestamp
)`

// parityHeaderColumns are copied into headers by both: Debezium's
// table.fields.additional.placement col:header and the relay's
// --header-columns.
var parityHeaderColumns = []string{"c_uuid", "c_bigint", "c_tstz", "c_ts"}

// parityRow is one outbox row of the parity test; the header columns and
// event (c_event, the record timestamp of both) are SQL literals ("NULL"
// for none), written under the session TimeZone tz; payload "" is NULL (a
// tombstone).
type parityRow struct {
	aggregateID, eventType, payload string
	uuid, bigint, tstz, ts, tz      string
	event                           string
}

// parityRows mix keys that need JSON escaping, header values of each type
// and precision, record timestamps from c_event, and payloads:
// OrderCreated rows valid for testdata/schemas (compared with the relay's
// Avro too), Misc rows exercising JSON forms (floats, unicode, nulls, key
// order), which have no Avro schema, and NULL payloads (tombstones).
func parityRows() []parityRow {
	created := func(i int, coupon string) string {
		return fmt.Sprintf(`{"order_id": %q, "customer_id": "c-%d", "status": "PENDING", "amount_cents": %d, "currency": "EUR",
			"items": [{"sku": "sku-%d", "quantity": %d, "unit_price_cents": 1999}], "coupon_code": %s, "created_at": 1700000000123}`,
			uuidFor(i), i, 1000+i, i, i+1, coupon)
	}
	return []parityRow{
		{"order-1", "OrderCreated", created(1, `"SPRING"`), "'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'", "-42", "'2024-03-05 06:07:08+00'", "'2024-03-05 06:07:08'", "UTC", "'2024-03-05 06:07:08.123999'"},
		{"5d9e1f0a-3b7c-4c2e-9a51-8f6d2b0e7c14", "OrderCreated", created(2, "null"), "'5D9E1F0A-3B7C-4C2E-9A51-8F6D2B0E7C14'", "9223372036854775807", "'2024-03-05 06:07:08.123+00'", "'2024-03-05 06:07:08.123'", "UTC", "'2001-02-03 04:05:06'"},
		{"Заказ \"№3\" \\ 🚀", "OrderCreated", created(3, `"Скидка 🚀"`), "NULL", "0", "'2024-03-05 09:07:08.123456'", "'2024-03-05 06:07:08.123456'", "Europe/Moscow", "NULL"},
		{"line\nbreak\ttab\u0001 </script>&", "OrderCreated", created(4, `"A\u2028B"`), "'00000000-0000-4000-8000-000000000004'", "NULL", "NULL", "NULL", "UTC", "'2024-03-05 06:07:08.5'"},
		{"order-1", "OrderCreated", created(5, `"X"`), "NULL", "-1", "'1969-12-31 23:59:59.999999+00'", "'1969-12-31 23:59:59.999999'", "UTC", "'2020-01-01 00:00:00.000001'"},
		{"misc-1", "Misc", `{"f": 1.5, "g": 1.0, "h": 12345678.5, "i": 0.0001, "j": 0.1, "n": 9007199254740993, "m": -42}`, "NULL", "NULL", "NULL", "NULL", "UTC", "'2024-03-05 06:07:08.999999'"},
		{"misc-2", "Misc", `{"s": "Привет 🚀 sep\u2028 <tag> & \"q\" \\ / \u0001 \t"}`, "NULL", "NULL", "NULL", "NULL", "UTC", "NULL"},
		{"misc-3", "Misc", `{"zebra": 1, "apple": {"nul": null, "z": [1, 2]}, "b": true, "aa": null, "objs": [{"a": 1}, {"a": 2}]}`, "NULL", "NULL", "NULL", "NULL", "UTC", "'2024-03-05 06:07:08'"},
		{"misc-1", "Misc", `{"empty": [], "o": {}, "nested": {"deeper": {"x": "y"}}}`, "NULL", "NULL", "NULL", "NULL", "UTC", "NULL"},
		{"order-1", "OrderCancelled", "", "'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'", "7", "'2024-03-05 06:07:08.5+00'", "'2024-03-05 06:07:08.5'", "UTC", "'2024-03-05 06:07:09'"},
		{"misc-2", "Misc", "", "NULL", "NULL", "NULL", "NULL", "UTC", "NULL"},
	}
}

// TestDebeziumParity writes the same rows through Debezium (string and
// json key converters) and through the relay (--key-format string and
// json with --value-format json, and string with Avro values), each on a
// slot of its own, and compares record by record, matched by the id
// header: topic, partition, key bytes, the id and column headers, the
// value bytes (null for a NULL payload: route.tombstone.on.empty.payload
// and --tombstone-on-null-payload) and the record timestamp taken from a
// timestamp column (table.field.event.timestamp and --timestamp-column);
// the relay's Avro must decode to the same JSON.
func TestDebeziumParity(t *testing.T) {
	t.Parallel()
	f := newFixture(t, parityDDL)
	f.exec(fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE public.%s WITH (publish = 'insert')", f.publication, f.table))
	// Every slot exists before the rows, so every tool gets every row.
	slot := func(tool string) string { return f.slot + "_" + tool }
	createSlots(t, f, slot("ds"), slot("dj"), slot("rs"), slot("rj"), slot("ra"))
	prefix := func(tool string) string { return tool + f.name } // ds<suffix>.Order etc.

	rows := parityRows()
	conn := connect(t)
	ctx := context.Background()
	var ids []string
	var avroIDs []string
	for _, r := range rows {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "SET LOCAL TimeZone = '"+r.tz+"'"); err != nil {
			t.Fatal(err)
		}
		var id int64
		q := fmt.Sprintf(`INSERT INTO public.%s (aggregate_type, aggregate_id, event_type, payload, c_uuid, c_bigint, c_tstz, c_ts, c_event)
			VALUES ('Order', $1, $2, $3::jsonb, %s, %s, %s, %s, %s) RETURNING id`, f.table, r.uuid, r.bigint, r.tstz, r.ts, r.event)
		var payload any = r.payload
		if r.payload == "" {
			payload = nil
		}
		if err := tx.QueryRow(ctx, q, r.aggregateID, r.eventType, payload).Scan(&id); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, strconv.FormatInt(id, 10))
		if r.eventType == "OrderCreated" || r.payload == "" {
			avroIDs = append(avroIDs, ids[len(ids)-1])
		}
	}

	reader := readTopics(t, `^(ds|dj|rs|rj|ra)`+f.name+`\.`)
	w := startConnect(t)
	placement := make([]string, len(parityHeaderColumns))
	for i, c := range parityHeaderColumns {
		placement[i] = c + ":header"
	}
	for _, c := range []struct {
		tool string
		key  debeziumtest.Converter
	}{{"ds", debeziumtest.StringConverter}, {"dj", debeziumtest.JSONConverter}} {
		dc := dbzConnector(f, "parity-"+c.tool+"-"+f.name, slot(c.tool), f.publication, prefix(c.tool), c.key)
		dc.PublicationAutocreate = "disabled"
		dc.AdditionalPlacement = strings.Join(placement, ",")
		dc.EventTimestampField = "c_event"
		dc.TombstoneOnEmptyPayload = true
		if err := w.AddConnector(ctx, dc); err != nil {
			t.Fatal(err)
		}
	}

	relayArgs := func(tool string, extra ...string) []string {
		return f.args(append([]string{"--slot", slot(tool), "--topic-template", prefix(tool) + ".{aggregate_type}",
			"--builtin-headers", "id", "--header-columns", strings.Join(parityHeaderColumns, ","),
			"--timestamp-column", "c_event", "--tombstone-on-null-payload=true"}, extra...)...)
	}
	relays := []*relay{
		startRelay(t, relayArgs("rs", "--key-format", "string", "--value-format", "json")),
		startRelay(t, relayArgs("rj", "--key-format", "json", "--value-format", "json")),
		startRelay(t, relayArgs("ra", "--key-format", "string")),
	}

	var recs []debeziumtest.Record
	// On a time-out, say which of the five fell short (the wait names none).
	t.Cleanup(func() {
		if t.Failed() {
			for _, tool := range []string{"ds", "dj", "rs", "rj", "ra"} {
				want := ids
				if tool == "ra" {
					want = avroIDs
				}
				got := recordsByID(recs, prefix(tool))
				var missing []string
				for _, id := range want {
					if len(got[id]) == 0 {
						missing = append(missing, id)
					}
				}
				topic := prefix(tool) + ".Order"
				ends, err := debeziumtest.EndOffsets(context.Background(), broker.Addr(), topic)
				t.Logf("%s: %d distinct ids of %d read at the last poll, missing %v; %s end offsets %v (%v)",
					tool, len(got), len(want), missing, topic, ends[topic], err)
			}
			// Whether a relay fell short or the reader did: what each says it published.
			for i, tool := range []string{"rs", "rj", "ra"} {
				v, err := relays[i].metric("cdc_relay_events_published_total")
				t.Logf("%s: cdc_relay_events_published_total %v (%v)", tool, v, err)
			}
		}
	})
	waitFor(t, dbzWait, "every row from Debezium and the relay", func() bool {
		for _, name := range []string{"parity-ds-" + f.name, "parity-dj-" + f.name} {
			if err := w.Check(ctx, name); err != nil {
				t.Fatal(err)
			}
		}
		failIfExited(t, relays...)
		recs = reader.Records()
		return hasAll(recordsByID(recs, prefix("ds")), ids) && hasAll(recordsByID(recs, prefix("dj")), ids) &&
			hasAll(recordsByID(recs, prefix("rs")), ids) && hasAll(recordsByID(recs, prefix("rj")), ids) &&
			hasAll(recordsByID(recs, prefix("ra")), avroIDs)
	})

	got := map[string]map[string][]debeziumtest.Record{}
	for _, tool := range []string{"ds", "dj", "rs", "rj", "ra"} {
		got[tool] = recordsByID(recs, prefix(tool))
	}
	dec := newAvroDecoder()
	for i, id := range ids {
		row := rows[i]
		for _, pair := range [][2]string{{"ds", "rs"}, {"dj", "rj"}} {
			d, r := got[pair[0]][id], got[pair[1]][id]
			if len(d) != 1 || len(r) != 1 {
				t.Errorf("row %s (%q): %d records from Debezium (%s), %d from the relay (%s), want 1 each", id, row.aggregateID, len(d), pair[0], len(r), pair[1])
				continue
			}
			checkParity(t, fmt.Sprintf("row %s %s/%s", id, pair[0], pair[1]), prefix(pair[0]), prefix(pair[1]), d[0], r[0])
			// With c_event NULL Debezium uses its processing time, the
			// relay the commit time: only a set c_event must agree.
			if row.event != "NULL" && !d[0].Timestamp.Equal(r[0].Timestamp) {
				t.Errorf("row %s %s/%s: timestamp %s, Debezium's %s (c_event %s)", id, pair[0], pair[1],
					r[0].Timestamp.Format(time.RFC3339Nano), d[0].Timestamp.Format(time.RFC3339Nano), row.event)
			}
		}
		if row.eventType != "OrderCreated" && row.payload != "" {
			continue
		}
		a := got["ra"][id]
		if len(a) != 1 {
			t.Errorf("row %s: %d Avro records from the relay, want 1", id, len(a))
			continue
		}
		d := got["ds"][id][0]
		if !bytes.Equal(a[0].Key, d.Key) || a[0].Partition != d.Partition {
			t.Errorf("row %s Avro: key %q partition %d, Debezium's %q partition %d", id, a[0].Key, a[0].Partition, d.Key, d.Partition)
		}
		if row.payload == "" {
			if a[0].Value != nil || d.Value != nil {
				t.Errorf("row %s (NULL payload): Avro run's value %q, Debezium's %q, want tombstones (null values)", id, a[0].Value, d.Value)
			}
			continue
		}
		native, _, err := dec.decode(a[0].Value)
		if err != nil {
			t.Errorf("row %s: decode the relay's Avro: %v", id, err)
			continue
		}
		gotJSON, wantJSON := canonicalJSON(t, avroAsDebeziumJSON(native)), canonicalJSON(t, jsonValue(t, d.Value))
		if gotJSON != wantJSON {
			t.Errorf("row %s: the relay's Avro decodes to\n%s\nDebezium's JSON value is\n%s", id, gotJSON, wantJSON)
		}
	}
}

// checkParity compares a Debezium record with the relay's record of the
// same row.
func checkParity(t *testing.T, what, dPrefix, rPrefix string, d, r debeziumtest.Record) {
	t.Helper()
	if strings.TrimPrefix(d.Topic, dPrefix) != strings.TrimPrefix(r.Topic, rPrefix) {
		t.Errorf("%s: topic %s, Debezium's %s", what, r.Topic, d.Topic)
	}
	if !bytes.Equal(d.Key, r.Key) {
		t.Errorf("%s: key %q, Debezium's %q", what, r.Key, d.Key)
	}
	if d.Partition != r.Partition {
		t.Errorf("%s: partition %d, Debezium's %d", what, r.Partition, d.Partition)
	}
	if !bytes.Equal(d.Value, r.Value) || (d.Value == nil) != (r.Value == nil) {
		t.Errorf("%s: value\n%q\nDebezium's\n%q", what, r.Value, d.Value)
	}
	want := map[string]debeziumtest.Header{}
	for _, h := range d.Headers {
		if !strings.HasPrefix(h.Key, "__debezium.") {
			want[h.Key] = h
		}
	}
	gotH := map[string]debeziumtest.Header{}
	for _, h := range r.Headers {
		gotH[h.Key] = h
	}
	if !slices.Equal(slices.Sorted(maps.Keys(gotH)), slices.Sorted(maps.Keys(want))) {
		t.Errorf("%s: headers %v, Debezium's (without __debezium.*) %v", what, slices.Sorted(maps.Keys(gotH)), slices.Sorted(maps.Keys(want)))
	}
	for k, w := range want {
		g, ok := gotH[k]
		if ok && (g.Null != w.Null || !bytes.Equal(g.Value, w.Value)) {
			t.Errorf("%s: header %s = %q (null %v), Debezium's %q (null %v)", what, k, g.Value, g.Null, w.Value, w.Null)
		}
	}
}

// jsonValue decodes a JSON value keeping numbers exact.
func jsonValue(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	return v
}

// avroAsDebeziumJSON turns goavro's native form into what Debezium's
// expanded JSON holds for the same payload: unions unwrapped, timestamps
// as epoch milliseconds, numbers as json.Number, and null fields left out
// (Debezium drops them, testdata/debezium/values.json).
func avroAsDebeziumJSON(v any) any {
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 1 {
			for k, inner := range x {
				switch k {
				case "string", "long", "int", "double", "float", "boolean", "bytes":
					return avroAsDebeziumJSON(inner)
				}
			}
		}
		m := map[string]any{}
		for k, inner := range x {
			if inner == nil {
				continue
			}
			m[k] = avroAsDebeziumJSON(inner)
		}
		return m
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = avroAsDebeziumJSON(x[i])
		}
		return out
	case time.Time:
		return json.Number(strconv.FormatInt(x.UnixMilli(), 10))
	case int32:
		return json.Number(strconv.FormatInt(int64(x), 10))
	case int64:
		return json.Number(strconv.FormatInt(x, 10))
	case float64:
		return json.Number(strconv.FormatFloat(x, 'g', -1, 64))
	}
	return v
}

// canonicalJSON renders v with sorted keys.
func canonicalJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// cutoverWriter commits outbox rows continuously, one to three per
// transaction over 16 aggregates, and notes for each id the WAL position
// read right after its commit (at or after the commit's end).
type cutoverWriter struct {
	f    *fixture
	stop chan struct{}
	done chan struct{}

	mu    sync.Mutex
	ids   []string
	after map[string]uint64 // id -> pg_current_wal_insert_lsn() after its commit
	err   error
}

func startCutoverWriter(t *testing.T, f *fixture) *cutoverWriter {
	t.Helper()
	w := &cutoverWriter{f: f, stop: make(chan struct{}), done: make(chan struct{}), after: map[string]uint64{}}
	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(w.done)
		defer conn.Close(context.Background())
		tick := time.NewTicker(5 * time.Millisecond) // pacing of the load
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
			ids, lsn, err := w.commit(conn, n)
			w.mu.Lock()
			if err != nil {
				w.err = err
				w.mu.Unlock()
				return
			}
			w.ids = append(w.ids, ids...)
			for _, id := range ids {
				w.after[id] = lsn
			}
			w.mu.Unlock()
		}
	}()
	t.Cleanup(w.halt)
	return w
}

// commit writes transaction n and returns its ids and the WAL position
// after its commit.
func (w *cutoverWriter) commit(conn *pgx.Conn, n int) ([]string, uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, 0, err
	}
	defer tx.Rollback(ctx)
	var ids []string
	for i := range 1 + n%3 {
		var id int64
		agg := fmt.Sprintf("agg-%d", (n+i)%16)
		if err := tx.QueryRow(ctx, fmt.Sprintf(`INSERT INTO public.%s (aggregate_type, aggregate_id, event_type, payload)
			VALUES ('Order', $1, 'OrderCreated', $2::jsonb) RETURNING id`, w.f.table), agg, orderCreated(uuidFor(n), n)).Scan(&id); err != nil {
			return nil, 0, err
		}
		ids = append(ids, strconv.FormatInt(id, 10))
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, 0, err
	}
	var lsn string
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&lsn); err != nil {
		return nil, 0, err
	}
	var hi, lo uint32
	if _, err := fmt.Sscanf(lsn, "%X/%X", &hi, &lo); err != nil {
		return nil, 0, err
	}
	return ids, uint64(hi)<<32 | uint64(lo), nil
}

// committed returns the ids committed so far.
func (w *cutoverWriter) committed() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.ids)
}

// halt stops the writer and waits for it.
func (w *cutoverWriter) halt() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

// finish stops the writer and returns every committed id; a write error
// fails the test.
func (w *cutoverWriter) finish(t *testing.T) []string {
	t.Helper()
	w.halt()
	if w.err != nil {
		t.Fatalf("writer: %v", w.err)
	}
	return w.committed()
}

// TestDebeziumCutover replaces a running Debezium by the relay while a
// writer commits continuously: on Debezium's own slot and publication,
// Debezium stopped gracefully (SIGTERM) in one subtest and with kill -9 in
// another; and (own-slot) on the relay's own slot and publication created
// before Debezium stops gracefully, as docs/MIGRATING.md B says: Debezium
// stops only once its slot confirmed past the new slot's start. Every
// outbox id must reach Kafka, no aggregate may change partition or key
// bytes, and the only duplicates allowed are rows Debezium wrote that were
// committed after the position the relay starts from (the slot's
// confirmed_flush_lsn when Debezium stopped, or the relay's slot's
// creation point). own-slot-early-stop skips B's step 2 and must show the
// gap the document warns of (testEarlyStop).
func TestDebeziumCutover(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"graceful", "kill9", "own-slot", "own-slot-early-stop"} {
		t.Run(mode, func(t *testing.T) { testDebeziumCutover(t, mode) })
	}
}

func testDebeziumCutover(t *testing.T, mode string) {
	f := newFixture(t, "")
	// Debezium's default names with the test's suffix: subtests must not
	// share a slot.
	slot, publication, topicPrefix := "debezium_"+f.name, "dbz_publication_"+f.name, "c"+f.name
	t.Cleanup(func() {
		dropSlots(slot)
		f.exec("DROP PUBLICATION IF EXISTS " + publication)
	})
	reader := readTopics(t, "^"+topicPrefix+`\.`)
	ctx := context.Background()

	w := startConnect(t)
	name := "cutover-" + f.name
	dc := dbzConnector(f, name, slot, publication, topicPrefix, debeziumtest.StringConverter)
	dc.PublicationAutocreate = "filtered" // Debezium creates both, as in production
	if err := w.AddConnector(ctx, dc); err != nil {
		t.Fatal(err)
	}
	if err := w.WaitRunning(ctx, name, dbzWait); err != nil {
		t.Fatal(err)
	}
	// The slot must exist before the first row, or that row is not
	// Debezium's to deliver.
	sf := *f // the fixture's database, Debezium's slot
	sf.slot = slot
	waitFor(t, dbzWait, "Debezium's slot "+slot, sf.slotActive)

	writer := startCutoverWriter(t, f)
	waitFor(t, dbzWait, "Debezium to deliver 200 rows", func() bool {
		if err := w.Check(ctx, name); err != nil {
			t.Fatal(err)
		}
		return len(recordsByID(reader.Records(), topicPrefix)) >= 200
	})
	// Stop it once it has confirmed something, as a long-running
	// Debezium has: then some of what it wrote is confirmed, some not.
	initial := sf.confirmedFlush()
	waitFor(t, dbzWait, "Debezium to confirm a position", func() bool { return sf.confirmedFlush() > initial })
	if mode == "own-slot-early-stop" {
		testEarlyStop(t, f, w, name, &sf, reader, writer, topicPrefix)
		return
	}
	// own-slot: the relay's own publication and slot are created while
	// Debezium still runs (MIGRATING.md B step 1), Debezium stops
	// gracefully once its slot confirmed past the new slot's start (step
	// 2: then it has published every row committed before it).
	relaySlot, relayPublication := slot, publication
	var relayStart uint64
	if mode == "own-slot" {
		relaySlot, relayPublication = f.slot, f.publication
		relayStart = createOwnSlot(t, f)
		created := time.Now()
		waitFor(t, dbzPass, "Debezium's slot to confirm past the relay's slot's start "+lsnText(relayStart), func() bool {
			if err := w.Check(ctx, name); err != nil {
				t.Fatal(err)
			}
			return sf.confirmedFlush() >= relayStart
		})
		t.Logf("own-slot: Debezium's slot confirmed past the relay's slot's start %s %s after its creation", lsnText(relayStart), time.Since(created).Round(time.Millisecond))
	}
	switch mode {
	case "graceful", "own-slot":
		if err := w.Stop(60 * time.Second); err != nil {
			t.Fatal(err)
		}
	case "kill9":
		w.Kill()
	}
	waitFor(t, 60*time.Second, "Debezium's walsender to release the slot", func() bool { return !sf.slotActive() })
	// The relay starts where its slot is: rows committed after that may
	// come twice, none before it may.
	confirmed := sf.confirmedFlush()
	if mode == "own-slot" {
		confirmed = relayStart
	}
	stoppedAt := len(writer.committed())

	args := f.args("--slot", relaySlot, "--publication", relayPublication, "--topic-template", topicPrefix+".{aggregate_type}",
		"--key-format", "string", "--value-format", "json", "--builtin-headers", "id")
	if mode != "own-slot" {
		// MIGRATING.md A: Debezium's publication may publish more than the
		// outbox (this filtered one lists only it).
		args = append(args, "--allow-extra-tables")
	}
	r := startRelay(t, args)
	r.waitStreaming(60 * time.Second)
	waitFor(t, dbzWait, "200 more rows committed while the relay runs", func() bool { return len(writer.committed()) >= stoppedAt+200 })
	ids := writer.finish(t)

	var recs []debeziumtest.Record
	waitFor(t, dbzWait, fmt.Sprintf("all %d ids in Kafka", len(ids)), func() bool {
		failIfExited(t, r)
		recs = reader.Records()
		return hasAll(recordsByID(recs, topicPrefix), ids)
	})

	// Per id: who wrote it; per aggregate: one partition, one key.
	partitionOf := map[string]int32{}
	byDbz, byRelay := map[string]int{}, map[string]int{}
	for _, rec := range recs {
		id, _ := rec.Header("id")
		if fromDebezium(rec) {
			byDbz[string(id)]++
		} else {
			byRelay[string(id)]++
		}
		agg := string(rec.Key)
		if p, ok := partitionOf[agg]; ok && p != rec.Partition {
			t.Errorf("aggregate %q in partition %d and %d", agg, p, rec.Partition)
		}
		partitionOf[agg] = rec.Partition
	}
	if len(partitionOf) != 16 {
		t.Errorf("%d distinct keys, want the 16 aggregates: %v", len(partitionOf), slices.Sorted(maps.Keys(partitionOf)))
	}
	dups := 0
	for _, id := range ids {
		n := byDbz[id] + byRelay[id]
		if n == 0 {
			t.Errorf("id %s never reached Kafka", id)
		}
		if byDbz[id] > 1 || byRelay[id] > 1 {
			t.Errorf("id %s: %d records from Debezium, %d from the relay; each ran once", id, byDbz[id], byRelay[id])
		}
		if n > 1 {
			dups++
			// The relay starts at confirmed_flush_lsn: it may repeat only
			// what Debezium had not confirmed.
			if after := writer.after[id]; after <= confirmed {
				t.Errorf("id %s (committed before %X/%X) written by both, though the slot had confirmed %X/%X", id, after>>32, uint32(after), confirmed>>32, uint32(confirmed))
			}
		}
	}
	unconfirmed := 0
	for id := range byDbz {
		if writer.after[id] > confirmed {
			unconfirmed++
		}
	}
	t.Logf("%s: %d ids; Debezium wrote %d, the relay %d; %d duplicates (Debezium had written %d rows committed after the relay's start position %X/%X; offset.flush.interval.ms=%d)",
		mode, len(ids), len(byDbz), len(byRelay), dups, unconfirmed, confirmed>>32, uint32(confirmed), dbzFlush.Milliseconds())
	if dups > unconfirmed {
		t.Errorf("%d duplicates, more than the %d rows Debezium wrote past its confirmed position", dups, unconfirmed)
	}
}

// createOwnSlot creates the relay's publication and then its slot, as the
// relay does on first start (pgoutput reads the publication as of each
// change), and returns the slot's start: its confirmed_flush_lsn at
// creation, which the relay logs as "slot created ... confirmed_lsn". The
// slot holds every transaction that commits after it.
func createOwnSlot(t *testing.T, f *fixture) uint64 {
	t.Helper()
	f.exec(fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE public.%s WITH (publish = 'insert')", f.publication, f.table))
	var lsn string
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := f.connect().QueryRow(ctx, "SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput')", f.slot).Scan(&lsn); err != nil {
		t.Fatalf("create slot %s: %v", f.slot, err)
	}
	start := parseLSN(t, lsn)
	if c := f.confirmedFlush(); c != start {
		t.Fatalf("slot %s: confirmed_flush_lsn %s after creation, pg_create_logical_replication_slot returned %s", f.slot, lsnText(c), lsn)
	}
	return start
}

// lsnText formats a WAL position as PostgreSQL does.
func lsnText(lsn uint64) string { return fmt.Sprintf("%X/%X", lsn>>32, uint32(lsn)) }

// testEarlyStop is docs/MIGRATING.md B without step 2: Debezium stops
// after the relay's slot exists but before its own slot confirmed past the
// new slot's start. To make the lag certain, Debezium is paused (its task
// then publishes nothing more), 16 rows (the window) are committed, the
// relay's slot is created and Debezium is stopped while the writer still
// commits. The window is before the relay's slot and after everything
// Debezium published: once the relay has confirmed past a marker
// transaction written after it, no window id may be in Kafka, while the
// markers are. The window stays in Debezium's slot, unconfirmed.
func testEarlyStop(t *testing.T, f *fixture, w *debeziumtest.Worker, name string, sf *fixture, reader *debeziumtest.Reader, writer *cutoverWriter, topicPrefix string) {
	ctx := context.Background()
	if err := w.PauseConnector(ctx, name, dbzWait); err != nil {
		t.Fatal(err)
	}
	conn := f.connect()
	// insert16 commits one row per aggregate of the writer (so in the
	// partitions the relay writes to) in one transaction and returns the
	// ids and the WAL position after the commit.
	insert16 := func(what string, base int) ([]string, uint64) {
		evs := make([]event, 16)
		for i := range evs {
			evs[i] = event{AggregateType: "Order", AggregateID: fmt.Sprintf("agg-%d", i), EventType: "OrderCreated",
				Payload: orderCreated(uuidFor(base+i), base+i)}
		}
		ids, err := f.insertTx(ctx, conn, evs)
		if err != nil {
			t.Fatalf("insert the %s: %v", what, err)
		}
		out := make([]string, len(ids))
		for i, id := range ids {
			out[i] = strconv.FormatInt(id, 10)
		}
		return out, currentLSN(t, conn)
	}
	windowStart := currentLSN(t, conn)
	window, windowEnd := insert16("window", 900000)
	relayStart := createOwnSlot(t, f)
	if relayStart < windowEnd {
		t.Fatalf("the relay's slot starts at %s, before the window's end %s", lsnText(relayStart), lsnText(windowEnd))
	}
	if err := w.Stop(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "Debezium's walsender to release the slot", func() bool { return !sf.slotActive() })
	dbzConfirmed := sf.confirmedFlush()
	if dbzConfirmed > windowStart {
		t.Fatalf("Debezium's slot confirmed %s, past the window's start %s though Debezium was paused before it", lsnText(dbzConfirmed), lsnText(windowStart))
	}

	r := startRelay(t, f.args("--slot", f.slot, "--publication", f.publication, "--topic-template", topicPrefix+".{aggregate_type}",
		"--key-format", "string", "--value-format", "json", "--builtin-headers", "id"))
	r.waitStreaming(60 * time.Second)
	markers, markersEnd := insert16("markers", 910000)
	// The relay confirms a position only once Kafka acked everything
	// before it, and the reader has read a marker after each partition's
	// earlier records: a window row the relay published would be read.
	waitFor(t, dbzWait, "the relay to publish the markers and confirm past "+lsnText(markersEnd), func() bool {
		failIfExited(t, r)
		return f.confirmedFlush() >= markersEnd && hasAll(recordsByID(reader.Records(), topicPrefix), markers)
	})
	ids := writer.finish(t)

	got := recordsByID(reader.Records(), topicPrefix)
	for _, id := range window {
		if n := len(got[id]); n != 0 {
			t.Errorf("id %s, committed after Debezium's last publish and before the relay's slot, is in Kafka %d times: want the gap MIGRATING.md B step 2 warns of", id, n)
		}
	}
	lost := 0
	for _, id := range ids {
		if len(got[id]) == 0 {
			lost++
		}
	}
	t.Logf("own-slot-early-stop: Debezium confirmed %s, paused before the window %s..%s; the relay's slot starts at %s; window ids %v missing from Kafka; %d of the writer's %d ids lost as well",
		lsnText(dbzConfirmed), lsnText(windowStart), lsnText(windowEnd), lsnText(relayStart), window, lost, len(ids))
}
