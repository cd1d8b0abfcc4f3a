// Package kproduce produces Kafka records and waits for them, but never
// longer than a context.
//
// In: a franz-go client, a context and records.
// Out: each record's result once kgo settled them all, or the context's
// error when it ended first.
// Owns: nothing.
//
// kgo's ProduceSync waits for every record's promise. An idempotent client
// never fails a record whose produce request was sent and got no answer
// (it may have been written), whatever the record's context, so with a
// broker gone down mid-request ProduceSync waits until the broker is back.
// Sync returns when ctx ends instead. A record kgo still holds then may
// land later, in order on its partition; it counts as written only when
// Sync said so.
package kproduce

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Sync produces rs on cl and returns their results, in the order kgo
// settled them, once every one is settled, or ctx's error when ctx ends
// first.
func Sync(ctx context.Context, cl *kgo.Client, rs ...*kgo.Record) (kgo.ProduceResults, error) {
	if len(rs) == 0 {
		return nil, nil
	}
	var mu sync.Mutex
	results := make(kgo.ProduceResults, 0, len(rs))
	done := make(chan struct{})
	for _, r := range rs {
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			results = append(results, kgo.ProduceResult{Record: r, Err: err})
			if len(results) == len(rs) {
				close(done)
			}
		})
	}
	select {
	case <-done:
		return results, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
