package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/rabbittest"
	amqp "github.com/rabbitmq/amqp091-go"
)

// fakeWatchdog is a watchdog on a clock the test moves, whose probe
// answers found.
func fakeWatchdog(from any, found bool) (*watchdog, *time.Time) {
	now := time.Unix(1000, 0)
	w := newWatchdog(nil, "s", from)
	w.clock = func() time.Time { return now }
	w.quiet = now
	w.probe = func(context.Context, any) bool { return found }
	return w, &now
}

// TestWatchdog: a following read given nothing for stallIdle probes; a
// probe given a message the read is not given within stallGrace is
// ErrStalled, naming the offset; a message reaching the read in time, or a
// probe given nothing, is not, and the next probe waits stallIdle again.
func TestWatchdog(t *testing.T) {
	ctx := context.Background()
	t.Run("stalled", func(t *testing.T) {
		w, now := fakeWatchdog("first", true)
		w.given(&amqp.Delivery{Headers: amqp.Table{OffsetHeader: int64(6)}})
		*now = now.Add(stallIdle - time.Second)
		if err := w.tick(ctx); err != nil || w.probing {
			t.Fatalf("quiet for less than stallIdle: err %v, probing %v", err, w.probing)
		}
		*now = now.Add(time.Second)
		if err := w.tick(ctx); err != nil || !w.probing {
			t.Fatalf("quiet for stallIdle: err %v, probing %v, want a probe", err, w.probing)
		}
		w.probed(<-w.results)
		*now = now.Add(stallGrace - time.Second)
		if err := w.tick(ctx); err != nil {
			t.Fatalf("within stallGrace of the probe: %v", err)
		}
		*now = now.Add(time.Second)
		err := w.tick(ctx)
		if !errors.Is(err, ErrStalled) || !strings.Contains(err.Error(), "offset 7") {
			t.Fatalf("stallGrace after the probe was given a message: %v, want ErrStalled naming offset 7", err)
		}
	})
	t.Run("given in time", func(t *testing.T) {
		w, now := fakeWatchdog(int64(3), true)
		if w.next != 3 {
			t.Fatalf("next %d before any message, want the start 3", w.next)
		}
		*now = now.Add(stallIdle)
		w.tick(ctx)
		w.probed(<-w.results)
		*now = now.Add(time.Second)
		w.given(&amqp.Delivery{Headers: amqp.Table{OffsetHeader: int64(3)}})
		*now = now.Add(stallGrace)
		if err := w.tick(ctx); err != nil {
			t.Fatalf("the read was given the message after the probe: %v", err)
		}
	})
	t.Run("given while probing", func(t *testing.T) {
		w, now := fakeWatchdog("first", true)
		*now = now.Add(stallIdle)
		w.tick(ctx)
		*now = now.Add(time.Second)
		w.given(&amqp.Delivery{})
		w.probed(<-w.results)
		*now = now.Add(stallGrace)
		if err := w.tick(ctx); err != nil || !w.suspect.IsZero() {
			t.Fatalf("the read was given a message while the probe ran: err %v, suspect %v", err, w.suspect)
		}
	})
	t.Run("probe given nothing", func(t *testing.T) {
		w, now := fakeWatchdog("next", false)
		*now = now.Add(stallIdle)
		w.tick(ctx)
		w.probed(<-w.results)
		*now = now.Add(stallIdle - time.Second)
		if err := w.tick(ctx); err != nil || w.probing {
			t.Fatalf("after a probe given nothing: err %v, probing %v, want no probe before stallIdle", err, w.probing)
		}
		*now = now.Add(time.Second)
		if w.tick(ctx); !w.probing {
			t.Fatal("no probe stallIdle after the last one")
		}
		w.probed(<-w.results)
	})
}

