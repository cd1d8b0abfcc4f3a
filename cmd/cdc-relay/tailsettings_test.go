package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/config"
	recordpkg "github.com/cdc-relay/cdc-relay/record"
	"github.com/cdc-relay/cdc-relay/tail"
)

// TestTailSettings: tail's --help, _FILE settings, the topic regex of the
// template, and exit 2 naming the flag for a bad setting or flag.
func TestTailSettings(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"tail", "--help"}, env(nil), &stdout, &stderr); code != exitOK || !strings.HasPrefix(stdout.String(), "Usage: cdc-relay tail [flags] [TOPIC...]") ||
		!strings.Contains(stdout.String(), "_FILE") || !strings.Contains(stdout.String(), "CDC_RELAY_SCHEMA_REGISTRY_URL") {
		t.Errorf("tail --help: exit %d, stdout %s", code, stdout.String())
	}
	file := filepath.Join(t.TempDir(), "brokers")
	os.WriteFile(file, []byte("nohost\n"), 0o600)
	ca := filepath.Join(t.TempDir(), "missing-ca.pem")
	k := []string{"tail", "--kafka-brokers", "k:9092"}
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"tail"}, map[string]string{"CDC_RELAY_KAFKA_BROKERS_FILE": file}, `--kafka-brokers: "nohost" is not host:port`},
		{[]string{"tail"}, nil, "--kafka-brokers: is required"},
		{append(k, "--count", "0"), nil, `--count: "0" is not a whole number`},
		{append(k, "--count", "x"), nil, `--count: "x"`},
		{append(k, "--since", "soon"), nil, `--since: "soon" is neither`},
		{append(k, "--offset", "0:x"), nil, `--offset: "0:x" is not PARTITION:OFFSET`},
		{append(k, "--offset", "0:1,0:2"), nil, "--offset: partition 0 is given twice"},
		{append(k, "--from-beginning", "--offset", "0:1"), nil, "--offset: cannot be given with --from-beginning"},
		{append(k, "--key-format", "xml"), nil, "--key-format:"},
		{append(k, "bad topic!"), nil, `topic argument "bad topic!"`},
		{append(k, "--topic-template", "x.{nope}"), nil, "unknown placeholder {nope}"},
		{append(k, "--kafka-sasl-mechanism", "plain"), nil, "--kafka-sasl-username: is required"},
		{append(k, "--kafka-tls-ca-file", ca), nil, "--kafka-tls-ca-file: is set but --kafka-tls is false"},
		{append(k, "--schema-registry-url", "r:8081"), nil, `--schema-registry-url: "r:8081" must start with http://`},
		{append(k, "--pg-url", "postgres://h/db"), nil, "unknown flag --pg-url: cdc-relay tail does not take it"},
		{append(k, "--folow"), nil, "did you mean --follow?"},
	} {
		stderr.Reset()
		if code := run(tc.args, env(tc.env), io.Discard, &stderr); code != exitConfig || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr.String(), tc.want)
		}
	}

	load := func(args ...string) *tail.Options {
		t.Helper()
		v, err := config.Load(config.Tail, append([]string{"--kafka-brokers", "k:9092"}, args...), env(nil), io.Discard, nil)
		if err != nil {
			t.Fatal(err)
		}
		o, err := newTailOptions(v, time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	o := load()
	if !o.Follow || o.Start != tail.FromEnd || o.Match == nil {
		t.Errorf("defaults: follow %v, start %d, match %v", o.Follow, o.Start, o.Match)
	}
	for topic, want := range map[string]bool{"outbox.event.Order": true, "outbox.dlq": true, "outbox.event.": false, "outboxXevent.Order": false,
		"outbox.dlq2": false, "x.outbox.event.Order": false, "cdc-relay.checkpoints": false} {
		if got := o.Match.MatchString(topic); got != want {
			t.Errorf("default topics regexp %s matches %q: %v, want %v", o.Match, topic, got, want)
		}
	}
	if o := load("--topic-template", "t.{aggregate_type}.{event_type}", "--dlq-topic", "d", "a", "b"); o.Match != nil || strings.Join(o.Topics, ",") != "a,b" {
		t.Errorf("with topics: match %v, topics %v", o.Match, o.Topics)
	}
	if o := load("--since", "90m", "--count", "3"); o.Follow || o.Start != tail.FromTime || !o.Since.Equal(time.Date(2026, 12, 2, 10, 30, 0, 0, time.UTC)) || o.Count != 3 {
		t.Errorf("--since 90m --count 3: follow %v, start %d, since %s, count %d", o.Follow, o.Start, o.Since, o.Count)
	}
	if o := load("--offset", "0:42, 2:7", "--follow"); !o.Follow || o.Start != tail.FromOffsets || o.Offsets[0] != 42 || o.Offsets[2] != 7 || len(o.Offsets) != 2 {
		t.Errorf("--offset 0:42,2:7 --follow: %+v", o)
	}
	if o := load("--follow", "false"); o.Follow {
		t.Error("--follow false follows")
	}
	if o := load("--key-format", "json-schema"); o.KeyFormat != recordpkg.KeyJSONSchema {
		t.Errorf("key format %v", o.KeyFormat)
	}
}
