package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCompressionCodecs: with each --kafka-compression codec the real broker
// accepts the relay's batches (it decompresses and validates every
// compressed batch with its own Java codecs), stores them compressed with
// that codec, and an independent consumer (franz-go, srclient and goavro)
// reads back every event intact. The events are about 4 KB, so a batch
// spans many 64 KB LZ4 blocks.
func TestCompressionCodecs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		code uint8
	}{{"none", 0}, {"gzip", 1}, {"snappy", 2}, {"lz4", 3}, {"zstd", 4}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, "")
			c := consume(t, "^"+f.topicPrefix+`\..*`)
			r := startRelay(t, f.args("--kafka-compression", tc.name))
			r.waitStreaming(60 * time.Second)

			ctx := context.Background()
			conn := connect(t)
			const txs, perTx = 6, 50
			var ids []int64
			payloads := map[int64]string{}
			for tx := 0; tx < txs; tx++ {
				evs := make([]event, perTx)
				for i := range evs {
					n := tx*perTx + i
					agg := uuidFor(n % 7)
					evs[i] = event{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: bigOrder(agg, n)}
				}
				got, err := f.insertTx(ctx, conn, evs)
				if err != nil {
					t.Fatal(err)
				}
				for i, id := range got {
					payloads[id] = evs[i].Payload
				}
				ids = append(ids, got...)
			}
			recs := c.waitIDs(60*time.Second, ids)
			dec := newAvroDecoder()
			checked := map[string]bool{}
			for _, rec := range recs {
				if rec.Codec != tc.code {
					t.Fatalf("record %s stored with codec %d, want %d (%s)", rec.Headers["id"], rec.Codec, tc.code, tc.name)
				}
				id, _ := strconv.ParseInt(rec.Headers["id"], 10, 64)
				want, ok := payloads[id]
				if !ok || checked[rec.Headers["id"]] {
					continue
				}
				checked[rec.Headers["id"]] = true
				got, _, err := dec.decode(rec.Value)
				if err != nil {
					t.Fatalf("event %d: %v", id, err)
				}
				items, _ := got["items"].([]any)
				if len(items) != 40 || fmt.Sprint(got["order_id"]) != rec.Key || !strings.Contains(want, fmt.Sprint(items[39].(map[string]any)["sku"])) {
					t.Fatalf("event %d decoded to %v, want the payload %s", id, got, want)
				}
			}
			if len(checked) != len(ids) {
				t.Fatalf("checked %d of %d events", len(checked), len(ids))
			}
			if code := r.terminate(); code != 0 {
				t.Fatalf("exit code after SIGTERM = %d, want 0", code)
			}
		})
	}
}

// bigOrder is an OrderCreated payload of about 4 KB: 40 line items.
func bigOrder(orderID string, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"order_id": %q, "customer_id": "customer-%d", "status": "PENDING", "amount_cents": %d, "currency": "EUR", "created_at": 1700000000000, "items": [`, orderID, n, n*100)
	for i := 0; i < 40; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `{"sku": "sku-%d-%d-%s", "quantity": %d, "unit_price_cents": %d}`, n, i, strings.Repeat("x", 40), i+1, 100*i+n)
	}
	b.WriteString("]}")
	return b.String()
}
