package main

// The checkpoint's guarantees over RabbitMQ, as over Kafka: the same test
// bodies run on a RabbitMQ sink, whose events are read by a plain
// amqp091-go consumer on a queue bound with "#".

import (
	"fmt"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/cdc-relay/cdc-relay/internal/rabbittest"
	"github.com/cdc-relay/cdc-relay/internal/testtier"
)

// rabbitSink runs f's relay on the package's RabbitMQ node, with the
// fixture's own exchange and streams.
func rabbitSink(t *testing.T, f *fixture) sinkUnderTest {
	return rabbitSinkOn(t, needRabbit(t), f)
}

// rabbitSinkOn runs f's relay on node n.
func rabbitSinkOn(t *testing.T, n *rabbittest.Node, f *fixture) sinkUnderTest {
	got := collect(t, n, f.bindQueue(n.Channel(t), "#"), false)
	seen := func() map[string]int {
		ids := map[string]int{}
		for _, d := range got() {
			ids[d.MessageId]++
		}
		return ids
	}
	// The dead-letter stream exists once the relay declared it: it is
	// read from the first call on.
	var dlq func() []amqp.Delivery
	deadLetters := func() []amqp.Delivery {
		if dlq == nil {
			dlq = collect(t, n, f.exchange()+".dlq", true)
		}
		return dlq()
	}
	deadLettered := func(table string, id int64) bool {
		for _, d := range deadLetters() {
			// A row of a table that is no outbox table has no event id:
			// its columns are the body.
			if d.Headers["table"] == table && strings.Contains(string(d.Body), fmt.Sprintf(`"id":"%d"`, id)) {
				// Its message_id is its transaction's commit LSN and its
				// place in it, the same when the row is read again.
				if !rowMessageID.MatchString(d.MessageId) {
					t.Errorf("the dead letter of row %d of %s has message_id %q, want <commit LSN>-<place>", id, table, d.MessageId)
				}
				return true
			}
		}
		return false
	}
	return sinkUnderTest{
		broker:       "RabbitMQ",
		deadLettered: deadLettered,
		misrouted: func(id int64) string {
			for _, d := range got() {
				if d.MessageId == fmt.Sprint(id) && (d.Exchange != f.exchange() || d.RoutingKey != "OrderCreated") {
					return fmt.Sprintf("exchange %s with routing key %s", d.Exchange, d.RoutingKey)
				}
			}
			for _, d := range deadLetters() {
				if d.MessageId == fmt.Sprint(id) || strings.Contains(string(d.Body), fmt.Sprintf(`"id":"%d"`, id)) {
					return "the dead-letter stream"
				}
			}
			return ""
		},
		args: func(extra ...string) []string { return f.rabbitArgs(n, extra...) },
		gaps: "stream " + f.exchange() + ".checkpoints.gaps",
		waitIDs: func(timeout time.Duration, want []int64) {
			t.Helper()
			waitFor(t, timeout, fmt.Sprintf("%d events in the queue", len(want)), func() bool {
				ids := seen()
				for _, id := range want {
					if ids[fmt.Sprint(id)] == 0 {
						return false
					}
				}
				return true
			})
		},
		seen: seen,
	}
}

// TestRabbitMQSlotAheadOfCheckpoint: TestSlotAheadOfCheckpoint over
// RabbitMQ (which refuses exactly-once): a slot made again by hand after
// a kill -9, or advanced by hand, past rows the queue never got, is exit
// 3; slot recreate --accept-gap keeps it and records the gap in the
// checkpoint streams, and the replay it prints brings the rows.
func TestRabbitMQSlotAheadOfCheckpoint(t *testing.T) {
	t.Parallel()
	testtier.Need(t)
	t.Run("made by hand after a crash", func(t *testing.T) { testSlotAhead(t, rabbitSink, killRelay, recreateSlotByHand) })
	t.Run("advanced by hand", func(t *testing.T) { testSlotAhead(t, rabbitSink, stopRelay, advanceSlotByHand) })
}

