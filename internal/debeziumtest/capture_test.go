package debeziumtest

// TestCapture runs the real Debezium connector with its Outbox Event Router
// over rows chosen to pin every byte the relay must reproduce (keys under
// each key converter, header texts of each column type, JSON values,
// timestamps, tombstones) and compares what lands in Kafka with
// testdata/debezium/*.json; -update rewrites those files instead.

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

var update = flag.Bool("update", false, "rewrite testdata/debezium/*.json from a real Debezium run")

// fixtureDir holds the captured fixtures.
const fixtureDir = "../../" + FixtureDir

// captureDDL is the outbox table of the capture: docs/outbox.sql's columns
// (payload nullable, for the tombstone) plus one column per header type.
const captureDDL = `CREATE TABLE public.cap_outbox (
	id bigserial PRIMARY KEY,
	aggregate_type text NOT NULL,
	aggregate_id text NOT NULL,
	event_type text NOT NULL,
	payload jsonb,
	created_at timestamptz NOT NULL DEFAULT now(),
	c_uuid uuid,
	c_smallint smallint,
	c_integer integer,
	c_bigint bigint,
	c_timestamptz timestamptz,
	c_timestamptz3 timestamptz(3),
	c_timestamptz0 timestamptz(0),
	c_timestamp timestamp,
	c_timestamp3 timestamp(3),
	c_timestamp0 timestamp(0),
	c_text text,
	c_boolean boolean,
	c_date date,
	c_jsonb jsonb,
	c_json json,
	c_varchar varchar(20),
	c_char char(5),
	c_numeric numeric(10,2)
);
CREATE TABLE public.cap_outbox_uuid (
	id uuid PRIMARY KEY,
	aggregate_type text NOT NULL,
	aggregate_id text NOT NULL,
	event_type text NOT NULL,
	payload jsonb NOT NULL
);
CREATE TABLE public.cap_outbox_keys (
	id bigserial PRIMARY KEY,
	aggregate_type text NOT NULL,
	aggregate_id uuid NOT NULL,
	event_type text NOT NULL,
	payload jsonb NOT NULL
);
CREATE TABLE public.cap_outbox_int8 (
	id bigserial PRIMARY KEY,
	aggregate_type text NOT NULL,
	aggregate_id bigint NOT NULL,
	event_type text NOT NULL,
	payload jsonb NOT NULL
);
CREATE TABLE public.cap_outbox_int4 (
	id bigserial PRIMARY KEY,
	aggregate_type text NOT NULL,
	aggregate_id integer,
	event_type text NOT NULL,
	payload jsonb NOT NULL
);
CREATE TABLE public.cap_outbox_nullable (
	id bigserial PRIMARY KEY,
	aggregate_type text NOT NULL,
	aggregate_id text,
	event_type text NOT NULL,
	payload jsonb NOT NULL
);
CREATE TABLE public.cap_stamp (
	id bigserial PRIMARY KEY,
	aggregate_type text NOT NULL,
	aggregate_id text NOT NULL,
	event_type text NOT NULL,
	payload jsonb NOT NULL,
	c_bigint bigint,
	c_timestamptz timestamptz,
	c_timestamp timestamp
)`

// headerColumns are cap_outbox's header columns and their SQL types.
var headerColumns = [][2]string{
	{"c_uuid", "uuid"}, {"c_smallint", "smallint"}, {"c_integer", "integer"}, {"c_bigint", "bigint"},
	{"c_timestamptz", "timestamptz"}, {"c_timestamptz3", "timestamptz(3)"}, {"c_timestamptz0", "timestamptz(0)"},
	{"c_timestamp", "timestamp"}, {"c_timestamp3", "timestamp(3)"}, {"c_timestamp0", "timestamp(0)"},
	{"c_text", "text"}, {"c_boolean", "boolean"}, {"c_date", "date"}, {"c_jsonb", "jsonb"}, {"c_json", "json"},
	{"c_varchar", "varchar(20)"}, {"c_char", "char(5)"}, {"c_numeric", "numeric(10,2)"},
}

