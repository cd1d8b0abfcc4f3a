package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	relaypkg "github.com/cdc-relay/cdc-relay/relay"
	"github.com/cdc-relay/cdc-relay/router"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

var required = []string{"--pg-url", "postgres://u@h/db", "--kafka-brokers", "k:9092", "--schema-registry-url", "http://r:8081", "--schemas-dir", "/s"}

func TestDefaults(t *testing.T) {
	c, err := LoadConfig(required, env(nil), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Slot != "cdc_relay" || c.Publication != "cdc_relay" || len(c.Tables) != 1 || c.Tables[0].Name != "public.outbox" ||
		c.TopicTemplate != "outbox.event.{aggregate_type}" || c.DLQTopic != "outbox.dlq" || c.OnInvalid != "dlq" ||
		c.MetricsAddr != ":9187" || c.SubjectStrategy.String() != "topic_record" || c.StatusInterval != time.Second {
		t.Fatalf("defaults wrong: %+v", c)
	}
	if cols := c.Tables[0].Columns; cols.ID != "id" || cols.Payload != "payload" {
		t.Fatalf("default columns wrong: %+v", cols)
	}
	if c.MessagePrefix != "outbox" || c.MessagePrefixSet || c.CloudEvents {
		t.Fatalf("message prefix %q (set %v), cloudevents %v", c.MessagePrefix, c.MessagePrefixSet, c.CloudEvents)
	}
}

func TestPrecedenceFlagEnvYAMLDefault(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "relay.yaml")
	yaml := "slot: from_yaml\npublication: pub_yaml\ndlq-topic: yaml.dlq\ntable: app.events\nkafka-brokers: [a:1, b:2]\ncolumns:\n  aggregate_id: agg\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--config", path, "--slot", "from_flag"}, required[:2]...)
	args = append(args, required[4:]...)
	c, err := LoadConfig(args, env(map[string]string{"CDC_RELAY_SLOT": "from_env", "CDC_RELAY_PUBLICATION": "pub_env"}), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, got, want string }{
		{"flag beats env and yaml", c.Slot, "from_flag"},
		{"env beats yaml", c.Publication, "pub_env"},
		{"yaml beats default", c.DLQTopic, "yaml.dlq"},
		{"yaml table", c.Tables[0].Name, "app.events"},
		{"yaml list", strings.Join(c.KafkaBrokers, ","), "a:1,b:2"},
		{"yaml columns", c.Tables[0].Columns.AggregateID, "agg"},
		{"default", c.OnInvalid, "dlq"},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, tc.got, tc.want)
		}
	}
}

func TestEnvConfigPath(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "relay.yaml")
	os.WriteFile(path, []byte("on-invalid: halt\n"), 0o600)
	c, err := LoadConfig(required, env(map[string]string{"CDC_RELAY_CONFIG": path}), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if c.OnInvalid != "halt" {
		t.Fatalf("OnInvalid = %q, want halt from the YAML named by CDC_RELAY_CONFIG", c.OnInvalid)
	}
}

