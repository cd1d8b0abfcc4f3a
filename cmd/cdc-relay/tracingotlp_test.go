package main

// The tracing tests run the relay against a real OTLP receiver built here
// from OpenTelemetry's own protobuf definitions (go.opentelemetry.io/proto/
// otlp), served over HTTP (/v1/traces, application/x-protobuf) and over
// gRPC (the official TraceService), and read what lands in Kafka with the
// harness's franz-go consumer: nothing of the relay's code decodes either.

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/cdc-relay/cdc-relay/internal/relaytest"
)

// otlpReceiver keeps the spans exported to it, with their resource's
// attributes.
type otlpReceiver struct {
	mu        sync.Mutex
	spans     []*tracepb.Span
	resources []map[string]string
	problems  []string
}

func (o *otlpReceiver) add(req *coltracepb.ExportTraceServiceRequest) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		res := map[string]string{}
		for _, a := range rs.GetResource().GetAttributes() {
			res[a.GetKey()] = a.GetValue().GetStringValue()
		}
		o.resources = append(o.resources, res)
		for _, ss := range rs.GetScopeSpans() {
			o.spans = append(o.spans, ss.GetSpans()...)
		}
	}
}

func (o *otlpReceiver) problem(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.problems = append(o.problems, fmt.Sprintf(format, args...))
}

// bySpanID is every span received, by its hex span id, and how many
// times each id came.
func (o *otlpReceiver) bySpanID() (map[string]*tracepb.Span, map[string]int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	m, n := map[string]*tracepb.Span{}, map[string]int{}
	for _, s := range o.spans {
		id := hex.EncodeToString(s.GetSpanId())
		m[id] = s
		n[id]++
	}
	return m, n
}

// check fails t with what the receiver found wrong in the requests.
func (o *otlpReceiver) check(t *testing.T) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range o.problems {
		t.Error("OTLP receiver:", p)
	}
}

// otlpHTTP serves OTLP/HTTP (binary protobuf) on 127.0.0.1 and returns the
// receiver and its base URL (the exporter appends /v1/traces).
func otlpHTTP(t *testing.T) (*otlpReceiver, string) {
	t.Helper()
	o := &otlpReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
			o.problem("%s %s, want POST /v1/traces", r.Method, r.URL.Path)
			http.NotFound(w, r)
			return
		}
		if ct := r.Header.Get("Content-Type"); ct != "application/x-protobuf" {
			o.problem("Content-Type %q, want application/x-protobuf", ct)
			http.Error(w, "unsupported media type", http.StatusUnsupportedMediaType)
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			o.problem("the body is no ExportTraceServiceRequest: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		o.add(&req)
		resp, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(resp)
	}))
	t.Cleanup(srv.Close)
	return o, srv.URL
}

// traceService is the official OTLP gRPC TraceService, keeping what it gets.
type traceService struct {
	coltracepb.UnimplementedTraceServiceServer
	o *otlpReceiver
}

func (s *traceService) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	s.o.add(req)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// otlpGRPC serves OTLP/gRPC on 127.0.0.1 and returns the receiver and its
// address as an http:// URL (plaintext).
func otlpGRPC(t *testing.T) (*otlpReceiver, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := &otlpReceiver{}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, &traceService{o: o})
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return o, "http://" + ln.Addr().String()
}

// startRelayEnv is startRelay with env added to the relay's environment.
func startRelayEnv(t *testing.T, args []string, env []string) *relay {
	t.Helper()
	buildRelay(t)
	p := relaytest.Start(t, relayBin, args, relaytest.Options{MetricsPort: true, LogDir: os.Getenv("CDC_RELAY_TEST_LOG_DIR"), TailBytes: 6000, Env: env})
	r := &relay{Process: p, t: t, cmd: p.Cmd, metricsAddr: p.MetricsAddr, done: make(chan struct{})}
	go func() {
		<-p.Done()
		r.exitCode = p.ExitCode()
		close(r.done)
	}()
	return r
}

// writerContext is a writer's trace context: a random trace id and span id.
type writerContext struct{ trace, span string }

