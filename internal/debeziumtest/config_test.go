package debeziumtest

import (
	"os"
	"strings"
	"testing"
	"time"
)

// TestVersionsMatchPom checks that scripts/debezium/pom.xml installs the
// Debezium and Connect versions this package looks for.
func TestVersionsMatchPom(t *testing.T) {
	b, err := os.ReadFile("../../scripts/debezium/pom.xml")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"<debezium.version>" + Version + "</debezium.version>",
		"<connect.version>" + ConnectVersion + "</connect.version>",
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("scripts/debezium/pom.xml lacks %s", want)
		}
	}
}

// TestApicurioConverterVersionMatchesPom checks that
// scripts/debezium/apicurio-converter.xml installs the converter version
// ApicurioConverterDir looks for, and classPath's order.
func TestApicurioConverterVersionMatchesPom(t *testing.T) {
	b, err := os.ReadFile("../../scripts/debezium/apicurio-converter.xml")
	if err != nil {
		t.Fatal(err)
	}
	if want := "<apicurio.converter.version>" + ApicurioConverterVersion + "</apicurio.converter.version>"; !strings.Contains(string(b), want) {
		t.Errorf("scripts/debezium/apicurio-converter.xml lacks %s", want)
	}
	if got, want := classPath("/a", []string{"/b"}), "/a/*:/b/*"; got != want {
		t.Errorf("classPath = %q, want %q", got, want)
	}
}

// TestConnectorProperties checks the defaults, each option's property and
// that Extra replaces or adds.
func TestConnectorProperties(t *testing.T) {
	c := Connector{Name: "c1", PGPort: 5432, Database: "db", KeyConverter: JSONSchemaConverter, ValueConverter: StringConverter,
		ExpandJSONPayload: true, TopicReplacement: "x.${routedByValue}", AdditionalPlacement: "c_uuid:header:u",
		EventTimestampField: "ts", TombstoneOnEmptyPayload: true,
		Extra: [][2]string{{"snapshot.mode", "never"}, {"poll.interval.ms", "10"}}}
	props, err := c.Properties()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, kv := range props {
		if _, dup := got[kv[0]]; dup {
			t.Errorf("property %s appears twice", kv[0])
		}
		got[kv[0]] = kv[1]
	}
	want := map[string]string{
		"topic.prefix":                                        "c1",
		"slot.name":                                           "debezium",
		"publication.name":                                    "dbz_publication",
		"publication.autocreate.mode":                         "filtered",
		"snapshot.mode":                                       "never",
		"poll.interval.ms":                                    "10",
		"table.include.list":                                  "public.outbox",
		"key.converter":                                       "org.apache.kafka.connect.json.JsonConverter",
		"key.converter.schemas.enable":                        "true",
		"value.converter":                                     "org.apache.kafka.connect.storage.StringConverter",
		"transforms.outbox.table.field.event.key":             "aggregate_id",
		"transforms.outbox.table.expand.json.payload":         "true",
		"transforms.outbox.route.topic.replacement":           "x.${routedByValue}",
		"transforms.outbox.table.fields.additional.placement": "c_uuid:header:u",
		"transforms.outbox.table.field.event.timestamp":       "ts",
		"transforms.outbox.route.tombstone.on.empty.payload":  "true",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if _, ok := got["value.converter.schemas.enable"]; ok {
		t.Error("StringConverter got a schemas.enable setting")
	}
	if _, err := (Connector{Name: "c", PGPort: 1, Database: "d", KeyConverter: "avro"}).Properties(); err == nil {
		t.Error("an unknown converter was accepted")
	}
}

// TestWorkerProperties checks the worker's defaults.
func TestWorkerProperties(t *testing.T) {
	props, err := WorkerOptions{Broker: "b:1", KeyConverter: StringConverter, OffsetFlushInterval: 250 * time.Millisecond}.workerProperties("/d", 8083)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, kv := range props {
		got[kv[0]] = kv[1]
	}
	want := map[string]string{
		"bootstrap.servers":              "b:1",
		"key.converter":                  "org.apache.kafka.connect.storage.StringConverter",
		"value.converter":                "org.apache.kafka.connect.json.JsonConverter",
		"value.converter.schemas.enable": "false",
		"offset.storage.file.filename":   "/d/offsets.dat",
		"offset.flush.interval.ms":       "250",
		"listeners":                      "http://127.0.0.1:8083",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if _, err := (WorkerOptions{}).workerProperties("/d", 1); err == nil {
		t.Error("a worker without a broker was accepted")
	}
}

// TestReadFixtures checks that the stored fixtures parse and hold what
// their users (the relay's unit tests) rely on.
func TestReadFixtures(t *testing.T) {
	f, err := ReadFixtures("../../" + FixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Keys) == 0 || len(f.Headers) == 0 || len(f.Values) == 0 || len(f.Records) == 0 {
		t.Fatalf("empty fixtures: %d keys, %d headers, %d values, %d records", len(f.Keys), len(f.Headers), len(f.Values), len(f.Records))
	}
	for _, k := range f.Keys {
		b, ok, err := Bytes(k.String)
		if err != nil || !ok || string(b) != k.AggregateID {
			t.Errorf("key %q: StringConverter bytes %q (%v, %v), want the id itself", k.AggregateID, b, ok, err)
		}
	}
}
