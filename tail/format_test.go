package tail

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"

	recordpkg "github.com/cdc-relay/cdc-relay/record"
	"github.com/cdc-relay/cdc-relay/schemaregistry"
)

// tailMembers are the members of a tail line, in their order.
var tailMembers = []string{"topic", "partition", "offset", "timestamp", "key", "headers", "value", "schema_id", "subject"}

// members decodes a tail line into its members, checking their order.
func members(t *testing.T, line []byte) map[string]json.RawMessage {
	t.Helper()
	if !bytes.HasSuffix(line, []byte("}\n")) || bytes.Count(line, []byte("\n")) != 1 {
		t.Fatalf("not one line: %q", line)
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %q", line)
	}
	got := map[string]json.RawMessage{}
	var order []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		order = append(order, tok.(string))
		got[tok.(string)] = v
	}
	if strings.Join(order, ",") != strings.Join(tailMembers, ",") {
		t.Fatalf("members %v, want %v", order, tailMembers)
	}
	return got
}

// TestTailFormat: the rules a record's key, value and headers are printed
// by, with a registry faked by a lookup function and the Avro body written
// by hamba/avro (not the relay's encoder).
func TestTailFormat(t *testing.T) {
	const schemaText = `{"type":"record","name":"Paid","namespace":"shop","fields":[{"name":"amount","type":"long"},{"name":"note","type":["null","string"]},{"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}}]}`
	schema := avro.MustParse(schemaText)
	at := time.Date(2026, 12, 1, 10, 30, 0, 0, time.UTC)
	body, err := avro.Marshal(schema, map[string]any{"amount": int64(1250), "note": "gift", "at": at})
	if err != nil {
		t.Fatal(err)
	}
	frame := func(id uint32, body []byte) []byte {
		return append(binary.BigEndian.AppendUint32([]byte{0}, id), body...)
	}
	lookups := map[int]int{}
	lookup := func(_ context.Context, id int) (*schemaregistry.WriterSchema, error) {
		lookups[id]++
		switch id {
		case 7:
			return schemaregistry.ParseWriterSchema(7, "", schemaText, []string{"orders-shop.Paid", "other-shop.Paid"})
		case 8:
			return schemaregistry.ParseWriterSchema(8, "JSON", `{"type":"object"}`, []string{"orders-value"})
		case 9:
			return schemaregistry.ParseWriterSchema(9, "PROTOBUF", `syntax = "proto3";`, nil)
		case 500:
			return nil, errors.New("HTTP 500")
		}
		return nil, fmt.Errorf("schema id %d: %w", id, schemaregistry.ErrSchemaNotFound)
	}
	ts := time.Date(2026, 12, 2, 1, 2, 3, 45e6, time.FixedZone("x", 3600))
	tests := []struct {
		name      string
		keyFormat recordpkg.KeyFormat
		key       []byte
		value     []byte
		headers   []kgo.RecordHeader
		want      map[string]string // member → its JSON
	}{
		{name: "avro value", key: []byte("order-1"), value: frame(7, body),
			want: map[string]string{"key": `"order-1"`, "value": `{"amount":1250,"note":"gift","at":"2026-12-01T10:30:00Z"}`, "schema_id": "7", "subject": `"orders-shop.Paid"`}},
		{name: "json value compacted", key: []byte("k"), value: []byte("{ \"a\" : [1, 2],\n \"b\": null }"),
			want: map[string]string{"value": `{"a":[1,2],"b":null}`, "schema_id": "null", "subject": "null"}},
		{name: "text value", value: []byte("plain text, not JSON"),
			want: map[string]string{"key": "null", "value": `"plain text, not JSON"`}},
		{name: "binary value", value: []byte{0xff, 0x00, 0x01},
			want: map[string]string{"value": `{"base64":"/wAB"}`}},
		{name: "null value", key: []byte("k"), value: nil, want: map[string]string{"value": "null", "schema_id": "null"}},
		{name: "empty value", value: []byte{}, want: map[string]string{"value": `""`}},
		{name: "string key that reads as JSON", key: []byte("42"), value: []byte("{}"), want: map[string]string{"key": `"42"`}},
		{name: "json key", keyFormat: recordpkg.KeyJSON, key: []byte(`"order-1"`), value: []byte("{}"), want: map[string]string{"key": `"order-1"`}},
		{name: "json key number", keyFormat: recordpkg.KeyJSON, key: []byte(`42`), value: []byte("{}"), want: map[string]string{"key": `42`}},
		{name: "avro key", keyFormat: recordpkg.KeyAvro, key: frame(7, body), value: []byte("{}"),
			want: map[string]string{"key": `{"amount":1250,"note":"gift","at":"2026-12-01T10:30:00Z"}`, "schema_id": "null"}},
		{name: "unknown id", value: frame(99, []byte{1, 2}),
			want: map[string]string{"value": `{"base64":"AAAAAGMBAg=="}`, "schema_id": "99", "subject": "null"}},
		{name: "undecodable body", value: frame(7, []byte{2}),
			want: map[string]string{"value": `{"base64":"AAAAAAcC"}`, "schema_id": "7", "subject": `"orders-shop.Paid"`}},
		{name: "json schema", value: frame(8, []byte(`{"x": 1}`)),
			want: map[string]string{"value": `{"x":1}`, "schema_id": "8", "subject": `"orders-value"`}},
		{name: "protobuf schema", value: frame(9, []byte{8, 1}),
			want: map[string]string{"value": `{"base64":"AAAAAAkIAQ=="}`, "schema_id": "9"}},
		{name: "headers", value: []byte("{}"), headers: []kgo.RecordHeader{
			{Key: "id", Value: []byte("17")}, {Key: "tag", Value: []byte("a")}, {Key: "bin", Value: []byte{0xff}},
			{Key: "tag", Value: []byte("b")}, {Key: "gone", Value: nil}, {Key: "tag", Value: nil}},
			want: map[string]string{"headers": `{"id":"17","tag":["a","b",null],"bin":{"base64":"/w=="},"gone":null}`}},
		{name: "no headers", value: []byte("{}"), want: map[string]string{"headers": "{}"}},
	}
	var logs bytes.Buffer
	f := newTailFormatter(recordpkg.KeyString, lookup, slog.New(slog.NewTextHandler(&logs, nil)))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f.keyFormat = tc.keyFormat
			r := &kgo.Record{Topic: "orders", Partition: 2, Offset: 41, Timestamp: ts, Key: tc.key, Value: tc.value, Headers: tc.headers}
			line, err := f.appendLine(context.Background(), nil, r, false)
			if err != nil {
				t.Fatal(err)
			}
			got := members(t, line)
			base := map[string]string{"topic": `"orders"`, "partition": "2", "offset": "41", "timestamp": `"2026-12-02T00:02:03.045Z"`}
			for k, w := range base {
				if string(got[k]) != w {
					t.Errorf("%s = %s, want %s", k, got[k], w)
				}
			}
			for k, w := range tc.want {
				if string(got[k]) != w {
					t.Errorf("%s = %s, want %s", k, got[k], w)
				}
			}
		})
	}
	if lookups[7] != 1 || lookups[99] != 1 {
		t.Errorf("lookups %v: each id must be fetched once", lookups)
	}
	for _, want := range []string{"schema_id=99", "does not decode", "schema_type=PROTOBUF"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("no warning with %q in %s", want, logs.String())
		}
	}

	// A registry that fails is an error, not a base64 value.
	if _, err := f.appendLine(context.Background(), nil, &kgo.Record{Topic: "orders", Value: frame(500, body)}, false); err == nil || !strings.Contains(err.Error(), "fetch schema id 500") {
		t.Errorf("registry failure: %v", err)
	}
	// No registry: framed values are base64 with their id, and a warning.
	logs.Reset()
	nf := newTailFormatter(recordpkg.KeyString, nil, slog.New(slog.NewTextHandler(&logs, nil)))
	line, err := nf.appendLine(context.Background(), nil, &kgo.Record{Topic: "orders", Value: frame(7, body)}, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := members(t, line); string(got["schema_id"]) != "7" || !strings.HasPrefix(string(got["value"]), `{"base64":`) || !strings.Contains(logs.String(), "--schema-registry-url") {
		t.Errorf("without a registry: %s; log %s", line, logs.String())
	}

	// --pretty: a line naming the record, the key, one line per header, the value indented.
	r := &kgo.Record{Topic: "orders", Partition: 1, Offset: 5, Timestamp: ts, Key: []byte("order-1"), Value: frame(7, body),
		Headers: []kgo.RecordHeader{{Key: "id", Value: []byte("17")}, {Key: "id", Value: []byte("18")}}}
	pretty, err := f.appendLine(context.Background(), nil, r, true)
	if err != nil {
		t.Fatal(err)
	}
	want := "orders partition 1 offset 5  2026-12-02T00:02:03.045Z  schema 7 (orders-shop.Paid)\n" +
		"key: \"order-1\"\nheaders:\n  id: [\"17\",\"18\"]\nvalue: {\n  \"amount\": 1250,\n  \"note\": \"gift\",\n  \"at\": \"2026-12-01T10:30:00Z\"\n}\n\n"
	if string(pretty) != want {
		t.Errorf("--pretty:\n%s\nwant:\n%s", pretty, want)
	}
}