func newWriterContext() writerContext {
	b := make([]byte, 24)
	rand.Read(b)
	return writerContext{trace: hex.EncodeToString(b[:16]), span: hex.EncodeToString(b[16:])}
}

func (w writerContext) traceparent(flags string) string {
	return "00-" + w.trace + "-" + w.span + "-" + flags
}

// parseTraceparent splits a version-00 traceparent into trace id, span id
// and flags.
func parseTraceparent(t *testing.T, tp string) (traceID, spanID, flags string) {
	t.Helper()
	p := strings.Split(tp, "-")
	if len(p) != 4 || p[0] != "00" || len(p[1]) != 32 || len(p[2]) != 16 || len(p[3]) != 2 {
		t.Fatalf("traceparent %q is not 00-<32 hex>-<16 hex>-<2 hex>", tp)
	}
	return p[1], p[2], p[3]
}

// spanAttrs is a span's attributes as text (integers in decimal).
func spanAttrs(s *tracepb.Span) map[string]string {
	m := map[string]string{}
	for _, a := range s.GetAttributes() {
		switch v := a.GetValue().GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[a.GetKey()] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			m[a.GetKey()] = strconv.FormatInt(v.IntValue, 10)
		default:
			m[a.GetKey()] = fmt.Sprint(v)
		}
	}
	return m
}

