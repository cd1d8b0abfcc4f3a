package record

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/decoder"
	"github.com/cdc-relay/cdc-relay/publisher"
	"github.com/cdc-relay/cdc-relay/router"
)

// BenchmarkBuildCloudEvents is BenchmarkBuild with --cloudevents, for each
// value format: a row with a traceparent header turned into its record in
// steady state.
func BenchmarkBuildCloudEvents(b *testing.B) {
	for _, vf := range []ValueFormat{ValueAvro, ValueJSON} {
		b.Run("binary-"+vf.String(), func(b *testing.B) {
			var calls atomic.Int32
			builder, err := New(Config{Router: testRouter(b), Registry: fakeRegistry(b, &calls), Builtin: router.AllBuiltin,
				ValueFormat: vf, CloudEvents: true, CloudEventsSource: "/shop/orders", MaxRecordBytes: 1 << 20, DLQTopic: "dlq"})
			if err != nil {
				b.Fatal(err)
			}
			agg := "7c4f7d6e-2f55-4c4e-9f4e-0d9b8a3c1e21"
			row := decoder.Row{ID: []byte("123456789"), AggregateType: []byte("Order"), AggregateID: []byte(agg), EventType: []byte("OrderCreated"),
				Payload: []byte(orderCreated(agg, 1)), Headers: []byte(`{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}`)}
			ctx := context.Background()
			now := time.Now()
			b.SetBytes(int64(len(row.Payload)))
			b.ReportAllocs()
			for b.Loop() {
				rec := publisher.NewRecord()
				if inv, err := builder.Build(ctx, rec, now, &row); inv != nil || err != nil {
					b.Fatal(inv, err)
				}
				publisher.Release(rec)
			}
		})
	}
}