// TestTailSubjectOfTopic: the subject printed is one of the record's topic
// the id is registered under (<topic>-value, <topic>-<record>, <record>);
// an id registered only under other topics' subjects (or a key's) prints
// null, never a subject of another topic.
func TestTailSubjectOfTopic(t *testing.T) {
	const schemaText = `{"type":"record","name":"Paid","namespace":"shop","fields":[{"name":"amount","type":"long"}]}`
	body, err := avro.Marshal(avro.MustParse(schemaText), map[string]any{"amount": int64(5)})
	if err != nil {
		t.Fatal(err)
	}
	subjects := map[int][]string{
		7:  {"orders-shop.Paid", "payments-value"},
		10: {"payments-shop.Paid", "orders-eu-value", "orders-key", "other-value"},
		11: {"shop.Paid", "refunds-value"},
	}
	lookup := func(_ context.Context, id int) (*schemaregistry.WriterSchema, error) {
		return schemaregistry.ParseWriterSchema(id, "", schemaText, subjects[id])
	}
	f := newTailFormatter(recordpkg.KeyString, lookup, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, tc := range []struct {
		id    uint32
		topic string
		want  string // the subject member
	}{
		{7, "orders", `"orders-shop.Paid"`},
		{7, "payments", `"payments-value"`},
		{7, "refunds", "null"},
		{7, "orders-shop.Paid", "null"},
		{10, "orders", "null"},
		{10, "orders-eu", `"orders-eu-value"`},
		{10, "payments", `"payments-shop.Paid"`},
		{10, "other", `"other-value"`},
		{11, "orders", `"shop.Paid"`},
		{11, "refunds", `"refunds-value"`},
	} {
		r := &kgo.Record{Topic: tc.topic, Value: append(binary.BigEndian.AppendUint32([]byte{0}, tc.id), body...)}
		line, err := f.appendLine(context.Background(), nil, r, false)
		if err != nil {
			t.Fatal(err)
		}
		got := members(t, line)
		if string(got["subject"]) != tc.want || string(got["schema_id"]) != fmt.Sprint(tc.id) || string(got["value"]) != `{"amount":5}` {
			t.Errorf("id %d on %s: schema_id %s, subject %s, value %s; want subject %s", tc.id, tc.topic, got["schema_id"], got["subject"], got["value"], tc.want)
		}
		pretty, err := f.appendLine(context.Background(), nil, r, true)
		if err != nil {
			t.Fatal(err)
		}
		head, _, _ := strings.Cut(string(pretty), "\n")
		wantHead := fmt.Sprintf("schema %d", tc.id)
		if tc.want != "null" {
			wantHead += " (" + strings.Trim(tc.want, `"`) + ")"
		}
		if !strings.HasSuffix(head, wantHead) {
			t.Errorf("id %d on %s, --pretty: %q, want it to end with %q", tc.id, tc.topic, head, wantHead)
		}
	}
}
