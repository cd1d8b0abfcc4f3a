package record

// The byte formats pinned against what a real Debezium 3.6.1 wrote
// (testdata/debezium, captured by internal/debeziumtest's TestCapture;
// docs/DEBEZIUM-FORMAT.md explains each form).

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cdc-relay/cdc-relay/catalog"
	"github.com/cdc-relay/cdc-relay/internal/debeziumjson"
	"github.com/cdc-relay/cdc-relay/internal/debeziumtest"
)

func fixtures(t *testing.T) *debeziumtest.Fixtures {
	t.Helper()
	f, err := debeziumtest.ReadFixtures("../" + debeziumtest.FixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Keys) == 0 || len(f.Values) == 0 || len(f.Records) == 0 {
		t.Fatalf("fixtures are empty: %d keys, %d values, %d records", len(f.Keys), len(f.Values), len(f.Records))
	}
	return f
}

func fixtureBytes(t *testing.T, field string) []byte {
	t.Helper()
	b, ok, err := debeziumtest.Bytes(field)
	if err != nil || !ok {
		t.Fatalf("fixture field %q: %v", field, err)
	}
	return b
}

// TestKeysMatchDebezium: every key format writes the bytes of the matching
// Kafka Connect converter for each captured aggregate id (text NOT NULL),
// and for a uuid and a nullable aggregate_id column.
func TestKeysMatchDebezium(t *testing.T) {
	f := fixtures(t)
	text := &catalog.Column{TypeOID: oidText, BaseOID: oidText, Type: "text", NotNull: true}
	for _, k := range f.Keys {
		for _, c := range []struct {
			format KeyFormat
			want   string
		}{{KeyString, k.String}, {KeyJSON, k.JSON}, {KeyJSONSchema, k.JSONSchema}} {
			got := newKeyEncoder(c.format, text).append(nil, []byte(k.AggregateID), nil)
			if want := fixtureBytes(t, c.want); string(got) != string(want) {
				t.Errorf("%s key of %q:\n got %q\nwant %q", c.format, k.AggregateID, got, want)
			}
		}
	}
	cols := map[string]*catalog.Column{
		"cap-uuidkey-string":       {TypeOID: oidUUID, BaseOID: oidUUID, Type: "uuid", NotNull: true},
		"cap-uuidkey-json":         {TypeOID: oidUUID, BaseOID: oidUUID, Type: "uuid", NotNull: true},
		"cap-uuidkey-json-schema":  {TypeOID: oidUUID, BaseOID: oidUUID, Type: "uuid", NotNull: true},
		"cap-nullable-json-schema": {TypeOID: oidText, BaseOID: oidText, Type: "text"},
	}
	formats := map[string]KeyFormat{"cap-uuidkey-string": KeyString, "cap-uuidkey-json": KeyJSON,
		"cap-uuidkey-json-schema": KeyJSONSchema, "cap-nullable-json-schema": KeyJSONSchema}
	seen := 0
	for _, r := range f.Records {
		col, ok := cols[r.Connector]
		if !ok {
			continue
		}
		seen++
		want := fixtureBytes(t, r.Key)
		// The aggregate id as pgoutput sends it: a uuid in lowercase.
		id := []byte(strings.ToLower(strings.Trim(r.Case[strings.Index(r.Case, "'")+1:], "'")))
		if col.BaseOID == oidText {
			id = []byte("o-1")
		}
		if got := newKeyEncoder(formats[r.Connector], col).append(nil, id, nil); string(got) != string(want) {
			t.Errorf("%s: got %q, want %q", r.Connector, got, want)
		}
	}
	if seen != len(cols) {
		t.Errorf("%d of the %d uuid and nullable key records found", seen, len(cols))
	}
}

