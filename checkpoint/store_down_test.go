package checkpoint_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/checkpoint"
	"github.com/cdc-relay/cdc-relay/internal/kafkatest"
	"github.com/cdc-relay/cdc-relay/internal/relaytest"
	"github.com/cdc-relay/cdc-relay/internal/tcpproxy"
	"github.com/cdc-relay/cdc-relay/internal/testtier"
)

// blackholeAfterProduce blackholes px as soon as a produce request has
// been written, once armed: the request is then in flight and gets no
// answer.
type blackholeAfterProduce struct {
	px    *tcpproxy.Proxy
	armed atomic.Bool
}

func (h *blackholeAfterProduce) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == 0 && err == nil && h.armed.CompareAndSwap(true, false) { // 0: Produce
		h.px.Blackhole()
	}
}

// TestWriteEndsWithItsContextWhileKafkaIsDown: a checkpoint write whose
// produce request is in flight when the broker (through a proxy it
// advertises) stops answering fails when its context ends, and so does the
// next one, with the broker stopped. kgo never fails a record of an
// idempotent client whose request was sent and got no answer (it may have
// been written), whatever its context: ProduceSync waited for the broker
// without end, and the final checkpoint at shutdown with it. The bound
// checked is generous.
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
	hook := &blackholeAfterProduce{px: px}
	// Requests time out soon, so that the blackholed one is soon unsure.
	s := checkpoint.NewStore([]string{px.Addr()}, []kgo.Opt{kgo.WithHooks(hook), kgo.ProduceRequestTimeout(time.Second), kgo.RequestTimeoutOverhead(time.Second)}, "ckpt-down")
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
	hook.armed.Store(true)
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
