package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDLQNewGroupGroupIDNotFound: on a broker that answers OffsetFetch for
// a group that never committed with GROUP_ID_NOT_FOUND (kfake; Apache Kafka
// answers with no offsets), that group has nothing committed: dlq stats
// counts every letter as pending, and the group's first dlq redrive reads
// from the start, commits, and exits 0.
func TestDLQNewGroupGroupIDNotFound(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "") // PostgreSQL only: redrive reads the outbox table's catalog
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, f.dlq))
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
	letter := &kgo.Record{Topic: f.dlq, Key: []byte("k"), Value: []byte(`{"x":1}`),
		Headers: []kgo.RecordHeader{{Key: "id", Value: []byte("41")}, {Key: "event_type", Value: []byte("OrderShipped")}, {Key: "error_kind", Value: []byte("no_schema")}}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, letter).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// The broker does answer so: else this test tests nothing.
	req := kmsg.NewPtrOffsetFetchRequest()
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = "g_" + f.name
	req.Groups = append(req.Groups, rg)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("OffsetFetch of a new group: %+v, want GROUP_ID_NOT_FOUND", resp.Groups)
	}

	group := "g_" + f.name
	redrive := []string{"dlq", "redrive", "--pg-url", f.pg.url, "--slot", f.slot, "--publication", f.publication, "--table", "public." + f.table,
		"--kafka-brokers", addr, "--topic-template", f.topicPrefix + ".{aggregate_type}", "--value-format", "json",
		"--dlq-topic", f.dlq, "--group", group, "--id", "no-such-id"}
	code, out, _ := runReplay(t, nil, redrive)
	if code != 0 || len(lines(out, "skipped id=41 partition=0 offset=0: left out by --id, re-appended unchanged")) != 1 ||
		!strings.Contains(out, "redrive: redriven 0, still failing 0, skipped 1 (1 left out by the filters and re-appended, 0 that cannot be built again)") {
		t.Fatalf("first redrive of a new group: exit %d, want 0 with the letter left out and re-appended", code)
	}
	stats := func(group string) []string {
		return []string{"dlq", "stats", "--kafka-brokers", addr, "--dlq-topic", f.dlq, "--group", group}
	}
	// A group that never committed: both letters are pending.
	code, out, _ = runReplay(t, nil, stats(group+"_new"))
	if code != 0 || !strings.Contains(out, "2 dead letters pending for group "+group+"_new (2 in the topic)") {
		t.Errorf("dlq stats of a new group: exit %d", code)
	}
	// The redrive's group committed past the letter: its re-appended copy is pending.
	code, out, _ = runReplay(t, nil, stats(group))
	if code != 0 || !strings.Contains(out, "1 dead letters pending for group "+group+" (2 in the topic)") {
		t.Errorf("dlq stats after the redrive: exit %d", code)
	}
}
