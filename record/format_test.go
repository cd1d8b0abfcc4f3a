package record

import (
	"strings"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/catalog"
	"github.com/cdc-relay/cdc-relay/router"
)

func TestKeyFormats(t *testing.T) {
	text := &catalog.Column{TypeOID: oidText, BaseOID: oidText, Type: "text", NotNull: true}
	nullable := &catalog.Column{TypeOID: oidText, BaseOID: oidText, Type: "text"}
	uuid := &catalog.Column{TypeOID: oidUUID, BaseOID: oidUUID, Type: "uuid", NotNull: true}
	bigint := &catalog.Column{TypeOID: oidInt8, BaseOID: oidInt8, Type: "bigint", NotNull: true}
	avroHeader := &[5]byte{0, 0, 0, 1, 2}
	tests := []struct {
		name   string
		format KeyFormat
		col    *catalog.Column
		id     string
		want   string
	}{
		{"string", KeyString, text, "order-1", "order-1"},
		{"json", KeyJSON, text, "order-1", `"order-1"`},
		{"json escapes", KeyJSON, text, "a\"b\\c\n\t\x01\x1f\x7f/<>&\u2028é", `"a\"b\\c\n\t\u0001\u001F` + "\x7f/<>&\u2028é\""},
		{"json outside the BMP", KeyJSON, text, "emoji-🚀-😀", `"emoji-\uD83D\uDE80-\uD83D\uDE00"`},
		{"json integer", KeyJSON, bigint, "42", `42`},
		{"json-schema text", KeyJSONSchema, text, "o-1", `{"schema":{"type":"string","optional":false},"payload":"o-1"}`},
		{"json-schema nullable", KeyJSONSchema, nullable, "o-1", `{"schema":{"type":"string","optional":true},"payload":"o-1"}`},
		{"json-schema uuid", KeyJSONSchema, uuid, "5d9e1d7a-6b1f-4c4e-9a57-1f0e0a3c2b11",
			`{"schema":{"type":"string","optional":false,"name":"io.debezium.data.Uuid","version":1},"payload":"5d9e1d7a-6b1f-4c4e-9a57-1f0e0a3c2b11"}`},
		{"json-schema bigint", KeyJSONSchema, bigint, "-7", `{"schema":{"type":"int64","optional":false},"payload":-7}`},
		{"json-schema unknown column", KeyJSONSchema, nil, "x", `{"schema":{"type":"string","optional":false},"payload":"x"}`},
		// Avro: the wire-format header, the zig-zag varint length (3 → 6), the bytes.
		{"avro", KeyAvro, text, "abc", "\x00\x00\x00\x01\x02\x06abc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := newKeyEncoder(tt.format, tt.col).append(nil, []byte(tt.id), avroHeader)
			if string(got) != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseFormats(t *testing.T) {
	for _, s := range []string{"string", "json", "json-schema", "avro"} {
		f, err := ParseKeyFormat(s)
		if err != nil || f.String() != s {
			t.Errorf("ParseKeyFormat(%q) = %v, %v", s, f, err)
		}
	}
	if _, err := ParseKeyFormat("protobuf"); err == nil || !strings.Contains(err.Error(), "string, json, json-schema or avro") {
		t.Errorf("ParseKeyFormat(protobuf) = %v", err)
	}
	if _, err := ParseValueFormat("xml"); err == nil || !strings.Contains(err.Error(), "avro or json") {
		t.Errorf("ParseValueFormat(xml) = %v", err)
	}
	hc, err := ParseHeaderColumns(" tenant , created_at:ts ", router.AllBuiltin)
	if err != nil || len(hc) != 2 || hc[0] != (HeaderColumn{"tenant", "tenant"}) || hc[1] != (HeaderColumn{"created_at", "ts"}) {
		t.Errorf("ParseHeaderColumns = %v, %v", hc, err)
	}
	for _, bad := range []string{"a,a", "a:x,b:x", "id", ":x", "col:event_type"} {
		if _, err := ParseHeaderColumns(bad, router.AllBuiltin); err == nil {
			t.Errorf("ParseHeaderColumns(%q) accepted", bad)
		}
	}
	if hc, err := ParseHeaderColumns("id", router.BuiltinEventType); err != nil || hc[0].Header != "id" {
		t.Errorf("id as a header column without the builtin id: %v, %v", hc, err)
	}
}

func TestParseTimestamp(t *testing.T) {
	tests := []struct {
		in     string
		zoned  bool
		want   time.Time
		errSub string
	}{
		{"2026-12-01 06:11:25.123456+00", true, time.Date(2026, 12, 1, 6, 11, 25, 123456000, time.UTC), ""},
		{"2026-12-01 06:11:25+00", true, time.Date(2026, 12, 1, 6, 11, 25, 0, time.UTC), ""},
		{"2026-12-01 09:11:25.5+03", true, time.Date(2026, 12, 1, 6, 11, 25, 5e8, time.UTC), ""},
		{"2026-12-01 00:41:25-05:30", true, time.Date(2026, 12, 1, 6, 11, 25, 0, time.UTC), ""},
		{"1890-01-01 00:00:00+02:30:17", true, time.Date(1889, 12, 31, 21, 29, 43, 0, time.UTC), ""},
		{"2024-02-29 23:59:59.999999", false, time.Date(2024, 2, 29, 23, 59, 59, 999999000, time.UTC), ""},
		{"12024-01-01 00:00:00", false, time.Date(12024, 1, 1, 0, 0, 0, 0, time.UTC), ""},
		{"1969-12-31 23:59:59.9", false, time.Date(1969, 12, 31, 23, 59, 59, 9e8, time.UTC), ""},
		{"infinity", true, time.Time{}, "infinity"},
		{"-infinity", false, time.Time{}, "infinity"},
		{"0044-03-15 12:00:00+00 BC", true, time.Time{}, "not a timestamp"},
		{"2023-02-29 00:00:00", false, time.Time{}, "not a timestamp"},
		{"2026-12-01 06:11:25", true, time.Time{}, "not a timestamp"}, // no offset
		{"2026-12-01T06:11:25Z", true, time.Time{}, "not a timestamp"},
	}
	for _, tt := range tests {
		got, err := parseTimestamp([]byte(tt.in), tt.zoned)
		if tt.errSub != "" {
			if err == nil || !strings.Contains(err.Error(), tt.errSub) {
				t.Errorf("parseTimestamp(%q) = %v, %v; want an error with %q", tt.in, got.Time(), err, tt.errSub)
			}
			continue
		}
		if err != nil || !got.Time().Equal(tt.want) {
			t.Errorf("parseTimestamp(%q) = %v, %v; want %v", tt.in, got.Time(), err, tt.want)
		}
	}
}

func TestHeaderConverters(t *testing.T) {
	tests := []struct {
		oid    uint32
		typmod int32
		in     string
		want   string
	}{
		{oidUUID, -1, "5d9e1d7a-6b1f-4c4e-9a57-1f0e0a3c2b11", "5d9e1d7a-6b1f-4c4e-9a57-1f0e0a3c2b11"},
		{oidInt8, -1, "-9223372036854775808", "-9223372036854775808"},
		{oidInt2, -1, "7", "7"},
		{oidText, -1, "plain text", "plain text"},
		{oidBool, -1, "t", "true"},
		{oidBool, -1, "f", "false"},
		{oidTimestamptz, -1, "2026-12-01 06:11:25.123456+00", "2026-12-01T06:11:25.123456Z"},
		{oidTimestamptz, -1, "2026-12-01 06:11:25.12+00", "2026-12-01T06:11:25.120000Z"},
		{oidTimestamptz, -1, "2026-12-01 09:11:00+03", "2026-12-01T06:11:00.000000Z"},
		{oidTimestamptz, 3, "2026-12-01 06:11:25.5+00", "2026-12-01T06:11:25.500Z"},
		{oidTimestamptz, 0, "2026-12-01 06:11:25+00", "2026-12-01T06:11:25Z"},
		{oidTimestamptz, -1, "1969-12-31 23:59:59.999999+00", "1969-12-31T23:59:59.999999Z"},
		{oidTimestamp, -1, "2026-12-01 06:11:25.123456", "1796105485123456"},
		{oidTimestamp, 6, "1969-12-31 23:59:59.999999", "-1"},
		{oidTimestamp, 3, "2024-03-05 06:07:08.123", "1709618828123"},
		{oidTimestamp, 0, "2024-03-05 06:07:08", "1709618828000"},
		{oidTimestamp, -1, "1970-01-01 00:00:00", "0"},
		{oidDate, -1, "2026-12-01", "20788"},
	}
	for _, tt := range tests {
		conv := headerConverter(tt.oid)
		if conv == nil {
			t.Fatalf("no converter for oid %d", tt.oid)
		}
		got, err := conv(nil, []byte(tt.in), tt.typmod)
		if err != nil || string(got) != tt.want {
			t.Errorf("oid %d(%d) %q = %q, %v; want %q", tt.oid, tt.typmod, tt.in, got, err, tt.want)
		}
	}
	if headerConverter(1186) != nil { // interval
		t.Error("interval has a header converter")
	}
}

func TestJSONValue(t *testing.T) {
	var v jsonValue
	tests := []struct{ in, want, errSub string }{
		{`{"a": 1, "b": [1, 2], "c": {"d": "x y"}, "d": null}`, `{"a":1,"b":[1,2],"c":{"d":"x y"}}`, ""},
		// Arrays Debezium's schema inference reshapes: objects get the
		// union of their members; mixed types fall back to the text.
		{`{"objs": [{"a": 1}, {"b": "x"}]}`, `{"objs":[{"a":1,"b":null},{"a":null,"b":"x"}]}`, ""},
		{`{"mixed": [1, "a"]}`, `"{\"mixed\": [1, \"a\"]}"`, ""},
		// Where Debezium fails the record, the relay writes it as it is.
		{`{"n": 92233720368547758070, "x": null}`, `{"n":92233720368547758070}`, ""},
		{`  {"s": "a\"b \u00e9 \n \u0001 🚀"}  `, `{"s":"a\"b é \n \u0001 \uD83D\uDE80"}`, ""},
		{`{}`, `{}`, ""},
		// Debezium leaves out null members and empty arrays at every
		// depth, keeps nulls inside arrays and empty objects.
		{`{"nul": null, "x": 1, "nested": {"nul": null}, "empty": [], "a": [1, null], "o": {}}`, `{"x":1,"nested":{},"a":[1,null],"o":{}}`, ""},
		{`{"first": null, "second": 2}`, `{"second":2}`, ""},
		// Numbers: integers as they are, others as Java's Double.toString.
		{`{"a": 1.5, "b": 1.0, "c": 100.0, "d": 0.1, "e": 0.001, "f": 1.50, "g": 0.0, "h": 10000000.0, "i": 12345678.5, "j": 0.0001, "k": 0.00000015, "l": 123456789012.25, "m": 9007199254740993, "n": -42, "o": 3.141592653589793238, "p": 9999999.5}`,
			`{"a":1.5,"b":1.0,"c":100.0,"d":0.1,"e":0.001,"f":1.5,"g":0.0,"h":1.0E7,"i":1.23456785E7,"j":1.0E-4,"k":1.5E-7,"l":1.2345678901225E11,"m":9007199254740993,"n":-42,"o":3.141592653589793,"p":9999999.5}`, ""},
		{`[1, 2]`, "", "not a JSON object"},
		{`"text"`, "", "not a JSON object"},
		{`{"a": }`, "", "not valid JSON"},
		{`{"a": 1} x`, "", "not valid JSON"},
		{`{"a": tru}`, "", "not valid JSON"},
		{`{"a": "\x"}`, "", "not valid JSON"},
		// What RFC 8259 refuses, the writer refuses: nothing is passed on
		// as it is, nor read as Go's parsers would.
		{`{"n": 007}`, "", "payload is not valid JSON: leading zero in number at offset 6"},
		{`{"n": 0x1.8p1}`, "", "payload is not valid JSON: invalid character 'x'"},
		{`{"n": 1_000}`, "", "payload is not valid JSON: invalid character '_'"},
		{`{"n": NaN}`, "", "not valid JSON"},
		{`{"n": -Infinity}`, "", "not valid JSON"},
		{`{"n": +1}`, "", "not valid JSON"},
		{`{"n": .5}`, "", "not valid JSON"},
		{`{"a": [1, 2,]}`, "", "not valid JSON"},
		{`{"a": 1,}`, "", "not valid JSON"},
		{`{'a': 1}`, "", "not valid JSON"},
		{"{\"s\": \"a\tb\"}", "", "control character in string"},
		{`{"s": "\ud800"}`, "", `unpaired \u surrogate`},
		{"{\"s\": \"\xff\"}", "", "invalid UTF-8"},
		{"{\"\xff\": 1}", "", "invalid UTF-8"},
		{`{"a": nullx}`, "", "not valid JSON"},
		{`{"a": [{"b": 1}, {"c": 01}]}`, "", "leading zero"}, // the schema-inference path
		{`{"a": [1, "x", 01]}`, "", "leading zero"},
		{`{"a": 1}{}`, "", "after the value"},
	}
	for _, tt := range tests {
		got, err := v.append([]byte("prefix:"), []byte(tt.in))
		if tt.errSub != "" {
			if err == nil || !strings.Contains(err.Error(), tt.errSub) || string(got) != "prefix:" {
				t.Errorf("%s: got %q, %v; want error %q and dst unchanged", tt.in, got, err, tt.errSub)
			}
			continue
		}
		if err != nil || string(got) != "prefix:"+tt.want {
			t.Errorf("%s:\n got %s, %v\nwant %s", tt.in, got, err, tt.want)
		}
	}
}

// BenchmarkJSONValue measures --value-format json on the order payload of
// the drain benchmark's size, once with its line items (an array of
// objects: Debezium's schema inference, debeziumjson) and once without
// (the streaming path).
func BenchmarkJSONValue(b *testing.B) {
	agg := "7c4f7d6e-2f55-4c4e-9f4e-0d9b8a3c1e21"
	for name, payload := range map[string]string{
		"items":    orderCreated(agg, 1),
		"no-items": `{"order_id": "` + agg + `", "customer_id": "c-1", "status": "PENDING", "amount_cents": 1999, "currency": "EUR", "coupon_code": null, "created_at": 1700000000000}`,
	} {
		b.Run(name, func(b *testing.B) {
			var v jsonValue
			buf := make([]byte, 0, 1024)
			b.SetBytes(int64(len(payload)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.append(buf[:0], []byte(payload)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