// tracedEvents writes, in one transaction: a row with a sampled writer's
// traceparent and a tracestate, a row with an unsampled traceparent, a row
// without one, a row of an event type without a schema (a dead letter),
// each with its writer's headers, and a logical message with a sampled
// traceparent. It returns the ids by role and the headers jsonb written.
func tracedEvents(t *testing.T, f *fixture, prefix string) (ids map[string]string, writers map[string]writerContext) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn := f.connect()
	writers = map[string]writerContext{"sampled": newWriterContext(), "unsampled": newWriterContext(), "dead": newWriterContext(), "message": newWriterContext()}
	hdr := func(role, flags string) string {
		h := fmt.Sprintf(`{"traceparent": %q`, writers[role].traceparent(flags))
		if role == "sampled" {
			h += `, "tracestate": "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"`
		}
		return h + "}"
	}
	agg := uuidFor(900)
	rows := []struct{ role, eventType, payload, headers string }{
		{"sampled", "OrderCreated", orderCreated(agg, 1), hdr("sampled", "01")},
		{"unsampled", "OrderCreated", orderCreated(agg, 2), hdr("unsampled", "00")},
		{"root", "OrderCreated", orderCreated(agg, 3), `{}`},
		{"dead", "NoSchemaForThis", `{"x": 1}`, hdr("dead", "01")},
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	ids = map[string]string{}
	for _, r := range rows {
		var id int64
		if err := tx.QueryRow(ctx, fmt.Sprintf(`INSERT INTO public.%s (aggregate_type, aggregate_id, event_type, payload, headers)
			VALUES ('Order', $1, $2, $3::jsonb, $4::jsonb) RETURNING id`, f.table), agg, r.eventType, r.payload, r.headers).Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids[r.role] = strconv.FormatInt(id, 10)
	}
	if prefix != "" {
		ids["message"] = "msg-" + f.name
		if _, err := tx.Exec(ctx, `SELECT outbox_emit('Order', $1, 'OrderCancelled', $2::jsonb, $3::jsonb, $4, $5)`,
			agg, orderCancelled(agg, 4), hdr("message", "01"), ids["message"], prefix); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return ids, writers
}

// TestTracingOTLP: with --tracing and OTLP over HTTP, each sampled event's
// record carries a traceparent naming a span the receiver got, a Producer
// span "send <topic>" whose parent is the writer's span in the writer's
// trace, with the record's topic, partition, offset, id and event type,
// from the commit time to Kafka's ack; the tracestate is kept. A logical
// message's span is the same; a dead letter's span names the DLQ topic and
// the error kind; a row without traceparent gets a root span; an unsampled
// row exports nothing and keeps its traceparent byte for byte.
func TestTracingOTLP(t *testing.T) {
	t.Parallel()
	applyOutboxSQL(t)
	f := newFixture(t, "")
	prefix := "outbox_" + f.name
	o, url := otlpHTTP(t)
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	r := startRelayEnv(t, f.args("--message-prefix", prefix, "--tracing"), []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + url, "OTEL_BSP_SCHEDULE_DELAY=100", "OTEL_RESOURCE_ATTRIBUTES=deployment.environment.name=relay-test"})
	r.waitStreaming(90 * time.Second)
	ids, writers := tracedEvents(t, f, prefix)
	var recs map[string]record
	waitFor(t, 120*time.Second, "the rows and the message in Kafka", func() bool {
		recs = byID(c.records())
		for _, id := range ids {
			if _, ok := recs[id]; !ok {
				return false
			}
		}
		return true
	})

	// The span each sampled record's traceparent names reaches the receiver.
	spanOf := map[string]string{} // role → span id
	for _, role := range []string{"sampled", "root", "dead", "message"} {
		traceID, spanID, flags := parseTraceparent(t, recs[ids[role]].Headers["traceparent"])
		if flags != "01" {
			t.Errorf("%s: the record's traceparent flags %s, want 01", role, flags)
		}
		if w, ok := writers[role]; ok && (traceID != w.trace || spanID == w.span) {
			t.Errorf("%s: the record's traceparent %s, want the writer's trace %s and a span of the relay's, not the writer's %s",
				role, recs[ids[role]].Headers["traceparent"], w.trace, w.span)
		}
		spanOf[role] = spanID
	}
	var spans map[string]*tracepb.Span
	waitFor(t, 60*time.Second, "the records' spans at the OTLP receiver", func() bool {
		spans, _ = o.bySpanID()
		for _, id := range spanOf {
			if spans[id] == nil {
				return false
			}
		}
		return true
	})
	for _, role := range []string{"sampled", "message", "dead", "root"} {
		rec, s := recs[ids[role]], spans[spanOf[role]]
		if s.GetKind() != tracepb.Span_SPAN_KIND_PRODUCER || s.GetName() != "send "+rec.Topic {
			t.Errorf("%s: span %q of kind %v, want %q, producer", role, s.GetName(), s.GetKind(), "send "+rec.Topic)
		}
		if w, ok := writers[role]; ok {
			if got := hex.EncodeToString(s.GetParentSpanId()); got != w.span {
				t.Errorf("%s: span's parent %s, want the writer's span %s", role, got, w.span)
			}
			if got := hex.EncodeToString(s.GetTraceId()); got != w.trace {
				t.Errorf("%s: span's trace %s, want the writer's %s", role, got, w.trace)
			}
		} else if len(s.GetParentSpanId()) != 0 {
			t.Errorf("%s: span has parent %x, want a root span", role, s.GetParentSpanId())
		}
		a := spanAttrs(s)
		wantAttrs := map[string]string{"messaging.system": "kafka", "messaging.destination.name": rec.Topic,
			"messaging.destination.partition.id": strconv.Itoa(int(rec.Partition)), "messaging.kafka.offset": strconv.FormatInt(rec.Offset, 10),
			"messaging.message.id": ids[role], "cdc_relay.event_type": rec.Headers["event_type"]}
		if role == "dead" {
			wantAttrs["error.type"] = "no_schema"
			wantAttrs["cdc_relay.event_type"] = "NoSchemaForThis"
			if rec.Topic != f.dlq || rec.Headers["error_kind"] != "no_schema" {
				t.Errorf("dead letter in %s with error_kind %q, want %s, no_schema", rec.Topic, rec.Headers["error_kind"], f.dlq)
			}
			if s.GetStatus().GetCode() != tracepb.Status_STATUS_CODE_ERROR {
				t.Errorf("dead letter's span status %v, want an error", s.GetStatus())
			}
		}
		for k, v := range wantAttrs {
			if a[k] != v {
				t.Errorf("%s: span attribute %s = %q, want %q (all: %v)", role, k, a[k], v, a)
			}
		}
		start, end := time.Unix(0, int64(s.GetStartTimeUnixNano())), time.Unix(0, int64(s.GetEndTimeUnixNano()))
		// The record timestamp is the commit time in milliseconds.
		if role != "dead" && !start.Truncate(time.Millisecond).Equal(rec.Timestamp) {
			t.Errorf("%s: span starts at %s, the record's timestamp (the commit time) is %s", role, start.Format(time.RFC3339Nano), rec.Timestamp.Format(time.RFC3339Nano))
		}
		// The span ends when the relay hears the broker's ack, which can come
		// a moment after a consumer could read the record: it must start
		// before the read and end around it, not at shutdown.
		if end.Before(start) || !start.Before(rec.At) || end.After(rec.At.Add(5*time.Second)) {
			t.Errorf("%s: span from %s to %s; want it to start before the consumer read the record (%s) and end after it starts, within 5 s of the read", role, start, end, rec.At)
		}
	}
	if got := recs[ids["sampled"]].Headers["tracestate"]; got != "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7" {
		t.Errorf("tracestate %q, want the writer's", got)
	}
	if got, want := recs[ids["unsampled"]].Headers["traceparent"], writers["unsampled"].traceparent("00"); got != want {
		t.Errorf("unsampled row's traceparent %q, want it as written, %q", got, want)
	}

	// After a clean stop every span is flushed: the unsampled row's trace
	// has none, and no span came twice.
	if code := r.terminate(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	spans, count := o.bySpanID()
	for id, s := range spans {
		if hex.EncodeToString(s.GetTraceId()) == writers["unsampled"].trace {
			t.Errorf("span %s %q of the unsampled row's trace was exported", id, s.GetName())
		}
		if count[id] != 1 {
			t.Errorf("span %s exported %d times", id, count[id])
		}
	}
	o.mu.Lock()
	for _, res := range o.resources {
		if res["service.name"] != "cdc-relay" || res["deployment.environment.name"] != "relay-test" {
			t.Errorf("resource %v, want service.name cdc-relay and OTEL_RESOURCE_ATTRIBUTES' deployment.environment.name", res)
		}
	}
	o.mu.Unlock()
	o.check(t)
}

// TestTracingOTLPGRPC: OTEL_TRACES_EXPORTER=otlp alone turns tracing on,
// and OTEL_EXPORTER_OTLP_PROTOCOL=grpc exports to the official gRPC
// TraceService: the record's traceparent names the span, a child of the
// writer's.
func TestTracingOTLPGRPC(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	o, url := otlpGRPC(t)
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	r := startRelayEnv(t, f.args(), []string{"OTEL_TRACES_EXPORTER=otlp", "OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + url, "OTEL_BSP_SCHEDULE_DELAY=100"})
	r.waitStreaming(90 * time.Second)
	w := newWriterContext()
	agg := uuidFor(901)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ids, err := f.insertTx(ctx, f.connect(), []event{{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated",
		Payload: orderCreated(agg, 1), Headers: fmt.Sprintf(`{"traceparent": %q}`, w.traceparent("01"))}})
	if err != nil {
		t.Fatal(err)
	}
	rec := c.waitIDs(120*time.Second, ids)[0]
	traceID, spanID, _ := parseTraceparent(t, rec.Headers["traceparent"])
	var s *tracepb.Span
	waitFor(t, 60*time.Second, "the record's span at the gRPC receiver", func() bool {
		spans, _ := o.bySpanID()
		s = spans[spanID]
		return s != nil
	})
	if traceID != w.trace || hex.EncodeToString(s.GetParentSpanId()) != w.span || spanAttrs(s)["messaging.kafka.offset"] != strconv.FormatInt(rec.Offset, 10) {
		t.Errorf("span %q in trace %s, parent %x, attributes %v; want the writer's trace %s, parent %s, offset %d",
			s.GetName(), traceID, s.GetParentSpanId(), spanAttrs(s), w.trace, w.span, rec.Offset)
	}
	if code := r.terminate(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// TestTracingOffKeepsHeaders: without --tracing, even with an OTLP
// endpoint in the environment, the record's traceparent and tracestate are
// the bytes the writer wrote, and nothing is exported.
func TestTracingOffKeepsHeaders(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	o, url := otlpHTTP(t)
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	r := startRelayEnv(t, f.args(), []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + url, "OTEL_BSP_SCHEDULE_DELAY=100"})
	r.waitStreaming(90 * time.Second)
	w := newWriterContext()
	tp, ts := w.traceparent("01"), "congo=t61rcWkgMzE"
	agg := uuidFor(902)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ids, err := f.insertTx(ctx, f.connect(), []event{{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated",
		Payload: orderCreated(agg, 1), Headers: fmt.Sprintf(`{"traceparent": %q, "tracestate": %q}`, tp, ts)}})
	if err != nil {
		t.Fatal(err)
	}
	rec := c.waitIDs(120*time.Second, ids)[0]
	if !bytes.Equal([]byte(rec.Headers["traceparent"]), []byte(tp)) || rec.Headers["tracestate"] != ts {
		t.Errorf("traceparent %q tracestate %q, want the writer's %q %q", rec.Headers["traceparent"], rec.Headers["tracestate"], tp, ts)
	}
	if code := r.terminate(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	if spans, _ := o.bySpanID(); len(spans) != 0 {
		t.Errorf("%d spans exported with tracing off", len(spans))
	}
	if strings.Contains(r.Output(), "tracing on") {
		t.Errorf("the relay logged that tracing is on")
	}
}

// TestTracingRefusedRecord: a record too large for its topic
// (max.message.bytes) becomes a dead letter in its place, and its span goes
// along: the letter's traceparent names a span "send <dlq>", a child of the
// writer's, with error.type too_large and the letter's partition and offset.
func TestTracingRefusedRecord(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	createTopic(t, broker.Addr(), f.topic("Order"), map[string]string{"max.message.bytes": "20000"})
	o, url := otlpHTTP(t)
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	r := startRelayEnv(t, f.args("--tracing"), []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + url, "OTEL_BSP_SCHEDULE_DELAY=100"})
	r.waitStreaming(90 * time.Second)
	w := newWriterContext()
	agg := uuidFor(903)
	big := strings.Replace(orderCreated(agg, 1), `"c-1"`, `"`+strings.Repeat("B", 40000)+`"`, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ids, err := f.insertTx(ctx, f.connect(), []event{{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated",
		Payload: big, Headers: fmt.Sprintf(`{"traceparent": %q}`, w.traceparent("01"))}})
	if err != nil {
		t.Fatal(err)
	}
	rec := c.waitIDs(120*time.Second, ids)[0]
	if rec.Topic != f.dlq || rec.Headers["error_kind"] != "too_large" {
		t.Fatalf("the refused record went to %s with error_kind %q, want %s, too_large", rec.Topic, rec.Headers["error_kind"], f.dlq)
	}
	traceID, spanID, _ := parseTraceparent(t, rec.Headers["traceparent"])
	var s *tracepb.Span
	waitFor(t, 60*time.Second, "the dead letter's span at the receiver", func() bool {
		spans, _ := o.bySpanID()
		s = spans[spanID]
		return s != nil
	})
	a := spanAttrs(s)
	if traceID != w.trace || hex.EncodeToString(s.GetParentSpanId()) != w.span || s.GetName() != "send "+f.dlq || a["error.type"] != "too_large" ||
		a["messaging.destination.name"] != f.dlq || a["messaging.kafka.offset"] != strconv.FormatInt(rec.Offset, 10) ||
		a["messaging.destination.partition.id"] != strconv.Itoa(int(rec.Partition)) {
		t.Errorf("span %q in trace %s, parent %x, attributes %v; want send %s in the writer's trace %s under %s, too_large, at %d/%d",
			s.GetName(), traceID, s.GetParentSpanId(), a, f.dlq, w.trace, w.span, rec.Partition, rec.Offset)
	}
	if code := r.terminate(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	o.check(t)
}