// TestSeveralTables: --table repeats; env and YAML take a list; a YAML
// entry may map its own columns over the shared columns: mapping.
func TestSeveralTables(t *testing.T) {
	c, err := LoadConfig(append(append([]string{}, required...), "--table", "outbox", "--table", "billing.events"), env(nil), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(relaypkg.TableNames(c.Tables), ","); got != "public.outbox,billing.events" {
		t.Fatalf("tables %s", got)
	}
	c, err = LoadConfig(required, env(map[string]string{"CDC_RELAY_TABLE": "a.x, b.y"}), &bytes.Buffer{})
	if err != nil || strings.Join(relaypkg.TableNames(c.Tables), ",") != "a.x,b.y" {
		t.Fatalf("env list: %v %v", c, err)
	}
	path := filepath.Join(t.TempDir(), "relay.yaml")
	yaml := "table:\n  - public.outbox\n  - name: billing.events\n    columns:\n      aggregate_id: invoice_id\ncolumns:\n  event_type: type\nmessage-prefix: events\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err = LoadConfig(append([]string{"--config", path}, required...), env(nil), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Tables) != 2 || c.Tables[0].Columns.AggregateID != "aggregate_id" || c.Tables[0].Columns.EventType != "type" ||
		c.Tables[1].Name != "billing.events" || c.Tables[1].Columns.AggregateID != "invoice_id" || c.Tables[1].Columns.EventType != "type" {
		t.Fatalf("tables %+v", c.Tables)
	}
	if c.MessagePrefix != "events" || !c.MessagePrefixSet {
		t.Fatalf("message prefix %q set %v", c.MessagePrefix, c.MessagePrefixSet)
	}
	c, err = LoadConfig(append(append([]string{}, required...), "--cloudevents", "true", "--cloudevents-source", "/orders"), env(nil), &bytes.Buffer{})
	if err != nil || !c.CloudEvents || c.CloudEventsSource != "/orders" {
		t.Fatalf("cloudevents: %+v %v", c, err)
	}
}

// TestBoolFlags: a true/false setting takes a bare flag, --flag=value and
// --flag value.
func TestBoolFlags(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		tombstones bool
		tls        bool
	}{
		{[]string{"--tombstone-on-null-payload"}, true, false},
		{[]string{"--tombstone-on-null-payload", "--kafka-tls"}, true, true},
		{[]string{"--tombstone-on-null-payload", "true", "--kafka-tls", "false"}, true, false},
		{[]string{"--tombstone-on-null-payload=false", "--kafka-tls=true"}, false, true},
		{[]string{"-kafka-tls", "true"}, false, true},
		{nil, false, false},
	} {
		c, err := LoadConfig(append(append([]string{}, required...), tc.args...), env(nil), &bytes.Buffer{})
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if c.Tombstones != tc.tombstones || c.KafkaTLS != tc.tls {
			t.Errorf("%v: tombstones %v, tls %v", tc.args, c.Tombstones, c.KafkaTLS)
		}
	}
	if _, err := LoadConfig(append(append([]string{}, required...), "--cloudevents", "--cloudevents-source", "/x"), env(nil), &bytes.Buffer{}); err != nil {
		t.Fatalf("bare --cloudevents: %v", err)
	}
	_, err := LoadConfig(append(append([]string{}, required...), "--cloudevents=yes"), env(nil), &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "--cloudevents") {
		t.Fatalf("--cloudevents=yes: %v", err)
	}
}

