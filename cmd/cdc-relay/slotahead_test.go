package main

// The slot follows the checkpoint: the relay confirms to PostgreSQL only
// what a durable checkpoint covers, so a slot found ahead of the checkpoint
// was made or moved outside the relay, and the rows in between were never
// read. Each test reproduces the loss first (the rows are not in Kafka),
// then shows exit 3, the repair as printed, and every row back.

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/internal/testtier"
)

// TestSlotAheadOfCheckpoint: a slot created again by hand (after a kill -9,
// and after a clean stop under exactly-once) or advanced by hand past
// undelivered rows.
func TestSlotAheadOfCheckpoint(t *testing.T) {
	testtier.Need(t)
	t.Parallel()
	t.Run("made by hand after a crash", func(t *testing.T) { testSlotAhead(t, kafkaSink, killRelay, recreateSlotByHand) })
	t.Run("made by hand after a clean stop, exactly-once", func(t *testing.T) {
		testSlotAhead(t, kafkaSink, stopRelay, recreateSlotByHand, "--delivery", "exactly-once")
	})
	t.Run("advanced by hand", func(t *testing.T) { testSlotAhead(t, kafkaSink, stopRelay, advanceSlotByHand) })
}

// recreateSlotByHand drops f's slot, runs insert, and creates the slot
// again, as an operator would. After a kill -9 the server ends the
// walsender a moment later (later still on a busy machine): the operator
// drops the slot once it is free.
func recreateSlotByHand(f *fixture, insert func()) {
	conn := f.connect()
	waitFor(f.t, 30*time.Second, "the slot to be free", func() bool {
		var active bool
		err := conn.QueryRow(context.Background(), "SELECT active FROM pg_replication_slots WHERE slot_name = $1", f.slot).Scan(&active)
		return err == nil && !active
	})
	f.exec("SELECT pg_drop_replication_slot($1)", f.slot)
	insert()
	f.exec("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", f.slot)
}

// advanceSlotByHand runs insert and advances f's slot past it by hand.
func advanceSlotByHand(f *fixture, insert func()) {
	insert()
	advanceSlot(f.t, f)
}

func killRelay(_ *testing.T, r *relay) { r.kill() }

// stopRelay stops r with SIGTERM, which must end it with exit 0.
func stopRelay(t *testing.T, r *relay) {
	if code := r.terminate(); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
}

// sinkUnderTest is the broker a test body runs the relay on: its name in
// the relay's messages, the relay's flags, where slot recreate records a
// gap, and an independent reader of the events that arrived.
type sinkUnderTest struct {
	broker string
	args   func(extra ...string) []string
	gaps   string
	// waitIDs waits until every id of want arrived.
	waitIDs func(timeout time.Duration, want []int64)
	// seen counts the deliveries of each id so far.
	seen func() map[string]int
	// deadLettered says whether row id of table is a dead letter.
	deadLettered func(table string, id int64) bool
	// misrouted names where event id went, if not where its events go;
	// "" if it went there.
	misrouted func(id int64) string
}

// kafkaSink runs f's relay on Kafka with a checkpoint topic of its own,
// read by a franz-go consumer.
func kafkaSink(t *testing.T, f *fixture) sinkUnderTest {
	ckpt := "t" + f.name + ".checkpoints"
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	return sinkUnderTest{
		broker: "Kafka",
		args: func(extra ...string) []string {
			return f.args(append([]string{"--checkpoint-topic", ckpt}, extra...)...)
		},
		gaps:    ckpt,
		waitIDs: func(timeout time.Duration, want []int64) { c.waitIDs(timeout, want) },
		seen:    func() map[string]int { return distinctIDs(c.records()) },
		deadLettered: func(table string, id int64) bool {
			for _, rec := range c.records() {
				if rec.Topic == f.dlq && rec.Headers["table"] == table && strings.Contains(string(rec.Value), fmt.Sprintf(`"id":"%d"`, id)) {
					return true
				}
			}
			return false
		},
		misrouted: func(id int64) string {
			for _, rec := range c.records() {
				if rec.Headers["id"] == fmt.Sprint(id) && rec.Topic != f.topic("Order") {
					return rec.Topic
				}
			}
			return ""
		},
	}
}

