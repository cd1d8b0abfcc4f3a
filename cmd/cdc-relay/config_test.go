package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
	if c.Slot != "cdc_relay" || c.Publication != "cdc_relay" || c.Table != "public.outbox" ||
		c.TopicTemplate != "outbox.event.{aggregate_type}" || c.DLQTopic != "outbox.dlq" || c.OnInvalid != "dlq" ||
		c.MetricsAddr != ":9187" || c.SubjectStrategy.String() != "topic_record" || c.StatusInterval != time.Second {
		t.Fatalf("defaults wrong: %+v", c)
	}
	if c.Columns.ID != "id" || c.Columns.Payload != "payload" {
		t.Fatalf("default columns wrong: %+v", c.Columns)
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
		{"yaml table", c.Table, "app.events"},
		{"yaml list", strings.Join(c.KafkaBrokers, ","), "a:1,b:2"},
		{"yaml columns", c.Columns.AggregateID, "agg"},
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
	if _, err := kafkaTransport(c); err != nil {
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