// headerTypes maps the captured column types to their base type oids.
var headerTypes = map[string]uint32{
	"uuid": oidUUID, "smallint": oidInt2, "integer": oidInt4, "bigint": oidInt8,
	"timestamptz": oidTimestamptz, "timestamptz(3)": oidTimestamptz, "timestamptz(0)": oidTimestamptz,
	"timestamp": oidTimestamp, "timestamp(3)": oidTimestamp, "timestamp(0)": oidTimestamp,
	"text": oidText, "boolean": oidBool, "date": oidDate, "jsonb": oidJSONB, "json": oidJSON,
	"varchar(20)": oidVarchar, "char(5)": oidBpchar, "numeric(10,2)": oidNumeric,
	"bigserial (header id)": oidInt8, "uuid (header id)": oidUUID,
}

// TestHeadersMatchDebezium: every --header-columns conversion turns the
// text pgoutput sends (captured with the relay's DateStyle and TimeZone)
// and the column's type modifier into the header bytes Debezium wrote.
func TestHeadersMatchDebezium(t *testing.T) {
	f := fixtures(t)
	compared := 0
	for _, h := range f.Headers {
		oid, ok := headerTypes[h.ColumnType]
		if !ok {
			t.Errorf("captured column type %q has no oid in this test", h.ColumnType)
			continue
		}
		switch h.Header {
		case "null":
			if h.PGText != "" {
				t.Errorf("%s %s: Debezium wrote a null header for %q", h.ColumnType, h.SQLValue, h.PGText)
			}
			continue // a NULL column: Build writes a null header (TestBuildFormats)
		case "absent", "missing":
			continue
		}
		if h.PGText == "" && h.Text != "" {
			if strings.Contains(h.ColumnType, "header id") {
				continue // the id header: the id column's text, as is
			}
			t.Errorf("%s %s: no pgoutput text captured", h.ColumnType, h.SQLValue)
			continue
		}
		got, err := headerConverter(oid)(nil, []byte(h.PGText), h.Typmod)
		if want := fixtureBytes(t, h.Header); err != nil || string(got) != string(want) {
			t.Errorf("%s %s (written under %s, pgoutput %q): got %q, %v; want %q", h.ColumnType, h.SQLValue, h.SessionTimezone, h.PGText, got, err, want)
		}
		compared++
	}
	if compared < 30 {
		t.Errorf("only %d header values compared", compared)
	}
}

// debeziumValueDifferences are the captured payloads whose Debezium value
// the relay does not reproduce, and why: Connect ran on Java 17, whose
// Double.toString is not always the shortest form.
var debeziumValueDifferences = map[string]string{
	`{"f": 282879384806159000.0}`:       `{"f":2.82879384806159E17}`,
	`{"f": 100000000000000000000000.0}`: `{"f":1.0E23}`,
}

// TestValuesMatchDebezium: --value-format json writes the bytes Debezium's
// payload expansion wrote for every captured payload, except the documented
// differences and the payloads Debezium could not write at all.
func TestValuesMatchDebezium(t *testing.T) {
	f := fixtures(t)
	var v jsonValue
	matched := 0
	for _, fx := range f.Values {
		got, err := v.append(nil, []byte(fx.JSONB))
		if want, ok := debeziumValueDifferences[fx.JSONB]; ok {
			if err != nil || string(got) != want {
				t.Errorf("%s: relay wrote %q, %v; want Java 19+'s %s", fx.JSONB, got, err, want)
			}
			continue
		}
		switch fx.Value {
		case "missing":
			// Debezium's task fails on it (a number beyond int64, members of
			// different types, a top-level array): the relay writes the
			// object, or refuses a non-object.
			if strings.HasPrefix(fx.JSONB, "{") {
				if err != nil || !json.Valid(got) {
					t.Errorf("%s: relay wrote %q, %v; want valid JSON", fx.JSONB, got, err)
				}
			} else if err == nil {
				t.Errorf("%s: relay wrote %q for a payload that is not an object", fx.JSONB, got)
			}
			continue
		}
		if !strings.HasPrefix(fx.JSONB, "{") {
			// A top-level string: Debezium writes it as a JSON string; for
			// the relay it is not an object, an invalid event.
			if err == nil {
				t.Errorf("%s: relay wrote %q, want an error", fx.JSONB, got)
			}
			continue
		}
		want := fixtureBytes(t, fx.Value)
		if err != nil || string(got) != string(want) {
			t.Errorf("payload %s:\n got %s (%v)\nwant %s", fx.JSONB, got, err, want)
		}
		matched++
	}
	if matched < 30 {
		t.Errorf("only %d payloads compared byte for byte", matched)
	}
}