func testSlotAhead(t *testing.T, newSink func(*testing.T, *fixture) sinkUnderTest, stop func(*testing.T, *relay), move func(f *fixture, insert func()), extra ...string) {
	f := newFixture(t, "")
	s := newSink(t, f)
	args := s.args(append([]string{"--halt-linger", "0s"}, extra...)...)
	conn := f.connect()

	r := startRelay(t, args)
	r.waitStreaming(60 * time.Second)
	ids := insertOrders(t, f, conn, 1, 2)
	s.waitIDs(60*time.Second, ids)
	after := currentLSN(t, conn)
	waitFor(t, 60*time.Second, "the row confirmed", func() bool { return f.confirmedFlush() >= after })
	stop(t, r)
	before := f.confirmedFlush()

	var missed []int64
	move(f, func() { missed = insertOrders(t, f, conn, 2, 12) })
	if got := f.confirmedFlush(); got <= before {
		t.Fatalf("the slot is at %X, not ahead of %X: the test does not move it", got, before)
	}
	slotAt := lsnString(f.confirmedFlush())

	code, out := runCommand(commandArgs("check", args))
	if code != exitFailed || !strings.Contains(out, "ahead of the relay's checkpoint") {
		t.Fatalf("check = %d, want a FAIL for the slot ahead of the checkpoint:\n%s", code, out)
	}
	out = wantGapExitOn(t, startRelay(t, args), f.slot, s.broker)
	for _, want := range []string{"ahead of the relay's checkpoint", slotAt, "last commit at"} {
		if !strings.Contains(out, want) {
			t.Fatalf("the exit message lacks %q:\n%s", want, tailString(out, 3000))
		}
	}
	if strings.Contains(out, "confirmed_lsn=0/0") {
		t.Fatalf("the halt line says confirmed_lsn=0/0 beside the checkpoint's LSN:\n%s", tailString(out, 3000))
	}
	// A supervisor's restart halts the same way.
	wantGapExitOn(t, startRelay(t, args), f.slot, s.broker)

	sr := append([]string{"slot", "recreate", "--accept-gap", "--reason", "INC-7"}, args[1:]...)
	code, out = runCommand(sr)
	if code != 0 || !strings.Contains(out, "kept slot "+f.slot) || !strings.Contains(out, "gap recorded in "+s.gaps) {
		t.Fatalf("slot recreate = %d:\n%s", code, out)
	}
	if got := lsnString(f.confirmedFlush()); got != slotAt {
		t.Fatalf("slot recreate moved the slot from %s to %s: it must keep it", slotAt, got)
	}
	m := regexp.MustCompile(`cdc-relay replay --since (\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("slot recreate does not say which replay to run:\n%s", out)
	}

	// The relay streams again, from the kept slot.
	r3 := startRelay(t, args)
	r3.waitStreaming(60 * time.Second)
	later := insertOrders(t, f, conn, 12, 13)
	s.waitIDs(60*time.Second, later)
	if code := r3.terminate(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	seen := s.seen()
	for _, id := range missed {
		if seen[fmt.Sprint(id)] != 0 {
			t.Fatalf("row %d reached %s without a replay: the test does not reproduce the loss", id, s.broker)
		}
	}
	code, out = runCommand(append([]string{"replay", "--since", m[1]}, args[1:]...))
	if code != 0 {
		t.Fatalf("replay --since %s = %d:\n%s", m[1], code, out)
	}
	s.waitIDs(60*time.Second, missed)
}

// TestUpgradeFromUnformattedCheckpoint: a checkpoint of the release before
// the format field may trail the slot by any idle period; the relay trusts
// it and streams (no exit 3), writes a checkpoint of the new format, and
// from then on a slot moved by hand is caught. In both delivery modes.
func TestUpgradeFromUnformattedCheckpoint(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"at-least-once", "exactly-once"} {
		t.Run(mode, func(t *testing.T) {
			f := newFixture(t, "")
			ckpt := "t" + f.name + ".checkpoints"
			args := f.args("--checkpoint-topic", ckpt, "--halt-linger", "0s", "--delivery", mode)
			c := consume(t, "^"+f.topicPrefix+`\..*`)
			conn := f.connect()

			r := startRelay(t, args)
			r.waitStreaming(60 * time.Second)
			old := lsnString(currentLSN(t, conn))
			ids := insertOrders(t, f, conn, 1, 2)
			c.waitIDs(60*time.Second, ids)
			after := currentLSN(t, conn)
			waitFor(t, 60*time.Second, "the row confirmed", func() bool { return f.confirmedFlush() >= after })
			if code := r.terminate(); code != 0 {
				t.Fatalf("exit code %d", code)
			}
			// What the release before wrote: no format, behind the slot
			// (it confirmed idle positions without a checkpoint).
			relayID := systemID(t, conn) + "/" + testDB + "/" + f.slot
			writeRawCheckpoint(t, ckpt, relayID, map[string]any{"kind": "checkpoint", "relay_id": relayID, "confirmed_lsn": old, "timeline": 1,
				"system_identifier": systemID(t, conn), "database": testDB, "slot": f.slot, "publication": f.publication,
				"tables": []string{"public." + f.table}, "version": "v0.old", "written_at": time.Now().UTC()})

			r2 := startRelay(t, args)
			r2.waitStreaming(60 * time.Second)
			ids = insertOrders(t, f, conn, 2, 5)
			c.waitIDs(60*time.Second, ids)
			cc := consume(t, "^"+regexp.QuoteMeta(ckpt)+"$")
			waitFor(t, 60*time.Second, "a checkpoint of the new format", func() bool {
				for _, rec := range cc.records() {
					var v struct {
						Format int `json:"format"`
					}
					if json.Unmarshal(rec.Value, &v) == nil && v.Format == 2 && rec.Key == relayID {
						return true
					}
				}
				return false
			})
			if code := r2.terminate(); code != 0 {
				t.Fatalf("exit code %d after the upgrade:\n%s", code, tailString(r2.Output(), 3000))
			}
			if strings.Contains(r2.Output(), "ahead of the relay's checkpoint") {
				t.Fatalf("the upgrade was taken for a slot moved by hand:\n%s", tailString(r2.Output(), 3000))
			}

			// Now the checkpoint is of the new format: a slot moved by hand is caught.
			insertOrders(t, f, conn, 5, 7)
			advanceSlot(t, f)
			out := wantGapExit(t, startRelay(t, args), f.slot)
			if !strings.Contains(out, "ahead of the relay's checkpoint") {
				t.Fatalf("the exit message does not say the slot is ahead:\n%s", tailString(out, 3000))
			}
		})
	}
}

// TestNoFalseAheadExit: an idle outbox on a busy database, killed and
// restarted again and again, in both delivery modes: the slot follows the
// WAL (through checkpoints of idle positions) and never passes the
// checkpoint, so no restart exits 3.
func TestNoFalseAheadExit(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"at-least-once", "exactly-once"} {
		t.Run(mode, func(t *testing.T) { testNoFalseAhead(t, kafkaSink, "--delivery", mode) })
	}
}

// testNoFalseAhead is TestNoFalseAheadExit's body on a sink, with extra
// flags.
func testNoFalseAhead(t *testing.T, newSink func(*testing.T, *fixture) sinkUnderTest, extra ...string) {
	f := newFixture(t, "")
	f.exec(fmt.Sprintf("CREATE TABLE busy_%s (id serial PRIMARY KEY, v text)", f.name))
	s := newSink(t, f)
	args := s.args(append([]string{"--halt-linger", "0s"}, extra...)...)
	conn := f.connect()
	ctx := context.Background()
	r := startRelay(t, args)
	for i := range 3 {
		r.waitStreaming(60 * time.Second)
		if _, err := conn.Exec(ctx, fmt.Sprintf("INSERT INTO busy_%s (v) SELECT repeat('z', 500) FROM generate_series(1, 2000)", f.name)); err != nil {
			t.Fatal(err)
		}
		end := currentLSN(t, conn)
		waitFor(t, 60*time.Second, "the slot to follow the WAL with an idle outbox", func() bool { return f.confirmedFlush() >= end })
		ids := insertOrders(t, f, conn, 10*i+1, 10*i+3)
		s.waitIDs(60*time.Second, ids)
		r.kill()
		if out := r.Output(); strings.Contains(out, "ahead of the relay's checkpoint") {
			t.Fatalf("round %d: a false exit 3:\n%s", i, tailString(out, 3000))
		}
		r = startRelay(t, args)
	}
	r.waitStreaming(60 * time.Second)
	if code := r.terminate(); code != 0 {
		t.Fatalf("exit code %d:\n%s", code, tailString(r.Output(), 3000))
	}
}

// TestCheckpointOutageHoldsWAL: with Kafka down for over a minute while
// another table is busy, the checkpoint cannot be written, so nothing is
// confirmed past the last one: the slot holds its WAL, and /readyz says
// degraded naming the checkpoint. The outbox gets rows during the outage
// too. When Kafka is back every row arrives and the slot catches up.
func TestCheckpointOutageHoldsWAL(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	f.ownBroker() // stopped below
	f.exec(fmt.Sprintf("CREATE TABLE busy_%s (id serial PRIMARY KEY, v text)", f.name))
	args := f.args("--checkpoint-topic", "t"+f.name+".checkpoints")
	conn := f.connect()
	ctx := context.Background()
	r := startRelay(t, args)
	r.waitStreaming(60 * time.Second)
	c := f.consume("^" + f.topicPrefix + `\..*`)
	first := insertOrders(t, f, conn, 1, 2)
	c.waitIDs(60*time.Second, first)
	confirmed := currentLSN(t, conn)
	waitFor(t, 60*time.Second, "the row confirmed", func() bool { return f.confirmedFlush() >= confirmed })

	busy := func() {
		t.Helper()
		if _, err := conn.Exec(ctx, fmt.Sprintf("INSERT INTO busy_%s (v) SELECT repeat('z', 500) FROM generate_series(1, 200)", f.name)); err != nil {
			t.Fatal(err)
		}
	}
	restart := f.stopBroker()
	began := time.Now()
	// The outbox is idle: only the checkpoint's writes fail.
	var reason string
	waitFor(t, 60*time.Second, "/readyz degraded by the checkpoint", func() bool {
		busy()
		code, body := r.getJSON("/readyz")
		reason = body["reason"]
		return code == 503 && strings.Contains(reason, "checkpoint")
	})
	t.Logf("readyz during the outage: %s", reason)
	held := f.confirmedFlush()
	var rows []int64
	pace := time.NewTicker(500 * time.Millisecond) // the writers' pace
	defer pace.Stop()
	for i := 0; time.Since(began) < 70*time.Second; i++ {
		<-pace.C
		busy()
		if i%10 == 0 {
			rows = append(rows, insertOrders(t, f, conn, 100+i, 101+i)...)
		}
		if got := f.confirmedFlush(); got != held {
			t.Fatalf("the slot moved from %X to %X while Kafka was down: a confirm without a durable checkpoint", held, got)
		}
	}
	end := currentLSN(t, conn)
	if end-held < 4<<20 {
		t.Fatalf("only %d bytes of WAL during the outage", end-held)
	}
	restart()
	c.waitIDs(120*time.Second, append(first, rows...))
	waitFor(t, 120*time.Second, "the slot to catch up after the outage", func() bool { return f.confirmedFlush() >= end })
	waitFor(t, 60*time.Second, "/readyz ready again", func() bool {
		code, _ := r.getJSON("/readyz")
		return code == 200
	})
	if code := r.terminate(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// advanceSlot moves the slot by hand to the WAL written so far. The test
// cluster commits asynchronously, and pg_replication_slot_advance goes no
// further than the WAL flushed: it is called again until the WAL writer
// has flushed the rows.
func advanceSlot(t *testing.T, f *fixture) {
	t.Helper()
	target := currentLSN(t, f.connect())
	waitFor(t, 30*time.Second, "the slot advanced by hand past the rows", func() bool {
		f.exec("SELECT pg_replication_slot_advance($1, pg_current_wal_lsn())", f.slot)
		return f.confirmedFlush() >= target
	})
}

// writeRawCheckpoint produces value under key to the checkpoint topic, as a
// relay of another release would.
func writeRawCheckpoint(t *testing.T, topic, key string, value map[string]any) {
	t.Helper()
	b, err := json.Marshal(value)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(key), Value: b}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// lsnString prints an LSN as PostgreSQL does.
func lsnString(l uint64) string { return fmt.Sprintf("%X/%X", l>>32, uint32(l)) }

// TestCheckpointOfAnotherSlot: a checkpoint under --relay-id that names
// another slot, and an explicit --relay-id that has none while the slot's
// checkpoint is under another id, are exit 2 naming --relay-id: comparing
// the slot with the wrong checkpoint, or with none, would hide a gap. The
// exit is logged as a configuration error, not as a halt.
func TestCheckpointOfAnotherSlot(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	relayID := "orders-" + f.name
	args := f.args("--checkpoint-topic", "t"+f.name+".checkpoints", "--halt-linger", "0s", "--relay-id", relayID)
	r := startRelay(t, args)
	r.waitStreaming(60 * time.Second)
	if code := r.terminate(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	withFlag := func(name, value string) []string {
		out := append([]string(nil), args...)
		for i := range out {
			if out[i] == name {
				out[i+1] = value
			}
		}
		return out
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"another slot", withFlag("--slot", "other_"+f.name), "--relay-id " + relayID + ": its checkpoint is of slot \"" + f.slot + "\""},
		{"another relay id", withFlag("--relay-id", "renamed-"+f.name), "has one under relay id " + relayID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := startRelay(t, tc.args)
			if code := r.wait(60 * time.Second); code != exitConfig {
				t.Fatalf("exit code %d, want %d:\n%s", code, exitConfig, tailString(r.Output(), 3000))
			}
			out := r.Output()
			if !strings.Contains(out, tc.want) || !strings.Contains(out, "configuration error") || strings.Contains(out, "msg=halt") {
				t.Fatalf("want %q, logged as a configuration error and not as a halt:\n%s", tc.want, tailString(out, 3000))
			}
		})
	}
	f.exec("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", "other_"+f.name)
}