// keyCases are aggregate ids that exercise JSON string escaping.
var keyCases = []string{
	"order-42",
	"5d9e1f0a-3b7c-4c2e-9a51-8f6d2b0e7c14",
	"Заказ-№7",
	"emoji-🚀-😀",
	`say "hi"`,
	`back\slash`,
	"line\nbreak\ttab",
	"ctl-\u0001-\u001f-\u007f",
	"bs\bff\fcr\r",
	"a/b/c",
	"<tag>&amp;",
	"sep\u2028para\u2029",
	"",
}

// relayText reads a stored cap_outbox column the way pgoutput sends it to
// the relay, whose replication connection sets DateStyle ISO and TimeZone
// UTC, and the column's type modifier.
func relayText(t *testing.T, ctx context.Context, conn *pgx.Conn, column, id string) (string, int32) {
	t.Helper()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var text *string
	var mod int32
	if _, err := tx.Exec(ctx, "SET LOCAL TimeZone = 'UTC'; SET LOCAL DateStyle = 'ISO'"); err != nil {
		t.Fatal(err)
	}
	// concat uses the type's output function, as pgoutput does (a cast to
	// text would write a boolean as "true", pgoutput writes "t").
	q := fmt.Sprintf(`SELECT CASE WHEN %[1]s IS NULL THEN NULL ELSE concat(%[1]s) END, (SELECT atttypmod FROM pg_attribute WHERE attrelid = 'public.cap_outbox'::regclass AND attname = $2)
		FROM public.cap_outbox WHERE id::text = $1`, pgx.Identifier{column}.Sanitize())
	if err := tx.QueryRow(ctx, q, id, column).Scan(&text, &mod); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	if text == nil {
		return "", mod
	}
	return *text, mod
}

// headerCase is one header column value, written under a session TimeZone.
type headerCase struct {
	column, value, tz string
}

var headerCases = []headerCase{
	{"c_uuid", "'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'", "UTC"},
	{"c_smallint", "-32768", "UTC"},
	{"c_smallint", "7", "UTC"},
	{"c_integer", "2147483647", "UTC"},
	{"c_integer", "-1", "UTC"},
	{"c_bigint", "-9223372036854775808", "UTC"},
	{"c_bigint", "9223372036854775807", "UTC"},
	{"c_bigint", "0", "UTC"},
	{"c_timestamptz", "'2024-03-05 06:07:08+00'", "UTC"},
	{"c_timestamptz", "'2024-03-05 06:07:08.123+00'", "UTC"},
	{"c_timestamptz", "'2024-03-05 06:07:08.123456+00'", "UTC"},
	{"c_timestamptz", "'2024-03-05 06:07:08.120+00'", "UTC"},
	{"c_timestamptz", "'2024-03-05 06:07:08.100000+00'", "UTC"},
	{"c_timestamptz", "'2024-03-05 09:07:08'", "Europe/Moscow"},
	{"c_timestamptz", "'2024-03-05 09:07:08.123456'", "Europe/Moscow"},
	{"c_timestamptz", "'1969-12-31 23:59:59.999999+00'", "UTC"},
	{"c_timestamptz3", "'2024-03-05 06:07:08+00'", "UTC"},
	{"c_timestamptz3", "'2024-03-05 06:07:08.5+00'", "UTC"},
	{"c_timestamptz3", "'2024-03-05 06:07:08.123+00'", "UTC"},
	{"c_timestamptz3", "'2024-03-05 09:07:08.123'", "Europe/Moscow"},
	{"c_timestamptz0", "'2024-03-05 06:07:08+00'", "UTC"},
	{"c_timestamptz0", "'2024-03-05 09:07:08'", "Europe/Moscow"},
	{"c_timestamp", "'2024-03-05 06:07:08'", "UTC"},
	{"c_timestamp", "'2024-03-05 06:07:08.123'", "UTC"},
	{"c_timestamp", "'2024-03-05 06:07:08.123456'", "UTC"},
	{"c_timestamp", "'2024-03-05 06:07:08.123456'", "Europe/Moscow"},
	{"c_timestamp", "'1969-12-31 23:59:59.999999'", "UTC"},
	{"c_timestamp3", "'2024-03-05 06:07:08'", "UTC"},
	{"c_timestamp3", "'2024-03-05 06:07:08.123'", "UTC"},
	{"c_timestamp0", "'2024-03-05 06:07:08'", "UTC"},
	{"c_text", "'plain text'", "UTC"},
	{"c_text", "'Привет \"q\" \\ 🚀'", "UTC"},
	{"c_text", "''", "UTC"},
	{"c_boolean", "true", "UTC"},
	{"c_boolean", "false", "UTC"},
	{"c_date", "'2024-03-05'", "UTC"},
	{"c_date", "'1969-12-31'", "Europe/Moscow"},
	{"c_jsonb", `'{"b": 1, "a": [1, 2], "s": "x\"y"}'`, "UTC"},
	{"c_json", `'{"b": 1,  "a": [1,2]}'`, "UTC"},
	{"c_varchar", "'varying'", "UTC"},
	{"c_char", "'ab'", "UTC"},
	{"c_numeric", "12.5", "UTC"},
}

