package main

// The row → record formats of a Debezium replacement, end to end: key and
// value formats, builtin and column headers, record timestamps and
// tombstones, read back by franz-go (and, for Avro keys, decoded through
// the registry by srclient and goavro).

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/internal/relaytest"
)

// formatsDDL is an outbox with a nullable payload and the column types
// header columns and timestamps are read from.
const formatsDDL = `CREATE TABLE %s (
	id bigserial PRIMARY KEY,
	aggregate_type text NOT NULL,
	aggregate_id text NOT NULL,
	event_type text NOT NULL,
	payload jsonb,
	headers jsonb NOT NULL DEFAULT '{}',
	tenant uuid,
	occurred_at timestamptz,
	seq bigint,
	local_ts timestamp,
	span interval
)`

// TestDebeziumShapedRecords: --key-format json and json-schema (Kafka
// Connect's JsonConverter without and with schemas), --value-format json (no
// registry settings at all), --builtin-headers id, --header-columns of
// every supported kind, --timestamp-column and tombstones.
//
// The database's default TimeZone and DateStyle are not UTC and ISO here,
// as on many servers: the relay's replication connection must still get
// timestamp text it reads correctly.
//
// Each key format runs at-least-once and exactly-once (delivery_test.go:
// read_committed, every record, tombstone and dead letter exactly once),
// all in parallel: each changes the settings of a database of its own.
func TestDebeziumShapedRecords(t *testing.T) {
	t.Parallel()
	for _, kf := range []struct {
		format string
		key    func(literal string) string // the key of an aggregate id, given as a JSON string literal
	}{
		{"json", func(lit string) string { return lit }},
		{"json-schema", func(lit string) string { return `{"schema":{"type":"string","optional":false},"payload":` + lit + `}` }},
	} {
		t.Run(kf.format, func(t *testing.T) {
			t.Parallel()
			eachDelivery(t, true, func(t *testing.T, d delivery) { testDebeziumShapedRecords(t, d, kf.format, kf.key) })
		})
	}
}

