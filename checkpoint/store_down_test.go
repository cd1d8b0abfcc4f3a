package checkpoint_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/checkpoint"
	"github.com/cdc-relay/cdc-relay/internal/kafkatest"
	"github.com/cdc-relay/cdc-relay/internal/relaytest"
	"github.com/cdc-relay/cdc-relay/internal/tcpproxy"
	"github.com/cdc-relay/cdc-relay/internal/testtier"
)

// TestWriteEndsWithItsContextWhileKafkaIsDown: after a first checkpoint,
// the broker (through a proxy it advertises) stops answering, and then
// stops: each write fails when its context ends. The final checkpoint at
// shutdown relies on that bound. Write no longer waits in ProduceSync for
// it: kgo never fails a record of an idempotent client whose produce
// request was sent and got no answer (it may have been written), whatever
// its context, so a write in flight when the broker went down waited until
// the broker came back. That state needs the request to leave just before
// the broker stops answering, which this test cannot time; it checks the
// bound in the states it can reach.
func TestWriteEndsWithItsContextWhileKafkaIsDown(t *testing.T) {
	t.Parallel()
	testtier.Need(t)
	px, err := tcpproxy.New("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { px.Close() })
	b := relaytest.PrivateBroker(t, kafkatest.Options{AdvertisedHost: px.Addr()})
	px.SetTarget(b.Addr())
	// Requests time out soon, so that the blackholed one is soon unsure.
	s := checkpoint.NewStore([]string{px.Addr()}, []kgo.Opt{kgo.ProduceRequestTimeout(time.Second), kgo.RequestTimeoutOverhead(time.Second)}, "ckpt-down")
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := s.Ensure(ctx, true); err != nil {
		t.Fatal(err)
	}
	rec := func(lsn string) *checkpoint.Record {
		return &checkpoint.Record{Kind: checkpoint.KindCheckpoint, RelayID: "r", LSN: lsn, SystemID: "1", Database: "app", Slot: "s", WrittenAt: time.Now()}
	}
	if err := s.Write(ctx, rec("0/100")); err != nil {
		t.Fatal(err)
	}
	px.Blackhole()
	for i, lsn := range []string{"0/200", "0/300"} {
		if i == 1 {
			if err := b.Stop(); err != nil {
				t.Fatal(err)
			}
		}
		wctx, wcancel := context.WithTimeout(ctx, 6*time.Second)
		began := time.Now()
		done := make(chan error, 1)
		go func() { done <- s.Write(wctx, rec(lsn)) }()
		select {
		case err := <-done:
			if err == nil {
				t.Fatalf("write %d succeeded with Kafka stopped", i)
			}
			t.Logf("write %d failed after %s: %v", i, time.Since(began).Round(time.Millisecond), err)
		case <-time.After(45 * time.Second):
			t.Fatalf("write %d still waits 45 s into a 6 s context", i)
		}
		wcancel()
	}
}
