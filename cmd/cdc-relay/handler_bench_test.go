package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/cdc-relay/cdc-relay/decoder"
	"github.com/cdc-relay/cdc-relay/publisher"
	"github.com/cdc-relay/cdc-relay/replication"
	"github.com/cdc-relay/cdc-relay/router"
	"github.com/cdc-relay/cdc-relay/schemaregistry"
)

// recycler is a record sink that acknowledges at once: what a session does
// once Kafka has acknowledged a batch.
type recycler struct{ n int }

func (r *recycler) Enqueue(rec *publisher.Record) error {
	r.n++
	publisher.Release(rec)
	return nil
}
func (r *recycler) Drain(context.Context) error { return nil }
func (r *recycler) Close()                      {}
func (r *recycler) Done() <-chan struct{}       { return nil }
func (r *recycler) Err() error                  { return nil }

// BenchmarkHandlerRow measures one decoded row turned into its Kafka
// record (route, headers, Avro value, record) in steady state: records
// come back from Kafka's acknowledgement to the pool. The registry is a
// stand-in that answers the one registration.
func BenchmarkHandlerRow(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
		io.WriteString(w, `{"id": 7}`)
	}))
	defer srv.Close()
	schemas, err := schemaregistry.LoadDir("../../testdata/schemas")
	if err != nil {
		b.Fatal(err)
	}
	reg, err := schemaregistry.New(schemaregistry.Config{URL: srv.URL, Strategy: schemaregistry.TopicRecord, Schemas: schemas})
	if err != nil {
		b.Fatal(err)
	}
	rt, err := router.New(router.DefaultTemplate)
	if err != nil {
		b.Fatal(err)
	}
	sink := &recycler{}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	h := &handler{cfg: &Config{OnInvalid: "dlq", DLQTopic: "outbox.dlq"}, router: rt, registry: reg, pub: sink,
		maxRecord: 1 << 20, metrics: newMetrics(&replication.Stats{}, newLagRate(func() uint64 { return 0 })), log: log}
	agg := "7c4f7d6e-2f55-4c4e-9f4e-0d9b8a3c1e21"
	row := decoder.Row{ID: []byte("123456789"), AggregateType: []byte("Order"), AggregateID: []byte(agg),
		EventType: []byte("OrderCreated"), Payload: []byte(orderCreated(agg, 1)), Headers: []byte(`{}`)}
	ctx := context.Background()
	tx := &replication.Tx{}
	if err := h.Row(ctx, 1, 512, tx, &row); err != nil { // registers the subject
		b.Fatal(err)
	}
	b.SetBytes(int64(len(row.Payload)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if err := h.Row(ctx, uint64(i+2), 512, tx, &row); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if sink.n != b.N+1 {
		b.Fatalf("sink got %d records, want %d", sink.n, b.N+1)
	}
}