// ownDatabase creates a database of the test's own on the shared cluster,
// so that the test's ALTER DATABASE settings reach no other test.
func ownDatabase(t *testing.T) pgTarget {
	t.Helper()
	relaytest.Need(t, pg)
	name := "db_" + randSuffix()
	url, err := pg.CreateDatabase(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return pgTarget{cluster: pg.Get(), db: name, url: url}
}

func testDebeziumShapedRecords(t *testing.T, d delivery, keyFormat string, key func(string) string) {
	f := newFixtureOn(t, ownDatabase(t), formatsDDL)
	f.exec(`ALTER DATABASE ` + f.pg.db + ` SET timezone = 'Asia/Kolkata'`)
	f.exec(`ALTER DATABASE ` + f.pg.db + ` SET datestyle = 'SQL, DMY'`)
	c := d.consume(t, "^"+f.topicPrefix+`\..*`)
	args := []string{"run", "--pg-url", f.pg.url, "--slot", f.slot, "--publication", f.publication, "--table", "public." + f.table,
		"--kafka-brokers", broker.Addr(), "--topic-template", f.topicPrefix + ".{aggregate_type}", "--dlq-topic", f.dlq,
		"--key-format", keyFormat, "--value-format", "json", "--builtin-headers", "id",
		"--header-columns", "tenant,occurred_at:occurred,seq,local_ts", "--timestamp-column", "occurred_at",
		"--tombstone-on-null-payload", "true"}
	r := startRelay(t, d.with(args))
	r.waitStreaming(60 * time.Second)
	ctx := context.Background()
	conn := f.connect()

	insert := fmt.Sprintf(`INSERT INTO %s (aggregate_type, aggregate_id, event_type, payload, headers, tenant, occurred_at, seq, local_ts)
		VALUES ($1, $2, 'CustomerChanged', $3::jsonb, '{"traceparent": "00-ff"}', $4, $5, $6, $7) RETURNING id`, f.table)
	var ids []int64
	add := func(agg string, payload any, tenant any, occurred any, seq any, local any) int64 {
		var id int64
		if err := conn.QueryRow(ctx, insert, "Customer", agg, payload, tenant, occurred, seq, local).Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		return id
	}
	start := time.Now()
	full := add("c\"1", `{"name": "Ann", "tags": ["a", "b"], "nested": {"x": 1.5}}`, "5D9E1D7A-6B1F-4C4E-9A57-1F0E0A3C2B11",
		time.Date(2026, 11, 30, 10, 0, 0, 123456000, time.UTC), int64(-42), time.Date(2026, 11, 30, 10, 0, 0, 5000, time.UTC))
	nulls := add("c2", `{"name": "Bob"}`, nil, nil, nil, nil)
	tomb := add("c2", nil, nil, nil, nil, nil)
	notObject := add("c3", `[1, 2]`, nil, nil, nil, nil)
	end := time.Now()

	recs := byID(c.waitIDs(90*time.Second, ids))
	id := func(n int64) record { return recs[strconv.FormatInt(n, 10)] }

	got := id(full)
	if got.Topic != f.topic("Customer") || got.Key != key(`"c\"1"`) {
		t.Errorf("topic %q key %q, want %q and %s", got.Topic, got.Key, f.topic("Customer"), key(`"c\"1"`))
	}
	if want := `{"name":"Ann","tags":["a","b"],"nested":{"x":1.5}}`; string(got.Value) != want {
		t.Errorf("value %s, want %s", got.Value, want)
	}
	wantHeaders := map[string]string{"id": strconv.FormatInt(full, 10), "tenant": "5d9e1d7a-6b1f-4c4e-9a57-1f0e0a3c2b11",
		"occurred": "2026-11-30T10:00:00.123456Z", "seq": "-42", "local_ts": "1796032800000005", "traceparent": "00-ff"}
	if !maps.Equal(got.Headers, wantHeaders) {
		t.Errorf("headers %v\nwant    %v", got.Headers, wantHeaders)
	}
	if want := time.Date(2026, 11, 30, 10, 0, 0, 123e6, time.UTC); !got.Timestamp.Equal(want) {
		t.Errorf("timestamp %v, want occurred_at %v", got.Timestamp, want)
	}

	got = id(nulls)
	if nulls := strings.Join(got.NullHeaders, ","); nulls != "tenant,occurred,seq,local_ts" {
		t.Errorf("null headers %q, want the NULL columns tenant,occurred,seq,local_ts", nulls)
	}
	// A NULL timestamp column falls back to the commit time, which lies
	// between the first insert and the last commit (millisecond resolution).
	if got.Timestamp.Before(start.Truncate(time.Millisecond)) || got.Timestamp.After(end) {
		t.Errorf("timestamp %v of a NULL occurred_at is not the commit time (between %v and %v)", got.Timestamp, start, end)
	}

	got = id(tomb)
	if !got.NullValue || got.Key != key(`"c2"`) || got.Topic != f.topic("Customer") {
		t.Errorf("tombstone: null value %v key %q topic %q", got.NullValue, got.Key, got.Topic)
	}
	if id(nulls).Partition != got.Partition {
		t.Errorf("tombstone on partition %d, its aggregate's events on %d", got.Partition, id(nulls).Partition)
	}

	got = id(notObject)
	if got.Topic != f.dlq || !strings.Contains(got.Headers["error"], "not a JSON object") || got.Headers["error_kind"] != "invalid_payload" || string(got.Value) != "[1, 2]" {
		t.Errorf("non-object payload: topic %q error %q value %q", got.Topic, got.Headers["error"], got.Value)
	}
	// Exactly once, a dead letter counts once its Kafka transaction
	// committed, which a read_committed consumer may see first.
	if n := r.waitMetric(`cdc_relay_dlq_events_total`, 30*time.Second, func(v float64) bool { return v >= 1 }); n != 1 {
		t.Errorf("dlq events %v; want 1", n)
	}
	if d.once() {
		end := currentLSN(t, conn)
		waitFor(t, 30*time.Second, "the slot to confirm past the events", func() bool { return f.confirmedFlush() >= end })
		checkOnce(t, c.records(), idStrings(ids))
	}
	if code := r.terminate(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// TestAvroKey: --key-format avro writes Confluent's framing of an Avro
// string, registered as "string" under <topic>-key; an independent client
// (srclient fetches the schema by id, goavro decodes) reads the aggregate id.
// It runs at-least-once and exactly-once (delivery_test.go).
func TestAvroKey(t *testing.T) { t.Parallel(); eachDelivery(t, true, testAvroKey) }

func testAvroKey(t *testing.T, d delivery) {
	f := newFixture(t, "")
	c := d.consume(t, "^"+f.topicPrefix+`\..*`)
	r := startRelay(t, d.with(f.args("--key-format", "avro")))
	r.waitStreaming(60 * time.Second)
	agg := uuidFor(910)
	conn := connect(t)
	ids, err := f.insertTx(context.Background(), conn, []event{{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	end := currentLSN(t, conn)
	rec := c.waitIDs(60*time.Second, ids)[0]
	key := []byte(rec.Key)
	if len(key) < 5 || key[0] != 0 {
		t.Fatalf("key % x is not in the Confluent wire format", key)
	}
	schema, err := newAvroDecoder().client.GetSchema(int(binary.BigEndian.Uint32(key[1:5])))
	if err != nil {
		t.Fatal(err)
	}
	native, rest, err := schema.Codec().NativeFromBinary(key[5:])
	if err != nil || len(rest) != 0 || native != agg {
		t.Fatalf("key decodes to %v (rest %d, err %v), want %s", native, len(rest), err, agg)
	}
	latest, err := newAvroDecoder().client.GetLatestSchema(rec.Topic + "-key")
	if err != nil || latest.ID() != schema.ID() {
		t.Fatalf("subject %s-key: %v, %v; want schema %d", rec.Topic, latest, err, schema.ID())
	}
	if v, _, err := newAvroDecoder().decode(rec.Value); err != nil || v["order_id"] != agg {
		t.Fatalf("value %v, %v", v, err)
	}
	if d.once() {
		waitFor(t, 30*time.Second, "the slot to confirm past the event", func() bool { return f.confirmedFlush() >= end })
		checkOnce(t, c.records(), idStrings(ids))
	}
}

// TestRecordColumnsConfigErrors: a header column that does not exist, a
// header column without a header form and a timestamp column of an
// unsupported type are configuration errors found in the catalog: exit 2,
// naming the flag, before anything streams.
func TestRecordColumnsConfigErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t, formatsDDL)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"missing header column", []string{"--header-columns", "tenant,nope"}, `--header-columns: column "nope" does not exist`},
		{"header column type", []string{"--header-columns", "span"}, `--header-columns: column "span" of public.` + f.table + ` is of type interval`},
		{"timestamp column type", []string{"--timestamp-column", "tenant"}, `--timestamp-column: column "tenant" of public.` + f.table + ` is of type uuid`},
		{"missing timestamp column", []string{"--timestamp-column", "nope"}, `--timestamp-column: column "nope" does not exist`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := startRelay(t, f.args(tc.args...))
			if code := r.wait(60 * time.Second); code != exitConfig {
				t.Fatalf("exit code %d, want %d; output:\n%s", code, exitConfig, tailString(r.Output(), 3000))
			}
			if !strings.Contains(r.Output(), tc.want) {
				t.Fatalf("output does not say %q:\n%s", tc.want, tailString(r.Output(), 3000))
			}
		})
	}
	if _, active := f.slotState(); active {
		t.Fatal("a relay with a bad configuration holds the slot")
	}
	var check bytes.Buffer
	code := run([]string{"check", "--pg-url", dbURL, "--slot", f.slot, "--publication", f.publication, "--table", "public." + f.table,
		"--kafka-brokers", broker.Addr(), "--value-format", "json", "--header-columns", "nope"}, env(nil), &check, &bytes.Buffer{})
	if code != exitFailed || !strings.Contains(check.String(), `FAIL  --header-columns: column "nope" does not exist`) {
		t.Fatalf("check: exit %d\n%s", code, check.String())
	}
}

// TestBrokerRefusesTimestamp: a --timestamp-column value further in the
// future than the topic's message.timestamp.after.max.ms allows is refused
// by the broker; the event goes to the dead-letter topic saying so, and the
// events around it arrive.
// TestBrokerRefusesTimestamp, at-least-once and under --delivery
// exactly-once (read by a read_committed consumer): the broker refuses the
// batch holding a future-dated record; after the restart that batch's
// records go one at a time, and only the refused one is dead-lettered, in
// its place. The refused record's transaction also holds an invalid event,
// dead-lettered before the refusal and again after the restart: under
// exactly-once the first dead letter was in the aborted Kafka transaction,
// so a read_committed consumer reads it once and it is counted once.
func TestBrokerRefusesTimestamp(t *testing.T) {
	t.Parallel()
	for _, delivery := range []string{"at-least-once", "exactly-once"} {
		t.Run(delivery, func(t *testing.T) {
			f := newFixture(t, formatsDDL)
			createTopic(t, broker.Addr(), f.topic("Customer"), map[string]string{"message.timestamp.after.max.ms": "3600000"})
			c := consume(t, "^"+f.topicPrefix+`\..*`, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
			r := startRelay(t, f.args("--value-format", "json", "--timestamp-column", "occurred_at", "--delivery", delivery))
			r.waitStreaming(60 * time.Second)
			ctx := context.Background()
			conn := connect(t)
			insert := fmt.Sprintf(`INSERT INTO %s (aggregate_type, aggregate_id, event_type, payload, occurred_at)
				VALUES ('Customer', 'c1', 'CustomerChanged', $2::jsonb, $1) RETURNING id`, f.table)
			var ids []int64
			add := func(q interface {
				QueryRow(context.Context, string, ...any) pgx.Row
			}, at time.Time, payload string) {
				var id int64
				if err := q.QueryRow(ctx, insert, at, payload).Scan(&id); err != nil {
					t.Fatal(err)
				}
				ids = append(ids, id)
			}
			add(conn, time.Now().Add(-time.Minute), `{"n": 1}`)
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			add(tx, time.Now(), `[1]`) // not an object: a dead letter
			add(tx, time.Now().Add(30*24*time.Hour), `{"n": 2}`)
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			add(conn, time.Now(), `{"n": 3}`)
			recs := byID(c.waitIDs(60*time.Second, ids))
			if inv := recs[strconv.FormatInt(ids[1], 10)]; inv.Topic != f.dlq || inv.Headers["error_kind"] != "invalid_payload" {
				t.Errorf("invalid event: topic %q error_kind %q, want the DLQ with invalid_payload", inv.Topic, inv.Headers["error_kind"])
			}
			future := recs[strconv.FormatInt(ids[2], 10)]
			if future.Topic != f.dlq || !strings.Contains(future.Headers["error"], "refused the record") || !strings.Contains(future.Headers["error"], "timestamp") || future.Headers["error_kind"] != "invalid_timestamp" {
				t.Errorf("future-dated event: topic %q error %q, want the DLQ saying the broker refused its timestamp", future.Topic, future.Headers["error"])
			}
			for _, id := range []int64{ids[0], ids[3]} {
				if rec := recs[strconv.FormatInt(id, 10)]; rec.Topic != f.topic("Customer") {
					t.Errorf("event %d went to %s", id, rec.Topic)
				}
			}
			if n := r.waitMetric(`cdc_relay_dlq_events_total{reason="invalid_timestamp"}`, 30*time.Second, func(v float64) bool { return v >= 1 }); n != 1 {
				t.Errorf("invalid_timestamp dead letters %v; want 1", n)
			}
			if delivery == "exactly-once" {
				end := currentLSN(t, conn)
				waitFor(t, 30*time.Second, "the slot to confirm past the events", func() bool { return f.confirmedFlush() >= end })
				checkOnce(t, c.records(), idStrings(ids))
				if n, err := r.metric(`cdc_relay_dlq_events_total{reason="invalid_payload"}`); err != nil || n != 1 {
					t.Errorf("invalid_payload dead letters %v, %v; want 1: the one of the aborted Kafka transaction is not counted", n, err)
				}
			}
		})
	}
}
