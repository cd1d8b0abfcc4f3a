package main

// The checkpoint topic: the relay remembers what it confirmed outside the
// slot, so that a slot dropped while it is stopped, dropped while it runs
// and then restarted by a supervisor, or invalidated, ends in exit 3 and a
// message with the way out, never in a fresh slot and a silent gap.

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/internal/pgtest"
)

// checkpointValue is the JSON of a checkpoint record, read back with the
// independent consumer.
type checkpointValue struct {
	Kind           string     `json:"kind"`
	RelayID        string     `json:"relay_id"`
	LSN            string     `json:"confirmed_lsn"`
	Timeline       uint32     `json:"timeline"`
	LastCommitTime *time.Time `json:"last_commit_time"`
	SystemID       string     `json:"system_identifier"`
	Database       string     `json:"database"`
	Slot           string     `json:"slot"`
	Publication    string     `json:"publication"`
	Tables         []string   `json:"tables"`
	Version        string     `json:"version"`
	Gap            *struct {
		FromLSN    string `json:"from_lsn"`
		ToLSN      string `json:"to_lsn"`
		AcceptedBy string `json:"accepted_by"`
		Reason     string `json:"reason"`
		Via        string `json:"via"`
	} `json:"gap"`
}

// checkpoints returns the values the consumer saw on the checkpoint topic.
func checkpoints(t *testing.T, c *consumer) []checkpointValue {
	t.Helper()
	var out []checkpointValue
	for _, r := range c.records() {
		var v checkpointValue
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatalf("checkpoint record %q is not JSON: %v", r.Value, err)
		}
		if v.RelayID == "" || r.Key == "" {
			t.Fatalf("checkpoint record without a key or relay id: key %q value %s", r.Key, r.Value)
		}
		out = append(out, v)
	}
	return out
}