// TestJSONNeedsNoRegistry: with --value-format json and a non-Avro key, the
// registry settings are optional.
func TestJSONNeedsNoRegistry(t *testing.T) {
	c, err := LoadConfig([]string{"--pg-url", "postgres://u@h/db", "--kafka-brokers", "k:9092", "--value-format", "json", "--key-format", "json",
		"--builtin-headers", "id", "--header-columns", "tenant, created_at:ts"}, env(nil), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if c.ValueFormat.String() != "json" || c.KeyFormat.String() != "json" || c.BuiltinHeaders != router.BuiltinID || len(c.HeaderColumns) != 2 || c.HeaderColumns[1].Header != "ts" {
		t.Fatalf("config %+v", c)
	}
	d, err := LoadConfig(required, env(nil), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if d.ValueFormat.String() != "avro" || d.KeyFormat.String() != "string" || d.BuiltinHeaders != router.AllBuiltin || d.Tombstones || d.TimestampColumn != "" {
		t.Fatalf("defaults %+v", d)
	}
}

func TestBadSettingsNameTheField(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantKey string
	}{
		{"missing pg-url", required[2:], nil, "--pg-url"},
		{"missing brokers", append(append([]string{}, required[:2]...), required[4:]...), nil, "--kafka-brokers"},
		{"bad on-invalid", append(append([]string{}, required...), "--on-invalid", "drop"), nil, "--on-invalid"},
		{"bad on-invalid env", required, map[string]string{"CDC_RELAY_ON_INVALID": "ignore"}, "--on-invalid"},
		{"bad slot", append(append([]string{}, required...), "--slot", "Bad-Slot"), nil, "--slot"},
		{"bad template", append(append([]string{}, required...), "--topic-template", "x.{nope}"), nil, "--topic-template"},
		{"bad dlq", append(append([]string{}, required...), "--dlq-topic", "a b"), nil, "--dlq-topic"},
		{"bad registry", append(append([]string{}, required...), "--schema-registry-url", "r:8081"), nil, "--schema-registry-url"},
		{"bad broker", append(append([]string{}, required...), "--kafka-brokers", "nohost"), nil, "--kafka-brokers"},
		{"bad metrics addr", append(append([]string{}, required...), "--metrics-addr", "9187"), nil, "--metrics-addr"},
		{"bad strategy", append(append([]string{}, required...), "--subject-strategy", "x"), nil, "--subject-strategy"},
		{"bad duration", append(append([]string{}, required...), "--status-interval", "1h"), nil, "--status-interval"},
		{"unknown flag", append(append([]string{}, required...), "--nope", "1"), nil, "-nope"},
		{"missing config file", append(append([]string{}, required...), "--config", "/nonexistent.yaml"), nil, "--config"},
		{"unknown key format", append(append([]string{}, required...), "--key-format", "protobuf"), nil, "--key-format"},
		{"unknown value format", append(append([]string{}, required...), "--value-format", "xml"), nil, "--value-format"},
		{"unknown value format env", required, map[string]string{"CDC_RELAY_VALUE_FORMAT": "Avro"}, "--value-format"},
		{"unknown builtin header", append(append([]string{}, required...), "--builtin-headers", "id,type"), nil, "--builtin-headers"},
		{"header column twice", append(append([]string{}, required...), "--header-columns", "a:x,b:x"), nil, "--header-columns"},
		{"header column named id", append(append([]string{}, required...), "--header-columns", "tenant:id"), nil, "--header-columns"},
		{"bad tombstone flag", append(append([]string{}, required...), "--tombstone-on-null-payload", "yes"), nil, "--tombstone-on-null-payload"},
		{"avro value needs schemas", []string{"--pg-url", "postgres://u@h/db", "--kafka-brokers", "k:9092", "--schema-registry-url", "http://r:8081"}, nil, "--schemas-dir"},
		{"same table twice", append(append([]string{}, required...), "--table", "outbox", "--table", "public.outbox"), nil, "--table"},
		{"bad table name", append(append([]string{}, required...), "--table", "a.b.c"), nil, "--table"},
		{"cloudevents without source", append(append([]string{}, required...), "--cloudevents", "true"), nil, "--cloudevents-source"},
		{"cloudevents source with a space", append(append([]string{}, required...), "--cloudevents", "true", "--cloudevents-source", "/my orders"), nil, "--cloudevents-source"},
		{"cloudevents source not a URI", append(append([]string{}, required...), "--cloudevents", "true", "--cloudevents-source", "http://[::1"), nil, "--cloudevents-source"},
		{"bad cloudevents flag", append(append([]string{}, required...), "--cloudevents", "yes"), nil, "--cloudevents"},
		{"avro key needs registry", []string{"--pg-url", "postgres://u@h/db", "--kafka-brokers", "k:9092", "--value-format", "json", "--key-format", "avro"}, nil, "--schema-registry-url"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			code := run(append([]string{"run"}, tc.args...), env(tc.env), &bytes.Buffer{}, &stderr)
			if code != exitConfig {
				t.Fatalf("exit code = %d, want %d; stderr: %s", code, exitConfig, stderr.String())
			}
			out := stderr.String()
			if !strings.Contains(out, tc.wantKey) {
				t.Fatalf("stderr %q does not name %s", out, tc.wantKey)
			}
			if strings.Count(strings.TrimSpace(out), "\n") > 0 {
				t.Fatalf("want a one-line message, got %q", out)
			}
		})
	}
}

func TestUnknownYAMLKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(path, []byte("slott: x\n"), 0o600)
	_, err := LoadConfig(append([]string{"--config", path}, required...), env(nil), &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), `"slott"`) {
		t.Fatalf("err = %v, want it to name the unknown key", err)
	}
}

