package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	dlqpkg "github.com/cdc-relay/cdc-relay/dlq"
)

// retiredRecords reads every record of topic with an independent client.
func retiredRecords(t *testing.T, addr, topic string) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		if fs.NumRecords() == 0 {
			return out
		}
		out = append(out, fs.Records()...)
	}
}

// TestDLQRetireKfake: dlq retire, with the filters of redrive and a
// required --reason, writes one retirement record per letter to
// --dlq-retired-topic, readable by an independent consumer with its reason;
// dlq stats counts retired letters apart from the pending ones, which
// reach 0; retiring again retires nothing twice. Kafka only (kfake).
func TestDLQRetireKfake(t *testing.T) {
	t.Parallel()
	dlq, retiredTopic := "t_retire.dlq", "t_retire.dlq.retired"
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, dlq))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	addr := kc.ListenAddrs()[0]
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	letter := func(id, kind string) *kgo.Record {
		return &kgo.Record{Topic: dlq, Key: []byte("k" + id), Value: []byte(`{"x":1}`),
			Headers: []kgo.RecordHeader{{Key: "id", Value: []byte(id)}, {Key: "event_type", Value: []byte("OrderShipped")}, {Key: "error_kind", Value: []byte(kind)}}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, letter("1", "no_schema"), letter("2", "schema_mismatch"), letter("3", "no_schema")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	base := []string{"--kafka-brokers", addr, "--dlq-topic", dlq, "--group", "g_retire", "--dlq-retired-topic", retiredTopic}
	retire := func(extra ...string) (int, string, string) {
		return runReplay(t, nil, append(append([]string{"dlq", "retire"}, base...), extra...))
	}
	stats := func() dlqpkg.Counts {
		t.Helper()
		code, out, _ := runReplay(t, nil, append(append([]string{"dlq", "stats"}, base...), "--json"))
		var c dlqpkg.Counts
		if err := json.Unmarshal([]byte(out), &c); code != 0 || err != nil {
			t.Fatalf("dlq stats: exit %d, %v", code, err)
		}
		return c
	}

	if c := stats(); c.Pending != 3 || c.Retired != 0 || c.InTopic != 3 {
		t.Fatalf("stats before: %+v", c)
	}
	if code, _, errOut := retire("--id", "1"); code != exitConfig || !strings.Contains(errOut, "--reason: is required") {
		t.Fatalf("retire without --reason: exit %d, %q", code, errOut)
	}
	if code, _, errOut := retire("--reason", " "); code != exitConfig || !strings.Contains(errOut, "--reason: is empty") {
		t.Fatalf("retire with an empty --reason: exit %d, %q", code, errOut)
	}
	code, out, _ := retire("--kind", "no_schema", "--reason", "x", "--dry-run")
	if code != 0 || len(lines(out, "would be retired id=")) != 2 || !strings.Contains(out, "dry run: would have: retired 2, already retired 0, left out by the filters 1") {
		t.Fatalf("dry run: exit %d", code)
	}
	if got := retiredRecords(t, addr, retiredTopic); len(got) != 0 {
		t.Fatalf("the dry run wrote %d records", len(got))
	}

	reason := "replayed with cdc-relay replay, INC-42"
	code, out, _ = retire("--id", "1", "--reason", reason)
	if code != 0 || len(lines(out, "retired id=1 partition=0 offset=0 kind=no_schema")) != 1 || !strings.Contains(out, "retire: retired 1, already retired 0, left out by the filters 2") {
		t.Fatalf("retire --id 1: exit %d", code)
	}
	code, out, _ = retire("--id", "1", "--reason", "again")
	if code != 0 || len(lines(out, "already retired id=1 partition=0 offset=0")) != 1 || !strings.Contains(out, "retire: retired 0, already retired 1") {
		t.Fatalf("retire --id 1 again: exit %d", code)
	}
	if c := stats(); c.Pending != 2 || c.Retired != 1 || c.InTopic != 3 || c.Kinds["no_schema"] != 1 || c.Kinds["schema_mismatch"] != 1 || c.RetiredTopic != retiredTopic {
		t.Fatalf("stats after retiring one: %+v", c)
	}
	code, out, _ = runReplay(t, nil, append([]string{"dlq", "stats"}, base...))
	if code != 0 || !strings.Contains(out, "2 dead letters pending for group g_retire (3 in the topic)") || !strings.Contains(out, "retired with cdc-relay dlq retire: 1 (in "+retiredTopic+")") {
		t.Fatalf("dlq stats: exit %d", code)
	}

	recs := retiredRecords(t, addr, retiredTopic)
	if len(recs) != 1 {
		t.Fatalf("%d retirement records, want 1", len(recs))
	}
	var ret dlqpkg.Retirement
	if err := json.Unmarshal(recs[0].Value, &ret); err != nil {
		t.Fatal(err)
	}
	if ret.Reason != reason || ret.ID != "1" || ret.DLQTopic != dlq || ret.Partition != 0 || ret.Offset != 0 || ret.ErrorKind != "no_schema" ||
		ret.RetiredBy == "" || ret.RetiredAt.IsZero() || !strings.HasPrefix(string(recs[0].Key), dlq+"/") || !strings.HasSuffix(string(recs[0].Key), "/0/0") {
		t.Fatalf("retirement record %s = %s", recs[0].Key, recs[0].Value)
	}

	// The rest, then nothing is pending.
	if code, out, _ = retire("--reason", "written again by hand"); code != 0 || !strings.Contains(out, "retire: retired 2, already retired 1") {
		t.Fatalf("retire the rest: exit %d", code)
	}
	if c := stats(); c.Pending != 0 || c.Retired != 3 {
		t.Fatalf("stats after retiring all: %+v", c)
	}
	if n := len(retiredRecords(t, addr, retiredTopic)); n != 3 {
		t.Fatalf("%d retirement records, want 3", n)
	}
}
