package main

import (
	"bytes"
	"strings"
	"testing"

	recordpkg "github.com/cdc-relay/cdc-relay/record"
)

// TestDLQSettings: dlq's verbs, action flags and settings are checked
// before anything connects: a bad one exits 2 naming it.
func TestDLQSettings(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"dlq"}, "want a verb: stats or redrive"},
		{[]string{"dlq", "purge"}, "want a verb: stats or redrive"},
		{append([]string{"dlq", "redrive", "--since", "yesterday"}, required...), `--since: "yesterday" is neither an RFC 3339 time`},
		{append([]string{"dlq", "redrive", "--since", "-5m"}, required...), "--since: \"-5m\" is a negative duration"},
		{append([]string{"dlq", "redrive", "--id", " "}, required...), "--id: is empty"},
		{append([]string{"dlq", "redrive", "--kind", ""}, required...), "--kind: is empty"},
		{append([]string{"dlq", "redrive", "--unknown-fields", "keep"}, required...), `--unknown-fields: "keep" is not ignore or dlq`},
		{append([]string{"run", "--unknown-fields", "keep"}, required...), `--unknown-fields: "keep" is not ignore or dlq`},
		{[]string{"dlq", "redrive", "--kafka-brokers", "k:9092"}, "--pg-url"},
		{[]string{"dlq", "stats"}, "--kafka-brokers"},
		{[]string{"dlq", "stats", "--kafka-brokers", "k:9092", "--dlq-topic", "bad topic"}, "--dlq-topic"},
		{[]string{"dlq", "stats", "--kafka-brokers", "k:9092", "--group", ""}, "--group: is empty"},
		{[]string{"dlq", "stats", "--kafka-brokers", "k:9092", "--pg-url", "postgres://h/db"}, "--pg-url"}, // not a setting of stats
	} {
		var stdout, stderr bytes.Buffer
		if code := run(tc.args, env(nil), &stdout, &stderr); code != exitConfig || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d naming %q", tc.args, code, stderr.String(), exitConfig, tc.want)
		}
	}
}

// TestWithAttempts: a still-failing letter's redrive_attempts header is set
// in place, or added just before outbox_row, so that the letter's headers
// keep their order (error_kind and error last).
func TestWithAttempts(t *testing.T) {
	keys := func(hs []kafkaHeader) string {
		var ks []string
		for _, h := range hs {
			ks = append(ks, h.Key+"="+string(h.Value))
		}
		return strings.Join(ks, ",")
	}
	hs := []kafkaHeader{{Key: "id", Value: []byte("1")}, {Key: recordpkg.HeaderRow, Value: []byte("{}")},
		{Key: recordpkg.HeaderErrorKind, Value: []byte("no_schema")}, {Key: recordpkg.HeaderError, Value: []byte("e")}}
	hs = withAttempts(hs, 1)
	if got, want := keys(hs), "id=1,redrive_attempts=1,outbox_row={},error_kind=no_schema,error=e"; got != want {
		t.Errorf("added: %s, want %s", got, want)
	}
	hs = withAttempts(hs, 2)
	if got, want := keys(hs), "id=1,redrive_attempts=2,outbox_row={},error_kind=no_schema,error=e"; got != want {
		t.Errorf("raised: %s, want %s", got, want)
	}
	if got := keys(withAttempts([]kafkaHeader{{Key: "table", Value: []byte("t")}}, 1)); got != "table=t,redrive_attempts=1" {
		t.Errorf("without outbox_row: %s", got)
	}
}