// TestFollowEndsOnStall: a following read whose consumer is given nothing
// more (a stall made to order) ends with ErrStalled, through a real
// probe of the stream, once the stream has a message it was not given;
// the message before the stall was read. It changes package variables,
// so it never runs in parallel.
func TestFollowEndsOnStall(t *testing.T) {
	n := startNode(t)
	stream := "stall" + fresh()
	ch := channel(t, n)
	if _, err := ch.QueueDeclare(stream, true, false, false, false, amqp.Table{"x-queue-type": "stream"}); err != nil {
		t.Fatal(err)
	}
	c := confirmer(t, n)
	publish := func(id string) {
		t.Helper()
		errs, err := c.Publish(context.Background(), []Outgoing{{RoutingKey: stream, Publishing: amqp.Publishing{MessageId: id}}})
		if err == nil {
			err = errs[0]
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	publish("a")
	stallForTest = func(in <-chan amqp.Delivery) <-chan amqp.Delivery {
		out := make(chan amqp.Delivery)
		go func() {
			defer close(out)
			first := true
			for d := range in {
				if first {
					out <- d
					first = false
				}
			}
		}()
		return out
	}
	idle, grace := stallIdle, stallGrace
	stallIdle, stallGrace = 2*time.Second, time.Second
	t.Cleanup(func() { stallForTest, stallIdle, stallGrace = nil, idle, grace })
	conn, err := Dial(n.URL(), nil, "stall test")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var read []string
	done := make(chan error, 1)
	go func() {
		done <- ReadStream(ctx, conn, StreamRead{Stream: stream}, func(d *amqp.Delivery) (bool, error) {
			read = append(read, d.MessageId)
			return true, nil
		})
	}()
	publish("b")
	select {
	case err := <-done:
		if !errors.Is(err, ErrStalled) || !strings.Contains(err.Error(), "offset 1") {
			t.Fatalf("the stalled read ended with %v, want ErrStalled naming offset 1", err)
		}
	case <-ctx.Done():
		t.Fatal("the stalled read did not end in 2 minutes")
	}
	if len(read) != 1 || read[0] != "a" {
		t.Fatalf("the read was given %v, want [a]", read)
	}
}

// TestAbsentOrMissing: a 404 for a durable queue whose node is down or
// starting is Absent (a restart recovering it), not Missing; any other 404
// is Missing; no other error is either.
func TestAbsentOrMissing(t *testing.T) {
	down := &amqp.Error{Code: amqp.NotFound, Reason: "NOT_FOUND - home node 'rabbit@h' of durable queue 's' in vhost '/' is down or inaccessible"}
	gone := &amqp.Error{Code: amqp.NotFound, Reason: "NOT_FOUND - no queue 's' in vhost '/'"}
	for _, tc := range []struct {
		err             error
		absent, missing bool
	}{
		{fmt.Errorf("read: %w", down), true, false},
		{gone, false, true},
		{&amqp.Error{Code: amqp.AccessRefused, Reason: "ACCESS_REFUSED"}, false, false},
		{errors.New("is down or inaccessible"), false, false},
	} {
		if Absent(tc.err) != tc.absent || Missing(tc.err) != tc.missing {
			t.Errorf("%v: Absent %v, Missing %v; want %v, %v", tc.err, Absent(tc.err), Missing(tc.err), tc.absent, tc.missing)
		}
	}
}

// TestAbsentWhileTheNodeStarts: while a restarted node recovers its
// queues, a passive declare of an existing stream is refused with a 404
// that Absent tells from a missing stream; never one that Missing takes for
// a stream that does not exist. Once the node is up, a stream that does not
// exist is Missing.
func TestAbsentWhileTheNodeStarts(t *testing.T) {
	t.Parallel()
	n := rabbittest.Own(t, rabbittest.Options{})
	stream := "absent" + fresh()
	if _, err := channel(t, n).QueueDeclare(stream, true, false, false, false, amqp.Table{"x-queue-type": "stream"}); err != nil {
		t.Fatal(err)
	}
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	started := make(chan error, 1)
	go func() { started <- n.Start() }()
	absent := 0
	for up := false; !up; {
		select {
		case err := <-started:
			if err != nil {
				t.Fatal(err)
			}
			up = true
		default:
		}
		conn, err := amqp.DialConfig(n.URL(), amqp.Config{Dial: amqp.DefaultDial(time.Second)})
		if err != nil {
			time.Sleep(20 * time.Millisecond) // the listener is not open yet: poll again
			continue
		}
		ch, err := conn.Channel()
		if err == nil {
			_, err = ch.QueueDeclarePassive(stream, true, false, false, false, nil)
		}
		conn.Close()
		switch {
		case Missing(err):
			t.Fatalf("an existing stream taken for a missing one while the node started: %v", err)
		case Absent(err):
			absent++
		}
	}
	t.Logf("%d passive declares were refused as absent while the node started", absent)
	_, err := channel(t, n).QueueDeclarePassive("nothing"+fresh(), true, false, false, false, nil)
	if !Missing(err) || Absent(err) {
		t.Fatalf("a stream that does not exist: %v, want Missing", err)
	}
}