func TestRedact(t *testing.T) {
	tests := map[string]string{
		"postgres://relay:s3cret@db:5432/app":   "postgres://relay:xxxxx@db:5432/app",
		"host=db user=relay password=s3cret":    "host=db user=relay password=xxxxx",
		"host=db password='s3 cret' user=relay": "host=db password=xxxxx user=relay",
		"postgres://relay@db/app":               "postgres://relay@db/app",
	}
	for in, want := range tests {
		if got := Redact(in); got != want || strings.Contains(got, "s3") {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestVersionAndUnknownCommand(t *testing.T) {
	var out bytes.Buffer
	if code := run([]string{"version"}, env(nil), &out, &bytes.Buffer{}); code != 0 || !strings.HasPrefix(out.String(), "cdc-relay ") {
		t.Fatalf("version: code %d, out %q", code, out.String())
	}
	if code := run([]string{"frobnicate"}, env(nil), &bytes.Buffer{}, &bytes.Buffer{}); code != exitConfig {
		t.Fatalf("unknown command exit = %d, want 2", code)
	}
}

func TestKafkaSecuritySettings(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	os.WriteFile(pw, []byte("from-file\n"), 0o600)
	c, err := LoadConfig(append(append([]string{}, required...), "--kafka-sasl-mechanism", "scram-sha-512", "--kafka-sasl-username", "relay"),
		env(map[string]string{"CDC_RELAY_KAFKA_SASL_PASSWORD_FILE": pw}), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if c.KafkaSASLPassword != "from-file" {
		t.Fatalf("password from the _FILE env = %q", c.KafkaSASLPassword)
	}
	if _, err := relaypkg.CheckedKafkaSecurity(c); err != nil {
		t.Fatal(err)
	}
	bad := []struct {
		args []string
		key  string
	}{
		{[]string{"--kafka-sasl-mechanism", "gssapi"}, "--kafka-sasl-mechanism"},
		{[]string{"--kafka-sasl-mechanism", "plain", "--kafka-sasl-username", "u"}, "--kafka-sasl-password"},
		{[]string{"--kafka-tls-ca-file", pw}, "--kafka-tls-ca-file"},
		{[]string{"--kafka-tls", "true", "--kafka-tls-ca-file", "/nonexistent"}, "--kafka-tls-ca-file"},
		{[]string{"--kafka-tls", "true", "--kafka-tls-cert-file", pw}, "--kafka-tls-cert-file"},
	}
	for _, b := range bad {
		_, err := LoadConfig(append(append([]string{}, required...), b.args...), env(nil), &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), b.key) {
			t.Errorf("%v: err = %v, want one naming %s", b.args, err, b.key)
		}
	}
	if _, err := LoadConfig(required, env(map[string]string{"CDC_RELAY_PG_URL_FILE": "/nonexistent"}), &bytes.Buffer{}); err != nil {
		t.Errorf("a flag must win over a _FILE env: %v", err)
	}
}

func TestSlotFailoverSettings(t *testing.T) {
	c, err := LoadConfig(required, env(nil), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if c.SlotFailover != "auto" || c.SlotPollInterval != 15*time.Second {
		t.Fatalf("defaults: --slot-failover %q, --slot-poll-interval %s; want auto, 15s", c.SlotFailover, c.SlotPollInterval)
	}
	for _, bad := range [][]string{{"--slot-failover", "yes"}, {"--slot-poll-interval", "0s"}, {"--slot-poll-interval", "soon"}} {
		var out bytes.Buffer
		code := run(append(append([]string{"run"}, required...), bad...), env(nil), &out, &out)
		if code != exitConfig || !strings.Contains(out.String(), bad[0]) {
			t.Errorf("%v: exit %d, want %d naming the flag:\n%s", bad, code, exitConfig, out.String())
		}
	}
}

// TestAllowExtraTablesSetting: --allow-extra-tables defaults to false and
// is read from the flag (bare or with a value), the env and YAML.
func TestAllowExtraTablesSetting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "relay.yaml")
	if err := os.WriteFile(path, []byte("allow-extra-tables: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want bool
	}{
		{"default", nil, nil, false},
		{"bare flag", []string{"--allow-extra-tables"}, nil, true},
		{"flag false", []string{"--allow-extra-tables=false"}, map[string]string{"CDC_RELAY_ALLOW_EXTRA_TABLES": "true"}, false},
		{"env", nil, map[string]string{"CDC_RELAY_ALLOW_EXTRA_TABLES": "true"}, true},
		{"yaml", []string{"--config", path}, nil, true},
	} {
		c, err := LoadConfig(append(append([]string{}, required...), tc.args...), env(tc.env), &bytes.Buffer{})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if c.AllowExtraTables != tc.want {
			t.Errorf("%s: AllowExtraTables = %v, want %v", tc.name, c.AllowExtraTables, tc.want)
		}
	}
	var out bytes.Buffer
	if code := run(append(append([]string{"run"}, required...), "--allow-extra-tables", "yes"), env(nil), &out, &out); code != exitConfig || !strings.Contains(out.String(), "--allow-extra-tables") {
		t.Errorf("--allow-extra-tables yes: exit %d, want %d naming the flag:\n%s", code, exitConfig, out.String())
	}
}

// TestHelpEveryCommand: each command's --help (and -h) prints its own
// usage line on stdout and exits 0.
func TestHelpEveryCommand(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		usage string
	}{
		{[]string{"run"}, "Usage: cdc-relay run [flags]"},
		{[]string{"check"}, "Usage: cdc-relay check [flags]"},
		{[]string{"status"}, "Usage: cdc-relay status [flags]"},
		{[]string{"schemas"}, "Usage: cdc-relay schemas check"},
		{[]string{"schemas", "check"}, "Usage: cdc-relay schemas check [flags]"},
		{[]string{"healthcheck"}, "Usage: cdc-relay healthcheck [flags]"},
		{[]string{"replay"}, "Usage: cdc-relay replay --since TIME"},
		{[]string{"slot"}, "Usage: cdc-relay slot recreate"},
		{[]string{"slot", "recreate"}, "Usage: cdc-relay slot recreate --accept-gap"},
		{[]string{"dlq"}, "Usage: cdc-relay dlq stats"},
		{[]string{"dlq", "stats"}, "Usage: cdc-relay dlq stats [--json] [flags]"},
		{[]string{"dlq", "redrive"}, "Usage: cdc-relay dlq redrive [--dry-run]"},
	} {
		for _, h := range []string{"--help", "-h"} {
			var stdout, stderr bytes.Buffer
			args := append(append([]string{}, tc.args...), h)
			if code := run(args, env(nil), &stdout, &stderr); code != exitOK {
				t.Errorf("%v: exit %d, want 0; stderr %s", args, code, stderr.String())
			}
			if !strings.HasPrefix(stdout.String(), tc.usage) {
				t.Errorf("%v: stdout does not start with %q:\n%s", args, tc.usage, stdout.String())
			}
			if len(tc.args) == 1 && (tc.args[0] == "schemas" || tc.args[0] == "slot" || tc.args[0] == "dlq") {
				continue // the verb list
			}
			for _, want := range []string{"_FILE", "CDC_RELAY_", "default"} {
				if !strings.Contains(stdout.String(), want) {
					t.Errorf("%v does not mention %s", args, want)
				}
			}
			if tc.args[0] != "run" && strings.Contains(stdout.String(), "Usage: cdc-relay run") {
				t.Errorf("%v shows run's usage:\n%s", args, stdout.String())
			}
		}
	}
}

// TestFileEnvEveryCommand: CDC_RELAY_<NAME>_FILE is read by every command
// (its content, here a bad value, is what the command reports).
func TestFileEnvEveryCommand(t *testing.T) {
	file := func(content string) string {
		path := filepath.Join(t.TempDir(), "value")
		if err := os.WriteFile(path, []byte(content+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	badSlot := map[string]string{"CDC_RELAY_SLOT_FILE": file("Bad-Slot")}
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{append([]string{"run"}, required...), badSlot, `--slot: "Bad-Slot"`},
		{append([]string{"check"}, required...), badSlot, `--slot: "Bad-Slot"`},
		{append([]string{"replay", "--since", "1h"}, required...), badSlot, `--slot: "Bad-Slot"`},
		{append([]string{"slot", "recreate", "--accept-gap"}, required...), badSlot, `--slot: "Bad-Slot"`},
		{[]string{"status", "--pg-url", "postgres://u@h/db"}, badSlot, `--slot: "Bad-Slot"`},
		{[]string{"schemas", "check", "--schema-registry-url", "http://r:8081", "--schemas-dir", "/s"},
			map[string]string{"CDC_RELAY_SUBJECT_STRATEGY_FILE": file("nope")}, `--subject-strategy: "nope"`},
		{[]string{"healthcheck"}, map[string]string{"CDC_RELAY_METRICS_ADDR_FILE": file("9187")}, `--metrics-addr: "9187"`},
		{[]string{"dlq", "stats", "--kafka-brokers", "k:9092"}, map[string]string{"CDC_RELAY_KAFKA_SASL_MECHANISM_FILE": file("nope")}, `--kafka-sasl-mechanism: "nope"`},
		{append([]string{"dlq", "redrive"}, required...), map[string]string{"CDC_RELAY_UNKNOWN_FIELDS_FILE": file("maybe")}, `--unknown-fields: "maybe"`},
		{append([]string{"dlq", "redrive"}, required...), map[string]string{"CDC_RELAY_GROUP_FILE": file(" ")}, `--group: is empty`},
	} {
		var stderr bytes.Buffer
		code := run(tc.args, env(tc.env), &bytes.Buffer{}, &stderr)
		if code != exitConfig || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v with %v: exit %d, stderr %q; want %d and %q", tc.args[:2], tc.env, code, stderr.String(), exitConfig, tc.want)
		}
	}
}

// TestEnvAndFileEnvBothSet: X wins over X_FILE, with a WARN.
func TestEnvAndFileEnvBothSet(t *testing.T) {
	path := filepath.Join(t.TempDir(), "slot")
	os.WriteFile(path, []byte("from_file\n"), 0o600)
	var out bytes.Buffer
	c, err := LoadConfig(required, env(map[string]string{"CDC_RELAY_SLOT": "from_env", "CDC_RELAY_SLOT_FILE": path}), &out)
	if err != nil {
		t.Fatal(err)
	}
	if c.Slot != "from_env" {
		t.Errorf("slot %q, want from_env", c.Slot)
	}
	if !strings.Contains(out.String(), "level=WARN") || !strings.Contains(out.String(), "CDC_RELAY_SLOT_FILE") {
		t.Errorf("no WARN naming CDC_RELAY_SLOT and CDC_RELAY_SLOT_FILE: %q", out.String())
	}
}

// TestYAMLNestedTypo: a typo inside a table entry is exit 2 naming its path.
func TestYAMLNestedTypo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "relay.yaml")
	os.WriteFile(path, []byte("table:\n  - name: public.outbox\n    colums:\n      aggregate_id: agg\n"), 0o600)
	for _, args := range [][]string{
		append([]string{"run", "--config", path}, required...),
		append([]string{"check", "--config", path}, required...),
		{"status", "--config", path, "--pg-url", "postgres://u@h/db"},
		{"healthcheck", "--config", path},
	} {
		var stderr bytes.Buffer
		code := run(args, env(nil), &bytes.Buffer{}, &stderr)
		if code != exitConfig || !strings.Contains(stderr.String(), "table[0].colums") || !strings.Contains(stderr.String(), "did you mean columns?") {
			t.Errorf("%s: exit %d, stderr %q; want 2 naming table[0].colums", args[0], code, stderr.String())
		}
	}
}

// TestUnknownFlagSuggestion: an unknown flag names the nearest known one.
func TestUnknownFlagSuggestion(t *testing.T) {
	for _, args := range [][]string{{"run", "--pg-ur", "x"}, {"check", "-pgurl=x"}, {"status", "--pg_url", "x"}} {
		var stderr bytes.Buffer
		if code := run(args, env(nil), &bytes.Buffer{}, &stderr); code != exitConfig || !strings.Contains(stderr.String(), "did you mean --pg-url?") {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr.String())
		}
	}
}
