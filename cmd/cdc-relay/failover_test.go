package main

// Failover slots (--slot-failover) and the checks around them.

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	slotpkg "github.com/cdc-relay/cdc-relay/slot"
)

// TestSlotFailoverTooOld: --slot-failover true against PostgreSQL 15 is a
// configuration error: run exits 2 naming the server version, and check
// fails saying the same.
func TestSlotFailoverTooOld(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	r := startRelay(t, f.args("--slot-failover", "true"))
	if code := r.wait(60 * time.Second); code != exitConfig {
		t.Fatalf("exit code %d, want %d:\n%s", code, exitConfig, r.Output())
	}
	out := r.Output()
	if !strings.Contains(out, "--slot-failover true") || !strings.Contains(out, "PostgreSQL 15.") || !strings.Contains(out, "17") {
		t.Fatalf("the error does not name the flag, the server version and the version needed:\n%s", tailString(out, 3000))
	}
	if confirmed, _ := f.slotState(); confirmed != 0 {
		t.Fatalf("the relay created slot %s although it refused to start", f.slot)
	}
	code, out := runCommand(commandArgs("check", f.args("--slot-failover", "true")))
	if code != exitFailed || !strings.Contains(out, "FAIL  --slot-failover true") || !strings.Contains(out, "PostgreSQL 15.") {
		t.Fatalf("check = %d, want a failure naming the flag and the version:\n%s", code, out)
	}
	code, out = runCommand(commandArgs("check", f.args()))
	if code != 0 || !strings.Contains(out, "no failover slots") {
		t.Fatalf("check with the default auto on 15 = %d, want a pass that warns the slot will not survive a promotion:\n%s", code, out)
	}
}

// TestSlotFailover17: on PostgreSQL 17 the default (auto) creates a failover
// slot and turns an existing slot into one; /metrics and status show it;
// check warns that synchronized_standby_slots is not set, and with
// --slot-failover false that the slot won't survive a promotion. "created"
// and "converted" run at-least-once and exactly-once (delivery_test.go), in
// which an event then arrives exactly once, read_committed.
func TestSlotFailover17(t *testing.T) {
	t.Parallel()
	target := startTarget(t, 17, nil)
	failoverOf := func(f *fixture) bool {
		t.Helper()
		var on bool
		if err := f.connect().QueryRow(context.Background(), "SELECT failover FROM pg_replication_slots WHERE slot_name = $1", f.slot).Scan(&on); err != nil {
			t.Fatal(err)
		}
		return on
	}
	// onceThrough checks, under exactly-once, that an event committed now
	// is read exactly once by a read_committed consumer.
	onceThrough := func(t *testing.T, f *fixture, c *consumer, d delivery) {
		t.Helper()
		if !d.once() {
			return
		}
		agg := uuidFor(40)
		conn := f.connect()
		ids, err := f.insertTx(context.Background(), conn, []event{{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, 1)}})
		if err != nil {
			t.Fatal(err)
		}
		c.waitIDs(60*time.Second, ids)
		end := currentLSN(t, conn)
		waitFor(t, 30*time.Second, "the slot to confirm past the event", func() bool { return f.confirmedFlush() >= end })
		checkOnce(t, c.records(), idStrings(ids))
	}
	t.Run("created", func(t *testing.T) {
		eachDelivery(t, false, func(t *testing.T, d delivery) {
			f := newFixtureOn(t, target, "")
			c := d.consume(t, "^"+f.topicPrefix+`\..*`)
			code, out := runCommand(commandArgs("check", d.with(f.args())))
			if code != 0 || !strings.Contains(out, "creates slot "+f.slot+" as a failover slot") || !strings.Contains(out, "WARN  synchronized_standby_slots is not set") {
				t.Fatalf("check = %d, want a pass announcing a failover slot and warning about synchronized_standby_slots:\n%s", code, out)
			}
			r := startRelay(t, d.with(f.args()))
			r.waitStreaming(60 * time.Second)
			r.waitMetric("cdc_relay_slot_failover", 10*time.Second, func(v float64) bool { return v == 1 })
			if !failoverOf(f) {
				t.Fatal("pg_replication_slots.failover is false for the slot the relay created")
			}
			onceThrough(t, f, c, d)
			code, out = runCommand([]string{"status", "--pg-url", f.pg.url, "--slot", f.slot, "--json"})
			var st slotpkg.Status
			if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil || st.Failover == nil || !*st.Failover {
				t.Fatalf("status = %d, failover %v, want true:\n%s", code, st.Failover, out)
			}
			if code := r.terminate(); code != 0 {
				t.Fatalf("exit code %d", code)
			}
			// A physical slot no standby uses: set only while no relay runs, as
			// the walsender would wait for that standby.
			sb := "sb_" + f.name
			f.exec("SELECT pg_create_physical_replication_slot($1)", sb)
			f.exec("ALTER SYSTEM SET synchronized_standby_slots = '" + sb + "'")
			f.exec("SELECT pg_reload_conf()")
			defer func() {
				f.exec("ALTER SYSTEM RESET synchronized_standby_slots")
				f.exec("SELECT pg_reload_conf()")
				f.exec("SELECT pg_drop_replication_slot($1)", sb)
			}()
			waitFor(t, 10*time.Second, "check to see synchronized_standby_slots", func() bool {
				_, out = runCommand(commandArgs("check", f.args()))
				return strings.Contains(out, "ok    synchronized_standby_slots = "+sb)
			})
		})
	})
	t.Run("converted", func(t *testing.T) {
		eachDelivery(t, true, func(t *testing.T, d delivery) {
			f := newFixtureOn(t, target, "")
			// The publication first, as MIGRATING.md says of a slot made by
			// hand: pgoutput reads it as of each change, and the sibling
			// subtest writes to the same cluster meanwhile.
			f.exec("CREATE PUBLICATION " + f.publication + " FOR TABLE public." + f.table + " WITH (publish = 'insert')")
			f.exec("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", f.slot)
			if failoverOf(f) {
				t.Fatal("test setup: the slot is a failover slot already")
			}
			c := d.consume(t, "^"+f.topicPrefix+`\..*`)
			r := startRelay(t, d.with(f.args()))
			r.waitStreaming(60 * time.Second)
			r.waitMetric("cdc_relay_slot_failover", 10*time.Second, func(v float64) bool { return v == 1 })
			if !failoverOf(f) {
				t.Fatal("the relay did not turn the existing slot into a failover slot")
			}
			if !strings.Contains(r.Output(), "turned into a failover slot") {
				t.Fatalf("the relay did not log the conversion:\n%s", tailString(r.Output(), 3000))
			}
			onceThrough(t, f, c, d)
		})
	})
	t.Run("false", func(t *testing.T) {
		f := newFixtureOn(t, target, "")
		code, out := runCommand(commandArgs("check", f.args("--slot-failover", "false")))
		if code != 0 || !strings.Contains(out, "won't survive a promotion") {
			t.Fatalf("check --slot-failover false = %d, want a warning that the slot won't survive a promotion:\n%s", code, out)
		}
		r := startRelay(t, f.args("--slot-failover", "false"))
		r.waitStreaming(60 * time.Second)
		if v, err := r.metric("cdc_relay_slot_failover"); err != nil || v != 0 {
			t.Fatalf("cdc_relay_slot_failover = %v (%v), want 0", v, err)
		}
		if failoverOf(f) {
			t.Fatal("--slot-failover false created a failover slot")
		}
	})
}