// FuzzJSONValue: the streaming path and debeziumjson's schema inference
// agree. Whatever JSON object the payload is, --value-format json writes
// the bytes debeziumjson.AppendPayload (pinned against Debezium) writes,
// except where Debezium cannot convert it; an input that is not a JSON
// object is an error for both.
func FuzzJSONValue(f *testing.F) {
	fx, err := debeziumtest.ReadFixtures("../" + debeziumtest.FixtureDir)
	if err != nil {
		f.Fatal(err)
	}
	for _, v := range fx.Values {
		f.Add([]byte(v.JSONB))
	}
	f.Add([]byte(`{"items": [{"sku": "a", "q": 1}, {"sku": "b", "q": 2}], "n": null}`))
	f.Add([]byte("{\"s\":\"\xa8\"}")) // not UTF-8
	f.Add([]byte(`{"n": 007}`))
	f.Add([]byte(`{"n": 0x1.8p1, "s": "\ud800"}`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		var v jsonValue
		got, err := v.append(nil, payload)
		// Whatever the payload, the relay writes JSON or nothing, and only
		// for a payload that is JSON.
		if err == nil && (!json.Valid(payload) || !json.Valid(got)) {
			t.Fatalf("%q: the relay wrote %q", payload, got)
		}
		if duplicateKeys(payload) {
			return // jsonb never sends them; Jackson and jsonb keep the last, neither writer does
		}
		if !utf8.Valid(payload) {
			// Jackson would write U+FFFD; the relay refuses text that is not
			// UTF-8 (a dead letter), as its Avro encoder does.
			if err == nil && !json.Valid(got) {
				t.Fatalf("%q: the relay wrote %q", payload, got)
			}
			return
		}
		want, werr := debeziumjson.AppendPayload(nil, payload)
		switch {
		case errors.Is(werr, debeziumjson.ErrUnconvertible) || (werr == nil && !json.Valid(want)):
			if err != nil || !json.Valid(got) {
				t.Fatalf("%q: Debezium cannot convert it (or writes no JSON: %q); the relay wrote %q, %v", payload, want, got, err)
			}
		case werr != nil:
			if err == nil && json.Valid(payload) && strings.HasPrefix(strings.TrimLeft(string(payload), " \t\r\n"), "{") {
				t.Fatalf("%q: debeziumjson refused it (%v), the relay wrote %q", payload, werr, got)
			}
		case err != nil:
			t.Fatalf("%q: debeziumjson wrote %q, the relay failed: %v", payload, want, err)
		case string(got) != string(want):
			t.Fatalf("%q:\nrelay %q\n want %q", payload, got, want)
		}
	})
}

// duplicateKeys reports whether an object in the JSON text repeats a member
// name.
func duplicateKeys(b []byte) bool {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	var stack []map[string]bool
	expectKey := []bool{}
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				stack = append(stack, map[string]bool{})
				expectKey = append(expectKey, true)
				continue
			case '[':
				stack = append(stack, nil)
				expectKey = append(expectKey, false)
				continue
			default:
				stack, expectKey = stack[:len(stack)-1], expectKey[:len(expectKey)-1]
			}
		case string:
			if n := len(stack); n > 0 && stack[n-1] != nil && expectKey[n-1] {
				if stack[n-1][t] {
					return true
				}
				stack[n-1][t] = true
				expectKey[n-1] = false
				continue
			}
		}
		if n := len(stack); n > 0 && stack[n-1] != nil {
			expectKey[n-1] = true // a value ended: a key comes next
		}
	}
}
