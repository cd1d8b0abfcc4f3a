package kproduce

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cdc-relay/cdc-relay/internal/kfaketest"
)

// TestSync: records a broker takes are each settled; a produce request
// the broker never answers (kfake keeps reading and writes nothing back)
// ends with the context, where ProduceSync would wait for the answer.
func TestSync(t *testing.T) {
	c := kfaketest.Start(t, nil, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := Sync(ctx, cl, &kgo.Record{Topic: "t", Value: []byte("a")}, &kgo.Record{Topic: "t", Value: []byte("b")})
	if err != nil || len(res) != 2 || res.FirstErr() != nil {
		t.Fatalf("Sync = %v, %v; want 2 results without error", res, err)
	}
	if res, err := Sync(ctx, cl); err != nil || res != nil {
		t.Fatalf("Sync of nothing = %v, %v", res, err)
	}

	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		return nil, nil, true // no answer
	})
	sctx, scancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer scancel()
	done := make(chan error, 1)
	go func() {
		_, err := Sync(sctx, cl, &kgo.Record{Topic: "t", Value: []byte("c")})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Sync with the request unanswered = %v, want the context's deadline", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Sync still waits 30 s into a 500 ms context")
	}
}
