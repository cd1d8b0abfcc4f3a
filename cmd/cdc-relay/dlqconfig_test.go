package main

import (
	"bytes"
	"strings"
	"testing"
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