// TestRabbitMQCheckpointUnreadable: TestCheckpointUnreadable over
// RabbitMQ. The checkpoint streams exist, but the relay's user may no
// longer read them: the checkpoint is unknown, not absent. A relay whose
// slot was dropped creates nothing and waits, and once it may read again
// it exits 3; a first start (whose streams do not exist yet) waits the
// same way, and then creates its slot.
func TestRabbitMQCheckpointUnreadable(t *testing.T) {
	t.Parallel()
	n := rabbittest.Own(t, rabbittest.Options{}) // its permissions change below
	f := newFixture(t, "")
	first := newFixture(t, "")
	args := f.rabbitArgs(n, "--halt-linger", "0s")
	r := startRelay(t, args)
	r.waitStreaming(60 * time.Second)
	f.waitSlotPast(currentLSN(t, f.connect()), 60*time.Second)
	if code := r.terminate(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	f.exec("SELECT pg_drop_replication_slot($1)", f.slot)

	setReadPermission := func(read string) {
		t.Helper()
		if out, err := n.Ctl("set_permissions", "-p", "/", "guest", ".*", ".*", read); err != nil {
			t.Fatalf("rabbitmqctl set_permissions: %v\n%s", err, out)
		}
	}
	setReadPermission("^$")
	out := testCheckpointUnknown(t, f, first, args, first.rabbitArgs(n, "--halt-linger", "0s"), "RabbitMQ", func() { setReadPermission(".*") })
	if !strings.Contains(out, "ACCESS_REFUSED - access to queue") {
		t.Fatalf("the relay did not wait because the checkpoint stream may not be read:\n%s", tailString(out, 3000))
	}
}

// TestRabbitMQRefused: as with Kafka, a broker that refuses the relay's
// credentials, or cannot be reached, is retried: the relay logs why,
// /readyz says it waits for the checkpoint, it creates no slot, and it
// keeps running; check FAILs naming RabbitMQ. The password never shows.
func TestRabbitMQRefused(t *testing.T) {
	t.Parallel()
	n := needRabbit(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	const wrong = "wrong-pw-4711"
	for _, tc := range []struct{ name, url, wantLog, wantError string }{
		{"wrong password", strings.Replace(n.URL(), "guest:guest@", "guest:"+wrong+"@", 1), `username or password not allowed`,
			"rabbitmq refused the relay's credentials at startup: check the user and password in --rabbitmq-url"},
		{"unreachable", "amqp://guest:" + wrong + "@" + closed + "/", "connection refused", "rabbitmq not reachable at startup"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, "")
			args := f.rabbitArgs(n, "--shutdown-timeout", "2s")
			setFlag(args, "--rabbitmq-url", tc.url)
			code, out := runCommand(commandArgs("check", args))
			if code != exitFailed || !strings.Contains(out, "FAIL  RabbitMQ") || strings.Contains(out, wrong) {
				t.Errorf("check = %d, want %d with a FAIL naming RabbitMQ and no password:\n%s", code, exitFailed, out)
			}
			r := startRelay(t, args)
			waitRefused(t, f, r, tc.wantLog)
			if line := linesWith(r.Output(), "level=ERROR"); !strings.Contains(line, tc.wantError) {
				t.Errorf("the startup ERROR does not say %q:\n%s", tc.wantError, line)
			}
			if strings.Contains(r.Output(), wrong) {
				t.Errorf("the password is in the log:\n%s", tailString(r.Output(), 3000))
			}
		})
	}
}

// TestRabbitMQUnrecoverableExitsAtOnce: an error no retry fixes (here
// PostgreSQL refusing the password) ends a relay on RabbitMQ as it ends
// one on Kafka: exit 1 at once, one ERROR line with the cause and the
// fix, nothing created.
func TestRabbitMQUnrecoverableExitsAtOnce(t *testing.T) {
	t.Parallel()
	n := needRabbit(t)
	f := newFixture(t, "")
	c, db := authCluster(t, f)
	args := f.rabbitArgs(n)
	setFlag(args, "--pg-url", urlFor(c, "relay_pw", "wrong-secret-0815", db))
	line := exitsAtOnce(t, args, "wrong-secret-0815", "28P01", `password authentication failed for user \"relay_pw\"`, "check the password in --pg-url")
	t.Log(line)
	assertNothingCreated(t, c, db, f)
}

// TestRabbitMQNoFalseAheadExit: TestNoFalseAheadExit over RabbitMQ: an
// idle outbox on a busy database, killed and restarted again and again,
// never exits 3: the checkpoint streams follow the idle positions the
// slot is confirmed to.
func TestRabbitMQNoFalseAheadExit(t *testing.T) {
	t.Parallel()
	testNoFalseAhead(t, rabbitSink)
}

// TestRabbitMQDriftAlterFirst: TestDriftSecondTable's "alter first" over
// RabbitMQ: a table added to the publication before the configuration
// has its rows dead-lettered to the stream, not lost, until it is
// configured.
func TestRabbitMQDriftAlterFirst(t *testing.T) {
	t.Parallel()
	testDriftAlterFirst(t, rabbitSink)
}

// rowMessageID is the message_id of a row without an id of its own.
var rowMessageID = regexp.MustCompile(`^[0-9A-F]+/[0-9A-F]+-[0-9]+$`)