// valueCases are jsonb payload literals.
var valueCases = []string{
	`{"orderId": 42, "status": "PLACED"}`,
	`{"order": {"id": 42, "customer": {"id": 7, "name": "Ann"}}}`,
	`{"ints": [1, 2, 3]}`,
	`{"strs": ["a", "b"]}`,
	`{"objs": [{"a": 1}, {"a": 2}]}`,
	`{"objs": [{"a": 1}, {"b": "x"}]}`,
	`{"empty": []}`,
	`{"mixed": [1, "a"]}`,
	`{"f": 1.5}`,
	`{"f": 1.0}`,
	`{"f": 1e21}`,
	`{"f": -0.0}`,
	`{"f": 0.1}`,
	`{"f": 1.5e-7}`,
	`{"n": 9007199254740993}`,
	`{"n": 9223372036854775807}`,
	`{"n": 92233720368547758070}`,
	`{"n": -42}`,
	`{"n": 2147483648}`,
	`{"n": 1}`,
	`{"s": "quote \" backslash \\ slash / tab \t nl \n ctl \u0001 del \u007f"}`,
	`{"s": "Привет 🚀 <tag> & sep\u2028para\u2029"}`,
	`{"f": 1.50}`,
	`{"f": 100.0}`,
	`{"f": 10000000.0}`,
	`{"f": 12345678.5}`,
	`{"f": 0.001}`,
	`{"f": 0.0001}`,
	`{"f": 1e3}`,
	`{"f": 3.141592653589793238}`,
	`{"f": 282879384806159000.0}`,
	`{"f": 100000000000000000000000.0}`,
	`{"f": 123456789012.25}`,
	`{"a": [1, 9223372036854775807]}`,
	`{"a": [1, 1.5]}`,
	`{"a": [1, null]}`,
	`{"a": [[1, 2], [3]]}`,
	`{"o": {}}`,
	`{"objs": [{"a": 1}, {"a": "x"}]}`,
	`{"objs": [{"a": 1}, {"a": 2147483648}]}`,
	`{"objs": [{"x": null}, {"x": 1}]}`,
	`{"objs": [{"e": []}, {"e": [1]}]}`,
	`{"a": [null, null]}`,
	`{"a": [[], [1]]}`,
	`{"a": {"b": []}}`,
	`{"a": [{}, {}]}`,
	`{"n": 2147483647, "m": -2147483649}`,
	`{"f": 1e-7, "g": 123e5}`,
	`42`,
	`true`,
	`null`,
	`{"b": true, "c": false}`,
	`{"nul": null, "x": 1}`,
	`{"nested": {"nul": null}}`,
	`{}`,
	`{"zebra": 1, "apple": 2, "b": 3, "aa": 4}`,
	`{"dup": 1, "dup": 2}`,
	`[1, 2]`,
	`"just a string"`,
}

// capture is what one run of Debezium produced.
type capture struct {
	keys    []KeyFixture
	headers []HeaderFixture
	values  []ValueFixture
	records []RecordFixture
}

const (
	capDB         = "capture"
	capPartitions = 3
	// capWait bounds the wait for every record: Connect starts in 5-20 s,
	// each connector in a few more, on a shared machine.
	capWait = 4 * time.Minute
)

// capConnector is one connector of the capture with the rows it must
// write.
type capConnector struct {
	Connector
	options []string // as recorded in records.json
	table   string
}

