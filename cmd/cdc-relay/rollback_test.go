package main

// docs/MIGRATING.md section 4, against a real Debezium: going back from the
// relay to Debezium without a gap, while a writer commits continuously.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/debeziumtest"
)

// TestDebeziumRollback goes back to Debezium in the two ways
// docs/MIGRATING.md section 4 gives. relay-slot: Debezium ran on its slot,
// the relay took it over (section 2 A, the connector stopped with PUT
// /connectors/<name>/stop), the connector's stored offsets were deleted
// (DELETE /connectors/<name>/offsets), and after the relay stops the
// connector is resumed on the same slot with snapshot.mode=no_data.
// new-slot: the relay runs on its own slot, a slot for Debezium is created
// while the relay still runs, and the relay stops once its slot confirmed
// past the new slot's start. Either way every id must reach Kafka, an
// aggregate keeps its partition, and an id comes twice only when it was
// committed after the position the next publisher started from.
func TestDebeziumRollback(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"relay-slot", "new-slot"} {
		t.Run(mode, func(t *testing.T) { testDebeziumRollback(t, mode) })
	}
}

func testDebeziumRollback(t *testing.T, mode string) {
	f := newFixture(t, "")
	slot, publication, topicPrefix := "debezium_"+f.name, "dbz_publication_"+f.name, "rb"+f.name
	t.Cleanup(func() {
		dropSlots(slot)
		f.exec("DROP PUBLICATION IF EXISTS " + publication)
	})
	reader := readTopics(t, "^"+topicPrefix+`\.`)
	ctx := context.Background()
	w := startConnect(t)
	name := "rollback-" + f.name
	sf := *f // the fixture's database, Debezium's slot
	sf.slot = slot
	// A checkpoint topic of its own: the shared one can hold a transaction
	// another test's killed exactly-once relay left open.
	relayArgs := []string{"--topic-template", topicPrefix + ".{aggregate_type}", "--key-format", "string", "--value-format", "json", "--builtin-headers", "id",
		"--checkpoint-topic", "ckpt-" + f.name}
	var writer *cutoverWriter
	var r *relay
	// starts are the positions each publisher after the first started
	// from: an id committed after one of them may come twice.
	var starts []uint64

	switch mode {
	case "relay-slot":
		dc := dbzConnector(f, name, slot, publication, topicPrefix, debeziumtest.StringConverter)
		if err := w.AddConnector(ctx, dc); err != nil {
			t.Fatal(err)
		}
		if err := w.WaitRunning(ctx, name, dbzWait); err != nil {
			t.Fatal(err)
		}
		waitFor(t, dbzWait, "Debezium's slot "+slot, sf.slotActive)
		writer = startCutoverWriter(t, f)
		waitFor(t, dbzWait, "Debezium to deliver 100 rows", func() bool {
			if err := w.Check(ctx, name); err != nil {
				t.Fatal(err)
			}
			return len(recordsByID(reader.Records(), topicPrefix)) >= 100
		})
		initial := sf.confirmedFlush()
		waitFor(t, dbzWait, "Debezium to confirm a position", func() bool { return sf.confirmedFlush() > initial })
		// Section 2 A: the relay waits as a standby, the connector stops.
		r = startRelay(t, f.args(append([]string{"--slot", slot, "--publication", publication, "--allow-extra-tables"}, relayArgs...)...))
		// The relay starts at what Debezium confirmed when it stopped, at
		// least this (it may confirm more while stopping); once the relay
		// streams, the slot shows the relay's own progress.
		starts = append(starts, sf.confirmedFlush())
		if err := w.StopConnector(ctx, name, dbzWait); err != nil {
			t.Fatal(err)
		}
		r.waitStreaming(dbzWait)
		offs, err := w.Offsets(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if len(offs) == 0 || offs[0]["lsn"] == nil {
			t.Fatalf("the stopped connector's stored offsets are %v, want Debezium's lsn", offs)
		}
		msg, err := w.DeleteOffsets(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("DELETE /connectors/%s/offsets: %q", name, msg)
		if !strings.Contains(msg, "reset successfully") {
			t.Errorf("DELETE offsets answered %q, want Connect's \"... reset successfully\"", msg)
		}
		if offs, err := w.Offsets(ctx, name); err != nil || len(offs) != 0 {
			t.Fatalf("offsets after DELETE (%q): %v, %v; want none", msg, offs, err)
		}
		// The way that does not work: a deleted connector has no offsets
		// to delete.
		var re *debeziumtest.RESTError
		if _, err := w.DeleteOffsets(ctx, "gone-"+f.name); !errors.As(err, &re) || re.Status != http.StatusNotFound {
			t.Errorf("DELETE offsets of a connector that does not exist: %v, want 404", err)
		}
		stoppedAt := len(writer.committed())
		waitFor(t, dbzWait, "100 rows committed while the relay runs", func() bool {
			failIfExited(t, r)
			return len(writer.committed()) >= stoppedAt+100
		})
		// The rollback: the relay stops and releases the slot, the
		// connector resumes without offsets from the slot's position.
		if code := r.terminate(); code != 0 {
			t.Fatalf("relay exited with %d:\n%s", code, tailString(r.Output(), 3000))
		}
		waitFor(t, 60*time.Second, "the relay to release the slot", func() bool { return !sf.slotActive() })
		starts = append(starts, sf.confirmedFlush())
		if err := w.ResumeConnector(ctx, name); err != nil {
			t.Fatal(err)
		}
		if err := w.WaitRunning(ctx, name, dbzWait); err != nil {
			t.Fatal(err)
		}
	case "new-slot":
		f.exec(fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE public.%s WITH (publish = 'insert')", f.publication, f.table))
		r = startRelay(t, f.args(relayArgs...))
		r.waitStreaming(dbzWait)
		writer = startCutoverWriter(t, f)
		waitFor(t, dbzWait, "the relay to deliver 100 rows", func() bool {
			failIfExited(t, r)
			return len(recordsByID(reader.Records(), topicPrefix)) >= 100
		})
		// Section 4 B: Debezium's slot is created while the relay runs,
		// the connector starts on it without offsets.
		var lsn string
		if err := f.connect().QueryRow(ctx, "SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput')", slot).Scan(&lsn); err != nil {
			t.Fatal(err)
		}
		start := parseLSN(t, lsn)
		starts = append(starts, start)
		dc := dbzConnector(f, name, slot, f.publication, topicPrefix, debeziumtest.StringConverter)
		dc.PublicationAutocreate = "disabled"
		if err := w.AddConnector(ctx, dc); err != nil {
			t.Fatal(err)
		}
		if err := w.WaitRunning(ctx, name, dbzWait); err != nil {
			t.Fatal(err)
		}
		waitFor(t, dbzPass, "the relay's slot to confirm past Debezium's slot's start "+lsnText(start), func() bool {
			failIfExited(t, r)
			return f.confirmedFlush() >= start
		})
		if code := r.terminate(); code != 0 {
			t.Fatalf("relay exited with %d:\n%s", code, tailString(r.Output(), 3000))
		}
	}
	stoppedAt := len(writer.committed())
	waitFor(t, dbzWait, "100 rows committed after the relay stopped", func() bool {
		if err := w.Check(ctx, name); err != nil {
			t.Fatal(err)
		}
		return len(writer.committed()) >= stoppedAt+100
	})
	ids := writer.finish(t)
	var recs []debeziumtest.Record
	waitFor(t, dbzWait, fmt.Sprintf("all %d ids in Kafka", len(ids)), func() bool {
		if err := w.Check(ctx, name); err != nil {
			t.Fatal(err)
		}
		recs = reader.Records()
		return hasAll(recordsByID(recs, topicPrefix), ids)
	})

	partitionOf := map[string]int32{}
	copies := map[string]int{}
	for _, rec := range recs {
		id, _ := rec.Header("id")
		copies[string(id)]++
		if p, ok := partitionOf[string(rec.Key)]; ok && p != rec.Partition {
			t.Errorf("aggregate %q in partition %d and %d", rec.Key, p, rec.Partition)
		}
		partitionOf[string(rec.Key)] = rec.Partition
	}
	dups := 0
	for _, id := range ids {
		switch n := copies[id]; {
		case n == 0:
			t.Errorf("id %s never reached Kafka", id)
		case n > len(starts)+1:
			t.Errorf("id %s in Kafka %d times, with %d publishers after the first", id, n, len(starts))
		case n > 1:
			dups++
			if after := writer.after[id]; after <= starts[0] {
				t.Errorf("id %s (committed before %s) came %d times, though every publisher after the first started at or after %s", id, lsnText(after), n, lsnText(starts[0]))
			}
		}
	}
	if mode == "relay-slot" {
		// Deleting the connector does not delete its offsets, and then
		// they can no longer be deleted: a connector created again under
		// the name resumes from them.
		if err := w.DeleteConnector(ctx, name); err != nil {
			t.Fatal(err)
		}
		var re *debeziumtest.RESTError
		if _, err := w.DeleteOffsets(ctx, name); !errors.As(err, &re) || re.Status != http.StatusNotFound {
			t.Errorf("DELETE offsets of the deleted connector: %v, want 404", err)
		}
		if err := w.AddConnector(ctx, dbzConnector(f, name, slot, publication, topicPrefix, debeziumtest.StringConverter)); err != nil {
			t.Fatal(err)
		}
		if err := w.WaitRunning(ctx, name, dbzWait); err != nil {
			t.Fatal(err)
		}
		if offs, err := w.Offsets(ctx, name); err != nil || len(offs) == 0 || offs[0]["lsn"] == nil {
			t.Errorf("a connector created again under %s has offsets %v (%v), want the deleted one's", name, offs, err)
		}
		forwardAgain(t, f, w, name, sf, reader, topicPrefix, relayArgs, starts[len(starts)-1])
	}
	starting := make([]string, len(starts))
	for i, s := range starts {
		starting[i] = lsnText(s)
	}
	t.Logf("%s: %d ids, %d records, %d duplicates; publishers after the first started at %v", mode, len(ids), len(recs), dups, starting)
}

// forwardAgain is the round trip's second half (docs/MIGRATING.md, "Coming
// forward again"): Debezium advanced the slot past the relay's checkpoint,
// so the relay's next start on it exits 3 (the slot was moved outside the
// relay); slot recreate --accept-gap keeps the slot and records the gap,
// and the relay streams from where Debezium stopped.
func forwardAgain(t *testing.T, f *fixture, w *debeziumtest.Worker, name string, sf fixture, reader *debeziumtest.Reader, topicPrefix string, relayArgs []string, relayStop uint64) {
	t.Helper()
	ctx := context.Background()
	waitFor(t, dbzWait, "Debezium to confirm past the relay's last position "+lsnText(relayStop), func() bool {
		if err := w.Check(ctx, name); err != nil {
			t.Fatal(err)
		}
		return sf.confirmedFlush() > relayStop
	})
	if err := w.StopConnector(ctx, name, dbzWait); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "Debezium to release the slot", func() bool { return !sf.slotActive() })
	args := f.args(append([]string{"--slot", sf.slot, "--publication", "dbz_publication_" + f.name, "--allow-extra-tables", "--halt-linger", "0s"}, relayArgs...)...)
	out := wantGapExit(t, startRelay(t, args), sf.slot)
	if !strings.Contains(out, "ahead of the relay's checkpoint") {
		t.Fatalf("the relay's start after the round trip does not say the slot is ahead:\n%s", tailString(out, 3000))
	}
	code, out := runCommand(append([]string{"slot", "recreate", "--accept-gap", "--reason", "forward again after a rollback to Debezium"}, args[1:]...))
	if code != 0 || !strings.Contains(out, "kept slot "+sf.slot) {
		t.Fatalf("slot recreate = %d:\n%s", code, out)
	}
	r := startRelay(t, args)
	r.waitStreaming(dbzWait)
	agg := uuidFor(9001)
	ids, err := f.insertTx(ctx, f.connect(), []event{{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, 9001)}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the relay to publish again after the round trip", func() bool {
		failIfExited(t, r)
		return len(recordsByID(reader.Records(), topicPrefix)[fmt.Sprint(ids[0])]) > 0
	})
	if code := r.terminate(); code != 0 {
		t.Fatalf("relay exited with %d:\n%s", code, tailString(r.Output(), 3000))
	}
}
