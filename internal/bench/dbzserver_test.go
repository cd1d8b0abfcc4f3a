package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

// TestDebeziumServerProperties checks the application.properties Debezium
// Server runs with: the rabbitmq sink on the bench's exchange with the
// node's connection, the connector's settings under debezium.source., the
// EventRouter under debezium.transforms. routed by event_type, no Connect
// name or converter classes, and overrides replacing or extending.
func TestDebeziumServerProperties(t *testing.T) {
	props, err := debeziumServerProperties("slot_x", 5433, "benchdb", "amqp://guest:secret@127.0.0.1:5679/", "/tmp/o.dat", 8081,
		[][2]string{{"debezium.source.max.batch.size", "4096"}, {"debezium.sink.rabbitmq.ackTimeout", "5000"}, {"quarkus.log.level", "WARN"}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, kv := range props {
		if _, dup := got[kv[0]]; dup {
			t.Errorf("%s given twice", kv[0])
		}
		got[kv[0]] = kv[1]
	}
	want := map[string]string{
		"debezium.sink.type":                              "rabbitmq",
		"debezium.sink.rabbitmq.exchange":                 rabbitExchange,
		"debezium.sink.rabbitmq.routingKey.source":        "topic",
		"debezium.sink.rabbitmq.deliveryMode":             "2",
		"debezium.sink.rabbitmq.ackTimeout":               "5000",
		"debezium.sink.rabbitmq.connection.host":          "127.0.0.1",
		"debezium.sink.rabbitmq.connection.port":          "5679",
		"debezium.sink.rabbitmq.connection.username":      "guest",
		"debezium.sink.rabbitmq.connection.password":      "secret",
		"debezium.sink.rabbitmq.connection.virtual.host":  "/",
		"debezium.source.connector.class":                 "io.debezium.connector.postgresql.PostgresConnector",
		"debezium.source.database.port":                   "5433",
		"debezium.source.database.dbname":                 "benchdb",
		"debezium.source.slot.name":                       "slot_x",
		"debezium.source.publication.name":                publication,
		"debezium.source.publication.autocreate.mode":     "disabled",
		"debezium.source.snapshot.mode":                   "no_data",
		"debezium.source.offset.storage.file.filename":    "/tmp/o.dat",
		"debezium.source.offset.flush.interval.ms":        "1000",
		"debezium.source.max.batch.size":                  "4096",
		"debezium.source.max.queue.size":                  "8192",
		"debezium.source.poll.interval.ms":                "10",
		"debezium.transforms":                             "outbox",
		"debezium.transforms.outbox.type":                 "io.debezium.transforms.outbox.EventRouter",
		"debezium.transforms.outbox.table.field.event.id": "id",
		"debezium.transforms.outbox.route.by.field":       "event_type",
		"debezium.format.value":                           "json",
		"debezium.format.value.schemas.enable":            "false",
		"debezium.format.header.schemas.enable":           "false",
		"quarkus.http.port":                               "8081",
		"quarkus.log.level":                               "WARN",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	for k := range got {
		if k == "debezium.source.name" || k == "debezium.source.tasks.max" || strings.Contains(k, "converter") ||
			!(strings.HasPrefix(k, "debezium.") || strings.HasPrefix(k, "quarkus.")) {
			t.Errorf("unexpected property %s", k)
		}
	}
	settings := debeziumServerSettings(props)
	for _, s := range settings {
		if strings.Contains(s, "secret") || strings.Contains(s, "/tmp/o.dat") || strings.Contains(s, "5433") {
			t.Errorf("reported setting %q names the connection, the database or the offsets file", s)
		}
	}
	if !slices.Contains(settings, "debezium.source.max.batch.size=4096") {
		t.Errorf("settings %v leave out the batch size", settings)
	}
	if _, err := debeziumServerProperties("s", 1, "d", "amqp://127.0.0.1/", "o", 1, nil); err == nil {
		t.Error("an AMQP URL without a port was accepted")
	}
}

// TestHeaderID reads the id header as the JSON header converter writes it,
// as bytes or a string, a number or a quoted string, and nothing without
// one.
func TestHeaderID(t *testing.T) {
	tests := []struct {
		in   any
		want string
	}{
		{[]byte("1234"), "1234"},
		{"1234", "1234"},
		{[]byte(`"0b9c0e6e-1f40-4d4b-a2b8-3c43b2c1c2a1"`), "0b9c0e6e-1f40-4d4b-a2b8-3c43b2c1c2a1"},
		{int64(7), ""},
		{nil, ""},
	}
	for _, tt := range tests {
		d := amqp.Delivery{Headers: amqp.Table{}}
		if tt.in != nil {
			d.Headers[debeziumServerIDHeader] = tt.in
		}
		if got := headerID(d); got != tt.want {
			t.Errorf("headerID(%#v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestDebeziumServerFlag checks that --debezium-server needs --broker
// rabbitmq and the drain, and that --debezium stays Kafka's.
func TestDebeziumServerFlag(t *testing.T) {
	rel := filepath.Join(t.TempDir(), "relay")
	if err := os.WriteFile(rel, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	o, err := parseFlags([]string{"--relay", rel, "--broker", "rabbitmq", "--debezium-server", "--debezium-connector-opts", "debezium.source.poll.interval.ms=500"})
	if err != nil {
		t.Fatal(err)
	}
	if !o.withDebeziumServer || len(o.debeziumOpts) != 1 {
		t.Errorf("--debezium-server %t, opts %v; want true and one", o.withDebeziumServer, o.debeziumOpts)
	}
	for _, args := range [][]string{
		{"--debezium-server"},
		{"--broker", "rabbitmq", "--debezium-server", "--latency"},
		{"--broker", "rabbitmq", "--debezium"},
	} {
		if _, err := parseFlags(append([]string{"--relay", rel}, args...)); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

// TestFindDebeziumServer finds an unpacked distribution and the java the
// script wrote beside it, and says what to run when either is missing.
func TestFindDebeziumServer(t *testing.T) {
	t.Setenv("CDC_RELAY_JAVA21", "")
	dir := t.TempDir()
	if _, err := findDebeziumServer(dir); err == nil || !strings.Contains(err.Error(), "scripts/debezium-server.sh") {
		t.Errorf("empty dir: %v, want an error naming scripts/debezium-server.sh", err)
	}
	home := filepath.Join(dir, "debezium-server")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, runnerJar), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := findDebeziumServer(dir); err == nil {
		t.Error("no java file: accepted")
	}
	if err := os.WriteFile(filepath.Join(dir, "java"), []byte("/opt/jdk25/bin/java\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := findDebeziumServer(dir)
	if err != nil {
		t.Fatal(err)
	}
	if d.Home != home || d.Java != "/opt/jdk25/bin/java" {
		t.Errorf("found %+v, want home %s and /opt/jdk25/bin/java", d, home)
	}
	t.Setenv("CDC_RELAY_JAVA21", "/other/java")
	if d, _ := findDebeziumServer(dir); d.Java != "/other/java" {
		t.Errorf("java = %q, want CDC_RELAY_JAVA21's", d.Java)
	}
	args := d.args([]string{"-Xmx2G"})
	if args[0] != "-Xmx2G" || args[len(args)-1] != debeziumServerMain || !strings.Contains(args[2], filepath.Join(home, "lib", "*")) {
		t.Errorf("args %v", args)
	}
}

// TestDebeziumServerVersion checks that the bench looks for the release
// scripts/debezium-server.sh unpacks.
func TestDebeziumServerVersion(t *testing.T) {
	b, err := os.ReadFile("../../scripts/debezium-server.sh")
	if err != nil {
		t.Fatal(err)
	}
	if want := "\nversion=" + debeziumServerVersion + "\n"; !strings.Contains(string(b), want) {
		t.Errorf("scripts/debezium-server.sh has no %q", strings.TrimSpace(want))
	}
}