func TestCapture(t *testing.T) {
	got := runCapture(t)
	files := map[string]any{"keys.json": got.keys, "headers.json": got.headers, "values.json": got.values, "records.json": got.records}
	for _, name := range []string{"keys.json", "headers.json", "values.json", "records.json"} {
		b, err := json.MarshalIndent(files[name], "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		b = append(b, '\n')
		path := filepath.Join(fixtureDir, name)
		if *update {
			if err := os.MkdirAll(fixtureDir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test ./internal/debeziumtest -run TestCapture -update)", err)
		}
		if !bytes.Equal(b, want) {
			t.Errorf("Debezium's output differs from %s:\n%s", path, lineDiff(string(want), string(b)))
		}
	}
}

// lineDiff lists the lines of got that differ from want, by position.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n  stored:   %s\n  debezium: %s\n", i+1, wl, gl)
		}
	}
	return b.String()
}

// runCapture starts PostgreSQL, Kafka and Connect, writes the rows, runs
// the connectors and collects their records.
func runCapture(t *testing.T) capture {
	ctx := context.Background()
	pg, broker := services(t)
	url, err := pg.CreateDatabase(ctx, capDB)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(captureDDL)

	headerPlacement := make([]string, len(headerColumns))
	for i, c := range headerColumns {
		headerPlacement[i] = c[0] + ":header"
	}
	// errors.tolerance=all: a record Debezium cannot convert is skipped and
	// logged (and recorded as missing) instead of failing the connector.
	base := Connector{PGPort: pg.Port(), Database: capDB, PublicationAutocreate: "disabled", ExpandJSONPayload: true, ValueConverter: JSONConverter,
		Extra: [][2]string{{"errors.tolerance", "all"}, {"errors.log.enable", "true"}, {"errors.log.include.messages", "true"}}}
	conn1 := func(name, table string, key Converter, opts []string, mod func(*Connector)) capConnector {
		c := base
		c.Name, c.Slot, c.Publication, c.Table = name, "slot_"+strings.ReplaceAll(name, "-", "_"), "pub_"+strings.ReplaceAll(name, "-", "_"), "public."+table
		c.KeyConverter = key
		c.TopicReplacement = name + ".${routedByValue}"
		if mod != nil {
			mod(&c)
		}
		return capConnector{Connector: c, options: opts, table: table}
	}
	connectors := []capConnector{
		conn1("cap-string", "cap_outbox", StringConverter, []string{"key.converter=StringConverter", "table.expand.json.payload=true", "table.fields.additional.placement=<every c_ column>:header", "route.tombstone.on.empty.payload=true"}, func(c *Connector) {
			c.AdditionalPlacement = strings.Join(headerPlacement, ",")
			c.TombstoneOnEmptyPayload = true
		}),
		conn1("cap-json", "cap_outbox", JSONConverter, []string{"key.converter=JsonConverter schemas.enable=false", "table.expand.json.payload=true", "table.fields.additional.placement=c_uuid:header:uuid_alias"}, func(c *Connector) {
			c.AdditionalPlacement = "c_uuid:header:uuid_alias"
		}),
		conn1("cap-json-schema", "cap_outbox", JSONSchemaConverter, []string{"key.converter=JsonConverter schemas.enable=true", "table.expand.json.payload=true"}, nil),
		conn1("cap-uuid", "cap_outbox_uuid", StringConverter, []string{"key.converter=StringConverter", "table.expand.json.payload=true"}, nil),
		conn1("cap-uuidkey-string", "cap_outbox_keys", StringConverter, []string{"aggregate_id uuid NOT NULL", "key.converter=StringConverter"}, nil),
		conn1("cap-uuidkey-json", "cap_outbox_keys", JSONConverter, []string{"aggregate_id uuid NOT NULL", "key.converter=JsonConverter schemas.enable=false"}, nil),
		conn1("cap-uuidkey-json-schema", "cap_outbox_keys", JSONSchemaConverter, []string{"aggregate_id uuid NOT NULL", "key.converter=JsonConverter schemas.enable=true"}, nil),
		conn1("cap-int8key-string", "cap_outbox_int8", StringConverter, []string{"aggregate_id bigint NOT NULL", "key.converter=StringConverter"}, nil),
		conn1("cap-int8key-json", "cap_outbox_int8", JSONConverter, []string{"aggregate_id bigint NOT NULL", "key.converter=JsonConverter schemas.enable=false"}, nil),
		conn1("cap-int8key-json-schema", "cap_outbox_int8", JSONSchemaConverter, []string{"aggregate_id bigint NOT NULL", "key.converter=JsonConverter schemas.enable=true"}, nil),
		conn1("cap-int4key-json-schema", "cap_outbox_int4", JSONSchemaConverter, []string{"aggregate_id integer (nullable)", "key.converter=JsonConverter schemas.enable=true"}, nil),
		conn1("cap-nullable-json-schema", "cap_outbox_nullable", JSONSchemaConverter, []string{"aggregate_id text (nullable)", "key.converter=JsonConverter schemas.enable=true"}, nil),
		conn1("cap-ts-bigint", "cap_stamp", StringConverter, []string{"table.field.event.timestamp=c_bigint (bigint)"}, func(c *Connector) { c.EventTimestampField = "c_bigint" }),
		conn1("cap-ts-timestamp", "cap_stamp", StringConverter, []string{"table.field.event.timestamp=c_timestamp (timestamp)"}, func(c *Connector) { c.EventTimestampField = "c_timestamp" }),
	}
	// The slots exist before the rows, so the connectors (no snapshot)
	// stream every row; publications are made here, not by Debezium.
	for _, c := range connectors {
		exec(fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE %s", c.Publication, c.Table))
		exec("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", c.Slot)
	}

	// The rows, in this order; rowOf names each outbox id's case.
	rowOf := map[string]string{}
	insert := func(table, tz, cols, vals string, args ...any) string {
		t.Helper()
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, "SET LOCAL TimeZone = '"+tz+"'"); err != nil {
			t.Fatal(err)
		}
		var id string
		q := fmt.Sprintf("INSERT INTO public.%s (%s) VALUES (%s) RETURNING id::text", table, cols, vals)
		if err := tx.QueryRow(ctx, q, args...).Scan(&id); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		return id
	}
	const common = "aggregate_type, aggregate_id, event_type, payload"
	keyIDs := make([]string, len(keyCases))
	for i, k := range keyCases {
		keyIDs[i] = insert("cap_outbox", "UTC", common, "'Key', $1, 'KeyCase', '{}'", k)
		rowOf["cap_outbox/"+keyIDs[i]] = "key " + strconv.Quote(k)
	}
	headerIDs := make([]string, len(headerCases))
	pgText := make([]string, len(headerCases))
	typmod := make([]int32, len(headerCases))
	for i, h := range headerCases {
		headerIDs[i] = insert("cap_outbox", h.tz, common+", "+h.column, fmt.Sprintf("'Header', 'h%d', 'HeaderCase', '{}', %s", i, h.value))
		rowOf["cap_outbox/"+headerIDs[i]] = h.column + " = " + h.value
		pgText[i], typmod[i] = relayText(t, ctx, conn, h.column, headerIDs[i])
	}
	valueIDs := make([]string, len(valueCases))
	jsonbText := make([]string, len(valueCases))
	for i, v := range valueCases {
		valueIDs[i] = insert("cap_outbox", "UTC", common, "'Value', $1, 'ValueCase', $2::jsonb", fmt.Sprintf("v%d", i), v)
		rowOf["cap_outbox/"+valueIDs[i]] = "payload " + v
		if err := conn.QueryRow(ctx, "SELECT $1::jsonb::text", v).Scan(&jsonbText[i]); err != nil {
			t.Fatal(err)
		}
	}
	tombID := insert("cap_outbox", "UTC", common, "'Tombstone', 'tomb-1', 'Deleted', NULL")
	rowOf["cap_outbox/"+tombID] = "payload NULL"
	uuidID := insert("cap_outbox_uuid", "UTC", "id, "+common, "'B1C2D3E4-F5A6-4B7C-8D9E-0F1A2B3C4D5E', 'Order', 'o-1', 'Created', '{}'")
	rowOf["cap_outbox_uuid/"+uuidID] = "id uuid 'B1C2D3E4-F5A6-4B7C-8D9E-0F1A2B3C4D5E'"
	uuidKeyID := insert("cap_outbox_keys", "UTC", common, "'Order', 'C0FFEE00-AAAA-4BBB-8CCC-0123456789AB', 'Created', '{}'")
	rowOf["cap_outbox_keys/"+uuidKeyID] = "aggregate_id uuid 'C0FFEE00-AAAA-4BBB-8CCC-0123456789AB'"
	int8KeyID := insert("cap_outbox_int8", "UTC", common, "'Order', -9007199254740993, 'Created', '{}'")
	rowOf["cap_outbox_int8/"+int8KeyID] = "aggregate_id bigint -9007199254740993"
	int4KeyID := insert("cap_outbox_int4", "UTC", common, "'Order', 42, 'Created', '{}'")
	rowOf["cap_outbox_int4/"+int4KeyID] = "aggregate_id integer 42 (nullable column)"
	nullableID := insert("cap_outbox_nullable", "UTC", common, "'Order', 'o-1', 'Created', '{}'")
	rowOf["cap_outbox_nullable/"+nullableID] = "aggregate_id 'o-1' in a nullable text column"
	stampIDs := []string{
		insert("cap_stamp", "UTC", common+", c_bigint, c_timestamptz, c_timestamp", "'Stamp', 's-1', 'Stamped', '{}', 1700000000123, '2023-11-14 22:13:20.123456+00', '2023-11-14 22:13:20.123456'"),
		insert("cap_stamp", "UTC", common, "'Stamp', 's-2', 'Stamped', '{}'"),
	}
	rowOf["cap_stamp/"+stampIDs[0]] = "c_bigint = 1700000000123, c_timestamptz = '2023-11-14 22:13:20.123456+00', c_timestamp = '2023-11-14 22:13:20.123456'"
	rowOf["cap_stamp/"+stampIDs[1]] = "c_bigint, c_timestamptz, c_timestamp NULL"
	// Two sentinel transactions per table: Debezium confirms a transaction
	// to PostgreSQL once Kafka acknowledged it and everything before it
	// (or the record was dropped as an error) and a later transaction came,
	// so a slot confirmed past before marks the end of every connector's
	// work, whether it wrote, dropped or failed on a row.
	var before string
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&before); err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		for _, table := range []string{"cap_outbox", "cap_outbox_uuid", "cap_outbox_keys", "cap_outbox_int8", "cap_outbox_int4", "cap_outbox_nullable", "cap_stamp"} {
			cols, vals := common, fmt.Sprintf("'Sentinel', 'end-%d', 'End', '{}'", round)
			switch table {
			case "cap_outbox_uuid":
				cols, vals = "id, "+cols, "gen_random_uuid(), "+vals
			case "cap_outbox_keys":
				vals = "'Sentinel', gen_random_uuid(), 'End', '{}'"
			case "cap_outbox_int8", "cap_outbox_int4":
				vals = fmt.Sprintf("'Sentinel', %d, 'End', '{}'", 1000+round)
			}
			insert(table, "UTC", cols, vals)
		}
	}
	var lastCommit time.Time
	if err := conn.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&lastCommit); err != nil {
		t.Fatal(err)
	}

	var topics []string
	for _, c := range connectors {
		for _, at := range []string{"Key", "Header", "Value", "Tombstone", "Order", "Stamp", "Sentinel"} {
			topics = append(topics, c.Name+"."+at)
		}
	}
	if err := CreateTopics(ctx, broker.Addr(), capPartitions, topics...); err != nil {
		t.Fatal(err)
	}
	reader, err := NewReader(broker.Addr(), `^cap-.*`)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reader.Close)
	w, err := Start(WorkerOptions{Broker: broker.Addr(), Dir: os.Getenv("DEBEZIUMTEST_KEEP_DIR")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Connect log tail:\n%s", w.Output(80))
		}
		w.Close()
	})
	connectStart := w.Started()
	for _, c := range connectors {
		if err := w.AddConnector(ctx, c.Connector); err != nil {
			t.Fatal(err)
		}
	}
	failed := map[string]string{}
	deadline := time.Now().Add(capWait)
	for {
		done := true
		for _, c := range connectors {
			if failed[c.Name] != "" {
				continue
			}
			var past bool
			if err := conn.QueryRow(ctx, "SELECT coalesce(confirmed_flush_lsn > $2::pg_lsn, false) FROM pg_replication_slots WHERE slot_name = $1", c.Slot, before).Scan(&past); err != nil {
				t.Fatal(err)
			}
			if past {
				continue
			}
			if st, err := w.Status(ctx, c.Name); err == nil && st.Failure() != "" {
				failed[c.Name] = st.Failure()
				t.Logf("connector %s failed: %.600s", c.Name, st.Failure())
				continue
			}
			done = false
		}
		if done {
			break
		}
		select {
		case <-w.Done():
			t.Fatalf("Connect exited: %v", w.Err())
		default:
		}
		if time.Now().After(deadline) {
			rows, _ := conn.Query(ctx, "SELECT slot_name || ' ' || coalesce(confirmed_flush_lsn::text, '-') || ' ' || active FROM pg_replication_slots")
			slots, _ := pgx.CollectRows(rows, pgx.RowTo[string])
			t.Fatalf("not every connector confirmed its rows (past %s) within %s: %v", before, capWait, slots)
		}
		time.Sleep(200 * time.Millisecond) // polling interval
	}
	ends, err := EndOffsets(ctx, broker.Addr(), topics...)
	if err != nil {
		t.Fatal(err)
	}
	for !reader.CaughtUp(ends) {
		if time.Now().After(deadline) {
			t.Fatalf("the consumer did not read every record within %s", capWait)
		}
		time.Sleep(100 * time.Millisecond) // polling interval
	}
	recs := reader.Records()
	t.Logf("Connect started %s after the last commit; %d records", connectStart.Sub(lastCommit).Round(time.Millisecond), len(recs))

	// byConn[connector][id] is the record of row id.
	byConn := map[string]map[string]Record{}
	for _, r := range recs {
		name, at, _ := strings.Cut(r.Topic, ".")
		if at == "Sentinel" {
			continue
		}
		id, ok := r.Header("id")
		if !ok {
			t.Fatalf("record without an id header on %s: %+v", r.Topic, r)
		}
		if byConn[name] == nil {
			byConn[name] = map[string]Record{}
		}
		if _, dup := byConn[name][string(id)]; dup {
			t.Fatalf("%s wrote row %s twice", name, id)
		}
		byConn[name][string(id)] = r
	}
	hexOr := func(r Record, ok bool, b []byte) string {
		switch {
		case !ok:
			return "missing"
		case b == nil:
			return "null"
		}
		return hex.EncodeToString(b)
	}
	var got capture
	for i, k := range keyCases {
		id := keyIDs[i]
		s, okS := byConn["cap-string"][id]
		j, okJ := byConn["cap-json"][id]
		js, okJS := byConn["cap-json-schema"][id]
		got.keys = append(got.keys, KeyFixture{AggregateID: k, String: hexOr(s, okS, s.Key), JSON: hexOr(j, okJ, j.Key), JSONSchema: hexOr(js, okJS, js.Key), JSONText: string(j.Key)})
	}
	types := map[string]string{}
	for _, c := range headerColumns {
		types[c[0]] = c[1]
	}
	for i, h := range headerCases {
		r, ok := byConn["cap-string"][headerIDs[i]]
		f := HeaderFixture{Column: h.column, ColumnType: types[h.column], SQLValue: h.value, SessionTimezone: h.tz, Header: "missing",
			PGText: pgText[i], Typmod: typmod[i]}
		if ok {
			v, has := r.Header(h.column)
			switch {
			case !has:
				f.Header = "absent"
			case v == nil:
				f.Header = "null"
			default:
				f.Header, f.Text = hex.EncodeToString(v), string(v)
			}
		}
		got.headers = append(got.headers, f)
	}
	// The header of a NULL column, and the id header of both id types.
	if r, ok := byConn["cap-string"][keyIDs[0]]; ok {
		f := HeaderFixture{Column: "c_text", ColumnType: "text", SQLValue: "NULL", SessionTimezone: "UTC", Header: "absent"}
		if v, has := r.Header("c_text"); has && v == nil {
			f.Header = "null"
		} else if has {
			f.Header, f.Text = hex.EncodeToString(v), string(v)
		}
		got.headers = append(got.headers, f)
		v, _ := r.Header("id")
		got.headers = append(got.headers, HeaderFixture{Column: "id", ColumnType: "bigserial (header id)", SQLValue: "DEFAULT (" + keyIDs[0] + ")", SessionTimezone: "UTC", Header: hex.EncodeToString(v), Text: string(v)})
	}
	if r, ok := byConn["cap-uuid"][uuidID]; ok {
		v, _ := r.Header("id")
		got.headers = append(got.headers, HeaderFixture{Column: "id", ColumnType: "uuid (header id)", SQLValue: "'B1C2D3E4-F5A6-4B7C-8D9E-0F1A2B3C4D5E'", SessionTimezone: "UTC", Header: hex.EncodeToString(v), Text: string(v)})
	}
	for i, v := range valueCases {
		id := valueIDs[i]
		f := ValueFixture{Payload: v, JSONB: jsonbText[i]}
		r, ok := byConn["cap-json"][id]
		f.Value = hexOr(r, ok, r.Value)
		if ok {
			f.Text = string(r.Value)
		}
		// The three connectors share the value converter: say so if their
		// values differ.
		for _, other := range []string{"cap-string", "cap-json-schema"} {
			o, ook := byConn[other][id]
			if ook != ok || !bytes.Equal(o.Value, r.Value) {
				f.Note += fmt.Sprintf("%s wrote %s. ", other, hexOr(o, ook, o.Value))
			}
		}
		if !ok {
			f.Note += "Debezium wrote no record for this row. "
		} else if !json.Valid(r.Value) {
			f.Note += "not valid JSON. "
		}
		f.Note = strings.TrimSpace(f.Note)
		got.values = append(got.values, f)
	}
	// Whole records: timestamps, tombstones, header order.
	timestampRule := func(r Record) string {
		switch {
		case r.Timestamp.UnixMilli() == 1700000000123:
			return "1700000000123 (the column's value, epoch ms)"
		case r.Timestamp.After(connectStart.Add(-time.Second)) && r.Timestamp.After(lastCommit):
			return "processing time (after Connect started, which was after every commit)"
		}
		return "other: not the column, not processing time"
	}
	add := func(cs, id string) {
		var c capConnector
		for _, x := range connectors {
			if x.Name == cs {
				c = x
			}
		}
		r, ok := byConn[cs][id]
		f := RecordFixture{Case: rowOf[c.table+"/"+id], Connector: cs, Options: c.options, Row: id, Partitions: capPartitions}
		if !ok {
			f.Key, f.Value, f.Timestamp = "missing", "missing", "missing"
			f.Note = "no record"
			if failed[cs] != "" {
				f.Note = "the connector failed: " + firstLine(failed[cs])
			}
			got.records = append(got.records, f)
			return
		}
		f.Partition = r.Partition
		f.Key = hexOr(r, true, r.Key)
		f.Value = hexOr(r, true, r.Value)
		f.Timestamp = timestampRule(r)
		f.Headers = []RecordHeader{}
		for _, h := range r.Headers {
			v := string(h.Value)
			switch {
			case h.Null:
				v = "null"
			case h.Key == "__debezium.context.runId" && uuidRE.MatchString(v):
				v = "<a UUID, new each time the task starts>"
			}
			f.Headers = append(f.Headers, RecordHeader{Key: h.Key, Value: v})
		}
		got.records = append(got.records, f)
	}
	add("cap-string", keyIDs[0])
	add("cap-string", headerIDs[slices.IndexFunc(headerCases, func(h headerCase) bool { return h.column == "c_uuid" })])
	add("cap-json", keyIDs[0])
	add("cap-json-schema", keyIDs[0])
	add("cap-string", tombID)
	add("cap-json", tombID)
	add("cap-json-schema", tombID)
	add("cap-uuid", uuidID)
	add("cap-uuidkey-string", uuidKeyID)
	add("cap-uuidkey-json", uuidKeyID)
	add("cap-uuidkey-json-schema", uuidKeyID)
	add("cap-int8key-string", int8KeyID)
	add("cap-int8key-json", int8KeyID)
	add("cap-int8key-json-schema", int8KeyID)
	add("cap-int4key-json-schema", int4KeyID)
	add("cap-nullable-json-schema", nullableID)
	// table.field.event.timestamp naming a timestamptz column drops every
	// row, even one whose value is NULL ("Field 'c_timestamptz' is not of
	// type INT64"), so that connector never confirms and is not run here;
	// docs/DEBEZIUM-FORMAT.md records it.
	for _, cs := range []string{"cap-ts-bigint", "cap-ts-timestamp"} {
		for _, id := range stampIDs {
			add(cs, id)
		}
	}
	return got
}

// uuidRE matches a UUID in text form.
var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// firstLine is s up to its first line break.
func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}
