package relay

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/cdc-relay/cdc-relay/decoder"
	"github.com/cdc-relay/cdc-relay/publisher"
	recordpkg "github.com/cdc-relay/cdc-relay/record"
	"github.com/cdc-relay/cdc-relay/replication"
	"github.com/cdc-relay/cdc-relay/router"
)

// TestTracingOn: --tracing or an explicit OTEL_TRACES_EXPORTER=otlp turns
// tracing on, OTEL_SDK_DISABLED=true and OTEL_TRACES_EXPORTER=none keep it
// off.
func TestTracingOn(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, tc := range []struct {
		flag bool
		env  map[string]string
		want bool
	}{
		{false, nil, false},
		{true, nil, true},
		{false, map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true},
		{true, map[string]string{"OTEL_TRACES_EXPORTER": "none"}, false},
		{true, map[string]string{"OTEL_SDK_DISABLED": "true"}, false},
		{false, map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "TRUE"}, false},
	} {
		if got, err := tracingOn(tc.flag, env(tc.env)); err != nil || got != tc.want {
			t.Errorf("--tracing %v, env %v: on %v, %v; want %v", tc.flag, tc.env, got, err, tc.want)
		}
	}
}

// jsonHandler is a handler whose records are JSON values (no registry),
// handing them to sink.
func jsonHandler(tb testing.TB, sink recordSink, tr *tracing) *handler {
	tb.Helper()
	rt, err := router.New(router.DefaultTemplate)
	if err != nil {
		tb.Fatal(err)
	}
	b, err := recordpkg.New(recordpkg.Config{Router: rt, ValueFormat: recordpkg.ValueJSON, Builtin: router.AllBuiltin, MaxRecordBytes: 1 << 20, DLQTopic: "dlq"})
	if err != nil {
		tb.Fatal(err)
	}
	return handler{dlq: "dlq", tracing: tr}.session(b, sink)
}

// ackingSink acknowledges each record at once, as Kafka would later: it
// tells the record's OnAck and returns the record to the free list.
type ackingSink struct{ fakeSink }

func (s *ackingSink) Enqueue(r *publisher.Record) error {
	if r.OnAck != nil {
		r.OnAck.Acked(2, 42)
	}
	publisher.Release(r)
	return nil
}

const (
	writerTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	writerSpan   = "00f067aa0ba902b7"
	sampledTP    = "00-" + writerTrace + "-" + writerSpan + "-01"
	unsampledTP  = "00-" + writerTrace + "-" + writerSpan + "-00"
	writerState  = "vendor=opaque"
	tracedRowHdr = `{"traceparent": "` + sampledTP + `", "tracestate": "` + writerState + `"}`
)

func tracedRow(headers string) *decoder.Row {
	return &decoder.Row{ID: []byte("7"), AggregateType: []byte("Order"), AggregateID: []byte("agg-1"), EventType: []byte("OrderCreated"),
		Payload: []byte(`{"order_id": "agg-1"}`), Headers: []byte(headers)}
}

// tracedRow4 is a row whose record has six headers, as many as a record
// holds without an allocation (id, event_type, aggregate_type, the
// traceparent, the tracestate and one of the service's own).
var tracedRow4 = `{"traceparent": "` + sampledTP + `", "tracestate": "vendor=1", "tenant": "t-1"}`