func systemID(t *testing.T, conn *pgx.Conn) string {
	t.Helper()
	var id string
	if err := conn.QueryRow(context.Background(), "SELECT system_identifier::text FROM pg_control_system()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

func slotExists(t *testing.T, conn *pgx.Conn, slot string) bool {
	t.Helper()
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// wantGapExit waits for exit 3 and a message naming the slot, the last
// confirmed LSN, that events may be missing from Kafka, and the two commands.
func wantGapExit(t *testing.T, r *relay, slot string) string {
	t.Helper()
	return wantGapExitOn(t, r, slot, "Kafka")
}

// wantGapExitOn is wantGapExit for the relay on broker (Kafka or RabbitMQ).
func wantGapExitOn(t *testing.T, r *relay, slot, broker string) string {
	t.Helper()
	if code := r.wait(90 * time.Second); code != exitGap {
		t.Fatalf("exit code %d, want %d:\n%s", code, exitGap, tailString(r.Output(), 3000))
	}
	out := r.Output()
	for _, want := range []string{"level=ERROR", `"` + slot + `"`, "may be missing from " + broker, "slot recreate --accept-gap", "replay --since"} {
		if !strings.Contains(out, want) {
			t.Fatalf("the exit message lacks %q:\n%s", want, tailString(out, 3000))
		}
	}
	return out
}

// TestSlotDroppedWhileStopped: a slot dropped while the relay is stopped,
// then two rows: the relay used to create a fresh slot and lose both. Now it
// exits 3 naming the checkpoint, check FAILs the same way, nothing is
// created; slot recreate --accept-gap creates the slot and records the gap,
// and the replay it suggests brings every row of the gap to Kafka.
func TestSlotDroppedWhileStopped(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	ckpt := "t" + f.name + ".checkpoints"
	args := f.args("--checkpoint-topic", ckpt, "--halt-linger", "0s")
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	cc := consume(t, "^"+strings.ReplaceAll(ckpt, ".", `\.`)+"$")
	conn := f.connect()
	ctx := context.Background()

	r := startRelay(t, args)
	r.waitStreaming(60 * time.Second)
	agg := uuidFor(1)
	ids, err := f.insertTx(ctx, conn, []event{{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	c.waitIDs(60*time.Second, ids)
	after := currentLSN(t, conn)
	waitFor(t, 30*time.Second, "the row confirmed", func() bool { return f.confirmedFlush() >= after })
	if code := r.terminate(); code != 0 {
		t.Fatalf("exit code %d", code)
	}

	// The checkpoint: keyed by <system identifier>/<database>/<slot>, at the
	// confirmed LSN, with the commit time of the row's transaction.
	sys := systemID(t, conn)
	wantID := sys + "/" + testDB + "/" + f.slot
	confirmed := f.confirmedFlush()
	var last checkpointValue
	waitFor(t, 30*time.Second, "a checkpoint at the confirmed LSN", func() bool {
		for _, v := range checkpoints(t, cc) {
			if v.Kind == "checkpoint" && parseLSN(t, v.LSN) == confirmed {
				last = v
				return true
			}
		}
		return false
	})
	if last.RelayID != wantID || last.SystemID != sys || last.Database != testDB || last.Slot != f.slot || last.Publication != f.publication ||
		len(last.Tables) != 1 || last.Tables[0] != "public."+f.table || last.Timeline != 1 || last.Version == "" || last.LastCommitTime == nil {
		t.Fatalf("checkpoint %+v, want relay id %s, system identifier %s, database %s, slot %s, publication %s, table, timeline 1, a version and a commit time",
			last, wantID, sys, testDB, f.slot, f.publication)
	}
	if time.Since(*last.LastCommitTime) > 5*time.Minute || time.Until(*last.LastCommitTime) > time.Minute {
		t.Fatalf("last_commit_time %s is not the row's commit time", last.LastCommitTime)
	}

	f.exec("SELECT pg_drop_replication_slot($1)", f.slot)
	var missed []int64
	for i := 2; i <= 3; i++ {
		agg := uuidFor(i)
		got, err := f.insertTx(ctx, conn, []event{{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, i)}})
		if err != nil {
			t.Fatal(err)
		}
		missed = append(missed, got...)
	}

	code, out := runCommand(commandArgs("check", args))
	if code != exitFailed || !strings.Contains(out, "FAIL  replication slot \""+f.slot+"\" does not exist") || !strings.Contains(out, "slot recreate --accept-gap") {
		t.Fatalf("check = %d, want a FAIL for the dropped slot:\n%s", code, out)
	}
	r2 := startRelay(t, args)
	out = wantGapExit(t, r2, f.slot)
	if !strings.Contains(out, last.LSN) || !strings.Contains(out, "last commit at "+last.LastCommitTime.UTC().Format(time.RFC3339Nano)) {
		t.Fatalf("the exit message does not name the last confirmed LSN %s and its commit time:\n%s", last.LSN, tailString(out, 3000))
	}
	if strings.Contains(out, "slot created") || slotExists(t, conn, f.slot) {
		t.Fatalf("the relay created a slot after the gap:\n%s", tailString(out, 3000))
	}
	// Supervisors restart: the restarted relay halts the same way.
	wantGapExit(t, startRelay(t, args), f.slot)

	// The explicit consent: the slot comes back and the gap is recorded.
	if code, out := runCommand(append([]string{"slot", "recreate"}, args[1:]...)); code != exitConfig || !strings.Contains(out, "--accept-gap is required") {
		t.Fatalf("slot recreate without --accept-gap = %d, want %d:\n%s", code, exitConfig, out)
	}
	sr := append([]string{"slot", "recreate", "--accept-gap", "--reason", "INC-42"}, args[1:]...)
	code, out = runCommand(sr)
	if code != 0 || !strings.Contains(out, "created slot "+f.slot) || !strings.Contains(out, "gap recorded in "+ckpt) || !strings.Contains(out, "replay --since") {
		t.Fatalf("slot recreate = %d:\n%s", code, out)
	}
	if !slotExists(t, conn, f.slot) {
		t.Fatal("slot recreate created no slot")
	}
	waitFor(t, 30*time.Second, "the gap record", func() bool {
		for _, v := range checkpoints(t, cc) {
			if v.Kind == "gap" && v.Gap != nil && v.Gap.FromLSN == last.LSN && v.Gap.Reason == "INC-42" && v.Gap.Via == "slot recreate" && v.Gap.AcceptedBy != "" && v.RelayID == wantID {
				return true
			}
		}
		return false
	})

	// Then run starts normally and streams what comes after the new slot.
	r3 := startRelay(t, args)
	r3.waitStreaming(60 * time.Second)
	agg = uuidFor(4)
	ids, err = f.insertTx(ctx, conn, []event{{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, 4)}})
	if err != nil {
		t.Fatal(err)
	}
	c.waitIDs(60*time.Second, ids)
	if code := r3.terminate(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	for _, id := range missed {
		if distinctIDs(c.records())[fmt.Sprint(id)] != 0 {
			t.Fatalf("row %d of the gap reached Kafka without a replay: the test does not reproduce the gap", id)
		}
	}

	// The repair: replay with the --since that slot recreate gives.
	m := regexp.MustCompile(`cdc-relay replay --since (\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("slot recreate does not say which replay to run:\n%s", out)
	}
	code, out = runCommand(append([]string{"replay", "--since", m[1]}, args[1:]...))
	if code != 0 || !strings.Contains(out, "replayed ") {
		t.Fatalf("replay --since %s = %d:\n%s", m[1], code, out)
	}
	c.waitIDs(60*time.Second, missed)
}

// TestCheckpointTopicNotCompacted: a checkpoint topic whose records expire
// (cleanup.policy=delete, made by hand or auto-created by the broker) is
// exit 2 naming the fix; the relay creates nothing.
func TestCheckpointTopicNotCompacted(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	byHand := "t" + f.name + ".ckpt-delete"
	auto := "t" + f.name + ".ckpt-auto"
	createTopic(t, broker.Addr(), byHand, map[string]string{"cleanup.policy": "delete"})
	// A topic the broker auto-created has the broker's default, delete.
	w, err := kgo.NewClient(kgo.SeedBrokers(broker.Addr()), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the broker to auto-create "+auto, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return w.ProduceSync(ctx, &kgo.Record{Topic: auto, Key: []byte("k"), Value: []byte("{}")}).FirstErr() == nil
	})
	w.Close()
	for _, topic := range []string{byHand, auto} {
		t.Run(topic, func(t *testing.T) {
			r := startRelay(t, f.args("--checkpoint-topic", topic))
			if code := r.wait(90 * time.Second); code != exitConfig {
				t.Fatalf("exit code %d, want %d:\n%s", code, exitConfig, tailString(r.Output(), 3000))
			}
			out := r.Output()
			if !strings.Contains(out, "--checkpoint-topic "+topic+" has cleanup.policy=delete") || !strings.Contains(out, "cleanup.policy=compact") {
				t.Fatalf("the message does not name the topic's policy and the fix:\n%s", tailString(out, 3000))
			}
			if slotExists(t, f.connect(), f.slot) {
				t.Fatal("the relay created its slot before it could trust its checkpoint")
			}
		})
	}
}

// TestCheckpointUnreadable: with Kafka down, the checkpoint is unknown, not
// absent. A relay whose slot was dropped must not take the unreadable topic
// for a first start: it creates nothing and waits; once Kafka is back it
// exits 3. A first start waits the same way, and then creates the slot.
func TestCheckpointUnreadable(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	f.ownBroker() // stopped below, under both relays
	first := newFixture(t, "")
	first.kafka = f.kafka
	args := f.args("--halt-linger", "0s")
	r := startRelay(t, args)
	r.waitStreaming(60 * time.Second)
	waitFor(t, 30*time.Second, "the slot confirmed", func() bool { return f.confirmedFlush() > 0 })
	cc := f.consume(`^cdc-relay\.checkpoints$`)
	waitFor(t, 60*time.Second, "the relay's checkpoint", func() bool {
		for _, v := range checkpoints(t, cc) {
			if v.Slot == f.slot {
				return true
			}
		}
		return false
	})
	if code := r.terminate(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	f.exec("SELECT pg_drop_replication_slot($1)", f.slot)

	restart := f.stopBroker()
	testCheckpointUnknown(t, f, first, args, first.args("--halt-linger", "0s"), "Kafka", restart)
}

// testCheckpointUnknown starts a relay with args, whose slot was dropped,
// and a first start with firstArgs, while neither can read its checkpoint
// on broker: both wait, and create nothing. Once readable makes the
// checkpoint readable, the first exits 3 and the second streams. It
// returns the first relay's output.
func testCheckpointUnknown(t *testing.T, f, first *fixture, args, firstArgs []string, broker string, readable func()) string {
	t.Helper()
	conn := f.connect()
	r2 := startRelay(t, args)
	r3 := startRelay(t, firstArgs)
	for _, rr := range []*relay{r2, r3} {
		waitFor(t, 60*time.Second, "/readyz 503 while the checkpoint cannot be read", func() bool {
			code, body := rr.getJSON("/readyz")
			return code == 503 && body["state"] == "reconnecting"
		})
		rr.waitMetric("cdc_relay_reconnects_total", 60*time.Second, func(v float64) bool { return v >= 2 })
	}
	if slotExists(t, conn, f.slot) || slotExists(t, conn, first.slot) {
		t.Fatal("a relay created its slot while its checkpoint could not be read")
	}
	if out := r2.Output(); !strings.Contains(out, "checkpoint is unknown, not absent") {
		t.Fatalf("the retries do not say the checkpoint is unknown:\n%s", tailString(out, 3000))
	}
	readable()
	out := wantGapExitOn(t, r2, f.slot, broker)
	r3.waitStreaming(90 * time.Second)
	if out := r3.Output(); !strings.Contains(out, "first start") {
		t.Fatalf("the first start is not logged as one:\n%s", tailString(out, 3000))
	}
	if code := r3.terminate(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	return out
}

// TestTwoClustersOneKafka: a second cluster with the same database and slot
// names on the same Kafka is not taken for the first one: without its own
// --relay-id it exits 3 naming both system identifiers; with one it streams.
func TestTwoClustersOneKafka(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	r := startRelay(t, f.args())
	r.waitStreaming(60 * time.Second)
	cc := consume(t, `^cdc-relay\.checkpoints$`)
	waitFor(t, 60*time.Second, "the first cluster's checkpoint", func() bool {
		for _, v := range checkpoints(t, cc) {
			if v.Slot == f.slot && v.Database == testDB {
				return true
			}
		}
		return false
	})
	if code := r.terminate(); code != 0 {
		t.Fatalf("exit code %d", code)
	}

	other, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	url, err := other.CreateDatabase(context.Background(), testDB)
	if err != nil {
		t.Fatal(err)
	}
	g := &fixture{t: t, pg: pgTarget{cluster: other, db: testDB, url: url}, name: f.name, table: f.table, slot: f.slot, publication: f.publication, topicPrefix: f.topicPrefix, dlq: f.dlq}
	g.exec(fmt.Sprintf(outboxDDL, "public."+g.table))
	sysA, sysB := systemID(t, f.connect()), systemID(t, g.connect())
	r2 := startRelay(t, g.args("--halt-linger", "0s"))
	if code := r2.wait(90 * time.Second); code != exitGap {
		t.Fatalf("exit code %d, want %d:\n%s", code, exitGap, tailString(r2.Output(), 3000))
	}
	out := r2.Output()
	if !strings.Contains(out, sysA) || !strings.Contains(out, sysB) || !strings.Contains(out, "--relay-id") || !strings.Contains(out, "slot recreate") {
		t.Fatalf("the message does not name both system identifiers (%s, %s), --relay-id and slot recreate:\n%s", sysA, sysB, tailString(out, 3000))
	}
	if slotExists(t, g.connect(), g.slot) {
		t.Fatal("the relay created a slot on the second cluster")
	}
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	r3 := startRelay(t, g.args("--relay-id", "cluster-b/"+testDB+"/"+g.slot))
	r3.waitStreaming(60 * time.Second)
	agg := uuidFor(9)
	ids, err := g.insertTx(context.Background(), g.connect(), []event{{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	c.waitIDs(60*time.Second, ids)
	if code := r3.terminate(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// TestForkBeyondCheckpoint: an asynchronous standby (PostgreSQL 17, failover
// slot synchronised, but the primary does not wait for the standby) is
// stopped; the relay publishes and checkpoints more; the primary dies and the
// stale standby is promoted. Its timeline forks before the checkpoint: Kafka
// holds events this database no longer has. The relay exits 3 naming the fork
// point and the checkpoint; slot recreate --accept-gap keeps the slot and
// records the fork, and run then streams.
func TestForkBeyondCheckpoint(t *testing.T) {
	t.Parallel()
	h := startHAPair(t, 17)
	ctx := context.Background()
	// Asynchronous: the primary sends logical changes the standby lacks.
	for _, q := range []string{"ALTER SYSTEM RESET synchronized_standby_slots", "SELECT pg_reload_conf()"} {
		if err := h.primary.Exec(ctx, "", q); err != nil {
			t.Fatal(err)
		}
	}
	f := newFixtureOn(t, h.target, "")
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	cc := consume(t, `^cdc-relay\.checkpoints$`)
	args := f.args("--slot-failover", "true", "--halt-linger", "0s")
	r := startRelay(t, args)
	r.waitStreaming(60 * time.Second)
	h.waitSlotSynced(t, f.slot)
	if err := h.standby.Stop("fast"); err != nil {
		t.Fatal(err)
	}
	conn := connectURL(t, h.primary.URL(testDB))
	agg := uuidFor(3)
	ids, err := f.insertTx(ctx, conn, []event{{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	c.waitIDs(60*time.Second, ids)
	after := currentLSN(t, conn)
	waitFor(t, 60*time.Second, "a checkpoint past the row the standby never received", func() bool {
		for _, v := range checkpoints(t, cc) {
			if v.Slot == f.slot && v.Kind == "checkpoint" && parseLSN(t, v.LSN) >= after {
				return true
			}
		}
		return false
	})
	if code := r.terminate(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	if err := h.primary.Stop("immediate"); err != nil {
		t.Fatal(err)
	}
	if err := h.standby.Start(); err != nil {
		t.Fatal(err)
	}
	if err := h.standby.Promote(); err != nil {
		t.Fatal(err)
	}
	f.pg.cluster = h.standby

	r2 := startRelay(t, args)
	if code := r2.wait(90 * time.Second); code != exitGap {
		t.Fatalf("exit code %d, want %d:\n%s", code, exitGap, tailString(r2.Output(), 3000))
	}
	out := r2.Output()
	if !strings.Contains(out, "forked off timeline 1 at") || !strings.Contains(out, "Kafka holds events of a timeline this database no longer has") {
		t.Fatalf("the exit message does not name the fork:\n%s", tailString(out, 3000))
	}
	code, out := runCommand(commandArgs("check", args))
	if code != exitFailed || !strings.Contains(out, "FAIL  the server's timeline 2 forked off timeline 1") {
		t.Fatalf("check = %d, want a FAIL for the fork:\n%s", code, out)
	}
	code, out = runCommand(append([]string{"slot", "recreate", "--accept-gap", "--reason", "fork drill"}, args[1:]...))
	if code != 0 || !strings.Contains(out, "kept slot "+f.slot) || !strings.Contains(out, "gap recorded") {
		t.Fatalf("slot recreate after the fork = %d:\n%s", code, out)
	}
	r3 := startRelay(t, args)
	r3.waitStreaming(60 * time.Second)
	agg = uuidFor(4)
	ids, err = f.insertTx(ctx, f.connect(), []event{{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, 2)}})
	if err != nil {
		t.Fatal(err)
	}
	c.waitIDs(60*time.Second, ids)
	if code := r3.terminate(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}