// BenchmarkHandlerRow is the handler's per-event path, row → record →
// sink, with tracing off (it must allocate nothing) and on (spans recorded,
// none exported).
func BenchmarkHandlerRow(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "tracing=off"
		var tr *tracing
		if on {
			name = "tracing=on"
			p := sdktrace.NewTracerProvider()
			b.Cleanup(func() { p.Shutdown(context.Background()) })
			tr = &tracing{provider: p, tracer: p.Tracer("bench")}
		}
		b.Run(name, func(b *testing.B) {
			h := jsonHandler(b, &ackingSink{}, tr)
			row, tx, ctx := tracedRow(tracedRow4), &replication.Tx{CommitTime: time.Now()}, context.Background()
			b.ReportAllocs()
			seq := uint64(0)
			for b.Loop() {
				seq++
				if err := h.Row(ctx, seq, 100, tx, row); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestHandlerTracingOffAllocatesNothing: with tracing off the per-event
// path allocates nothing, traceparent header or not.
func TestHandlerTracingOffAllocatesNothing(t *testing.T) {
	h := jsonHandler(t, &ackingSink{}, nil)
	row, tx, ctx := tracedRow(tracedRow4), &replication.Tx{CommitTime: time.Now()}, context.Background()
	seq := uint64(0)
	row1 := func() {
		seq++
		if err := h.Row(ctx, seq, 100, tx, row); err != nil {
			t.Fatal(err)
		}
	}
	for range 100 {
		row1() // fill the free list and the builder's buffers
	}
	if got := testing.AllocsPerRun(1000, row1); got != 0 {
		t.Fatalf("%v allocations per event with tracing off, want 0", got)
	}
}

// TestHandlerSpans: with tracing on, a sampled row's record gets a span
// that is a child of its traceparent, starting at the commit time, and a
// traceparent naming that span (tracestate kept); an unsampled row's
// headers stay as written and nothing is exported; a row without a
// traceparent gets a root span and a traceparent.
func TestHandlerSpans(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	p := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer p.Shutdown(context.Background())
	sink := &fakeSink{}
	h := jsonHandler(t, sink, &tracing{provider: p, tracer: p.Tracer("test")})
	commit := time.Now().Add(-time.Second).Round(time.Microsecond)
	tx := &replication.Tx{CommitTime: commit}
	for i, hdr := range []string{tracedRowHdr, `{"traceparent": "` + unsampledTP + `"}`, `{}`} {
		if err := h.Row(context.Background(), uint64(i+1), 100, tx, tracedRow(hdr)); err != nil {
			t.Fatal(err)
		}
	}
	header := func(r *publisher.Record, k string) string {
		for _, h := range r.Headers {
			if h.Key == k {
				return string(h.Value)
			}
		}
		return ""
	}
	sampled, unsampled, root := sink.enqueued[0], sink.enqueued[1], sink.enqueued[2]
	if unsampled.OnAck != nil || header(unsampled, "traceparent") != unsampledTP {
		t.Errorf("unsampled row: OnAck %v, traceparent %q; want none and %q", unsampled.OnAck, header(unsampled, "traceparent"), unsampledTP)
	}
	for _, r := range []*publisher.Record{sampled, root} {
		if r.OnAck == nil {
			t.Fatalf("record %s has no OnAck", header(r, "id"))
		}
		r.OnAck.Acked(3, 17)
	}
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans exported, want 2 (the sampled row's and the root's)", len(spans))
	}
	s := spans[0]
	tp := "00-" + s.SpanContext.TraceID().String() + "-" + s.SpanContext.SpanID().String() + "-01"
	if got := header(sampled, "traceparent"); got != tp {
		t.Errorf("traceparent %q, want %q naming the span", got, tp)
	}
	if got := header(sampled, "tracestate"); got != writerState {
		t.Errorf("tracestate %q, want %q", got, writerState)
	}
	if s.Parent.SpanID().String() != writerSpan || s.SpanContext.TraceID().String() != writerTrace {
		t.Errorf("span parent %s in trace %s, want %s in %s", s.Parent.SpanID(), s.SpanContext.TraceID(), writerSpan, writerTrace)
	}
	if s.Name != "send outbox.event.Order" || s.SpanKind != trace.SpanKindProducer || !s.StartTime.Equal(commit) || s.EndTime.Before(s.StartTime) {
		t.Errorf("span %q kind %v from %v to %v; want send outbox.event.Order, producer, from %v", s.Name, s.SpanKind, s.StartTime, s.EndTime, commit)
	}
	got := map[string]string{}
	for _, a := range s.Attributes {
		got[string(a.Key)] = a.Value.Emit()
	}
	for k, v := range map[string]string{"messaging.system": "kafka", "messaging.destination.name": "outbox.event.Order", "messaging.destination.partition.id": "3",
		"messaging.kafka.offset": "17", "messaging.message.id": "7", "cdc_relay.event_type": "OrderCreated"} {
		if got[k] != v {
			t.Errorf("attribute %s = %q, want %q", k, got[k], v)
		}
	}
	r := spans[1]
	if r.Parent.IsValid() || header(root, "traceparent") != "00-"+r.SpanContext.TraceID().String()+"-"+r.SpanContext.SpanID().String()+"-01" {
		t.Errorf("row without traceparent: parent %v, traceparent %q; want a root span named by the header", r.Parent, header(root, "traceparent"))
	}
}

// TestHandlerRejectedMovesSpan: a record the broker refuses becomes a dead
// letter that takes the record's span along: the span is then named after
// the DLQ topic, carries the error kind, and ends at the letter's ack; the
// letter's traceparent (the record's headers) names it.
func TestHandlerRejectedMovesSpan(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	p := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer p.Shutdown(context.Background())
	sink := &fakeSink{}
	h := jsonHandler(t, sink, &tracing{provider: p, tracer: p.Tracer("test")})
	stats := new(replication.Stats)
	h.metrics, h.log = NewMetrics(stats, NewLagRate(stats.LagBytes)), slog.New(slog.DiscardHandler)
	if err := h.Row(context.Background(), 1, 100, &replication.Tx{CommitTime: time.Now()}, tracedRow(tracedRow4)); err != nil {
		t.Fatal(err)
	}
	rec := sink.enqueued[0]
	dl, err := h.rejected(rec, errors.New("MESSAGE_TOO_LARGE"))
	if err != nil {
		t.Fatal(err)
	}
	if rec.OnAck != nil || dl.OnAck == nil {
		t.Fatalf("OnAck of the refused record %v, of its dead letter %v; want the span moved to the letter", rec.OnAck, dl.OnAck)
	}
	dl.OnAck.Acked(0, 5)
	s, got := oneSpan(t, exp)
	if s.Name != "send dlq" || got["messaging.destination.name"] != "dlq" || got["error.type"] != "too_large" || got["messaging.kafka.offset"] != "5" || s.Status.Code != codes.Error {
		t.Errorf("span %q, attributes %v, status %v; want send dlq, destination dlq, error.type too_large, offset 5, an error", s.Name, got, s.Status)
	}
	var tp string
	for _, hd := range dl.Headers {
		if hd.Key == "traceparent" {
			tp = string(hd.Value)
		}
	}
	if want := "00-" + s.SpanContext.TraceID().String() + "-" + s.SpanContext.SpanID().String() + "-01"; tp != want {
		t.Errorf("dead letter's traceparent %q, want %q", tp, want)
	}
}
