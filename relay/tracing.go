package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/cdc-relay/cdc-relay/decoder"
	"github.com/cdc-relay/cdc-relay/publisher"
	"github.com/cdc-relay/cdc-relay/rabbitmq"
	recordpkg "github.com/cdc-relay/cdc-relay/record"
)

// The OTEL_* variables the relay reads itself; the SDK and its OTLP
// exporters read the rest (endpoint, headers, timeouts, OTEL_BSP_*).
const (
	envSDKDisabled    = "OTEL_SDK_DISABLED"
	envTracesExporter = "OTEL_TRACES_EXPORTER"
	envProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	envTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	envSampler        = "OTEL_TRACES_SAMPLER"
)

// Span attributes. The messaging.* names are OpenTelemetry's messaging
// semantic conventions (v1.37: messaging.kafka.offset, not the older
// messaging.kafka.message.offset; under RabbitMQ the destination is the
// exchange, "" for the default one, and the routing key has an attribute of
// its own); the cdc_relay.* ones are the relay's.
const (
	attrSystem        = attribute.Key("messaging.system")
	attrOperationType = attribute.Key("messaging.operation.type")
	attrOperationName = attribute.Key("messaging.operation.name")
	attrDestination   = attribute.Key("messaging.destination.name")
	attrPartition     = attribute.Key("messaging.destination.partition.id")
	attrOffset        = attribute.Key("messaging.kafka.offset")
	attrRoutingKey    = attribute.Key("messaging.rabbitmq.destination.routing_key")
	attrMessageID     = attribute.Key("messaging.message.id")
	attrErrorType     = attribute.Key("error.type")
	attrEventType     = attribute.Key("cdc_relay.event_type")
	attrAggregateType = attribute.Key("cdc_relay.aggregate_type")
	attrAggregateID   = attribute.Key("cdc_relay.aggregate_id")
)

// tracingShutdownTimeout bounds the flush of the spans still queued when
// the relay stops.
const tracingShutdownTimeout = 5 * time.Second

// tracing is the relay's OpenTelemetry tracing, nil when it is off: it
// gives each event a span and replaces the record's traceparent with one
// naming it.
type tracing struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
	prop     propagation.TraceContext
	// rabbit, under --rabbitmq-url, says where records go (the exchange
	// and the routing key, or the dead-letter stream); nil under Kafka.
	rabbit *rabbitmq.Format
}

// tracingOn says whether the relay traces: --tracing, or
// OTEL_TRACES_EXPORTER=otlp set explicitly; OTEL_SDK_DISABLED=true or
// OTEL_TRACES_EXPORTER=none keep it off either way.
func tracingOn(flag bool, getenv func(string) string) (bool, error) {
	if strings.EqualFold(strings.TrimSpace(getenv(envSDKDisabled)), "true") {
		return false, nil
	}
	switch exp := strings.TrimSpace(getenv(envTracesExporter)); exp {
	case "":
		return flag, nil
	case "none":
		return false, nil
	case "otlp":
		return true, nil
	default:
		return false, &ConfigError{Msg: fmt.Sprintf("%s: %q is not an exporter the relay has: use otlp or none", envTracesExporter, exp)}
	}
}

// newTracing builds the tracer provider when tracing is on, and returns nil
// when it is off. A bad OTEL_* value is a *ConfigError naming the variable.
func newTracing(ctx context.Context, flag bool, getenv func(string) string, log *slog.Logger) (*tracing, error) {
	on, err := tracingOn(flag, getenv)
	if err != nil || !on {
		return nil, err
	}
	switch s := strings.ToLower(strings.TrimSpace(getenv(envSampler))); s {
	case "", "always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio":
	default:
		return nil, &ConfigError{Msg: fmt.Sprintf("%s: %q is not a sampler the relay has: use parentbased_always_on (the default), parentbased_always_off, parentbased_traceidratio, always_on, always_off or traceidratio", envSampler, s)}
	}
	name, proto := envTracesProtocol, strings.TrimSpace(getenv(envTracesProtocol))
	if proto == "" {
		name, proto = envProtocol, strings.TrimSpace(getenv(envProtocol))
	}
	var exporter sdktrace.SpanExporter
	switch proto {
	case "", "http/protobuf":
		exporter, err = otlptracehttp.New(ctx)
	case "grpc":
		exporter, err = otlptracegrpc.New(ctx)
	default:
		return nil, &ConfigError{Msg: fmt.Sprintf("%s: %q is not a protocol the relay speaks: use http/protobuf (the default) or grpc", name, proto)}
	}
	if err != nil {
		return nil, &ConfigError{Msg: fmt.Sprintf("%s: create the OTLP exporter: %v", envTracesExporter, err)}
	}
	// service.name defaults to cdc-relay; OTEL_RESOURCE_ATTRIBUTES and
	// OTEL_SERVICE_NAME (read last) override it.
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "cdc-relay"), attribute.String("service.version", Version)),
		resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil {
		exporter.Shutdown(ctx)
		return nil, &ConfigError{Msg: fmt.Sprintf("OTEL_RESOURCE_ATTRIBUTES: %v: use key=value pairs separated by commas, values percent-encoded", err)}
	}
	// The SDK reports failed exports here (at most one a batch, every
	// few seconds by default); spans are then lost, events never are.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("OpenTelemetry: spans not exported", "err", err)
	}))
	// The sampler comes from OTEL_TRACES_SAMPLER, parentbased_always_on by
	// default: a row's span is sampled when its traceparent says so.
	provider := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	log.Info("tracing on: each event gets a span, exported over OTLP", "protocol", cmpOr(proto, "http/protobuf"), "service_name", serviceName(res))
	return &tracing{provider: provider, tracer: provider.Tracer("github.com/cdc-relay/cdc-relay", trace.WithInstrumentationVersion(Version))}, nil
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func serviceName(res *resource.Resource) string {
	v, _ := res.Set().Value("service.name")
	return v.AsString()
}

// shutdown exports the spans still queued, within tracingShutdownTimeout.
func (t *tracing) shutdown(log *slog.Logger) {
	if t == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), tracingShutdownTimeout)
	defer cancel()
	if err := t.provider.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		log.Warn("OpenTelemetry: flush spans at shutdown", "err", err)
	}
}

// start gives rec, built from row of a transaction committed at commit, its
// span: a child of the record's traceparent (and tracestate) header,
// starting at the commit time. A sampled span's context replaces the
// traceparent header, and the span ends when the broker acknowledges the
// record (rec.OnAck). An unsampled one leaves the headers as written. inv,
// when set, makes rec a dead letter: the span names its error kind.
func (t *tracing) start(rec *publisher.Record, commit time.Time, row *decoder.Row, inv *recordpkg.Invalid) {
	carrier := headerCarrier{rec: rec}
	parent := t.prop.Extract(context.Background(), carrier)
	attrs := make([]attribute.KeyValue, 0, 9)
	name, badKey := "send "+rec.Topic, false
	if t.rabbit == nil {
		attrs = append(attrs, attrSystem.String("kafka"), attrOperationType.String("send"), attrOperationName.String("send"),
			attrDestination.String(rec.Topic))
	} else {
		var exchange, key string
		if exchange, key, badKey = RabbitDestination(t.rabbit, rec); badKey {
			exchange, key = "", t.rabbit.DLQStream // the sink's dead letter
		}
		attrs = append(attrs, attrSystem.String("rabbitmq"), attrOperationType.String("send"), attrOperationName.String("send"),
			attrDestination.String(exchange), attrRoutingKey.String(key))
		name = "send"
		if exchange != "" {
			name += " " + exchange
		}
	}
	for _, a := range [...]struct {
		k attribute.Key
		v []byte
	}{{attrMessageID, row.ID}, {attrEventType, row.EventType}, {attrAggregateType, row.AggregateType}, {attrAggregateID, row.AggregateID}} {
		if len(a.v) > 0 {
			attrs = append(attrs, a.k.String(string(a.v)))
		}
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...)}
	if !commit.IsZero() {
		opts = append(opts, trace.WithTimestamp(commit))
	}
	ctx, span := t.tracer.Start(parent, name, opts...)
	if !span.SpanContext().IsSampled() {
		span.End()
		return
	}
	if inv != nil {
		deadLetter(span, inv)
	} else if badKey {
		span.SetAttributes(attrErrorType.String(rabbitmq.KindInvalidRouteKey))
		span.SetStatus(codes.Error, "dead letter: "+rabbitmq.KindInvalidRouteKey)
	}
	t.prop.Inject(ctx, carrier)
	rec.OnAck = &eventSpan{span: span}
}

// useRabbitMQ makes t's spans name cfg's RabbitMQ destinations
// (--rabbitmq-url) instead of Kafka's topics; a nil t (tracing off) stays
// off.
func (t *tracing) useRabbitMQ(cfg *Config) error {
	if t == nil {
		return nil
	}
	f, err := RabbitFormat(cfg)
	if err != nil {
		return err
	}
	t.rabbit = &f
	return nil
}

// deadLetter notes on span that its event went to the dead-letter topic.
func deadLetter(span trace.Span, inv *recordpkg.Invalid) {
	span.SetAttributes(attrErrorType.String(inv.Kind))
	span.SetStatus(codes.Error, "dead letter: "+inv.Kind)
}

// rejected moves the span of r, a record the broker refused, to dl, the
// dead letter sent in its place (which carries r's headers, so its
// traceparent already names the span).
func (t *tracing) rejected(r, dl *publisher.Record, inv *recordpkg.Invalid) {
	s, ok := r.OnAck.(*eventSpan)
	if !ok {
		return
	}
	r.OnAck = nil
	s.span.SetName("send " + dl.Topic)
	s.span.SetAttributes(attrDestination.String(dl.Topic))
	deadLetter(s.span, inv)
	dl.OnAck = s
}

// eventSpan is a record's publisher.AckHook: Kafka's acknowledgement
// names the partition and offset and ends the span; RabbitMQ's confirm,
// which has neither (-1), only ends it.
type eventSpan struct{ span trace.Span }

var _ publisher.ReturnHook = (*eventSpan)(nil)

// Returned notes that RabbitMQ returned the event unroutable and its dead
// letter went to routingKey, the dead-letter stream, through the default
// exchange.
func (s *eventSpan) Returned(kind, routingKey string) {
	s.span.SetName("send")
	s.span.SetAttributes(attrDestination.String(""), attrRoutingKey.String(routingKey), attrErrorType.String(kind))
	s.span.SetStatus(codes.Error, "dead letter: "+kind)
}

func (s *eventSpan) Acked(partition int32, offset int64) {
	if partition >= 0 {
		s.span.SetAttributes(attrPartition.String(strconv.Itoa(int(partition))), attrOffset.Int64(offset))
	}
	s.span.End()
}

// headerCarrier is a propagation.TextMapCarrier over a record's headers.
type headerCarrier struct{ rec *publisher.Record }

var _ propagation.TextMapCarrier = headerCarrier{}

func (c headerCarrier) Get(key string) string {
	for _, h := range c.rec.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// Set replaces the value of the header key, or adds the header.
func (c headerCarrier) Set(key, value string) {
	for i := range c.rec.Headers {
		if c.rec.Headers[i].Key == key {
			c.rec.Headers[i].Value = []byte(value)
			return
		}
	}
	c.rec.Headers = AppendHeader(c.rec.Headers, key, []byte(value))
}

func (c headerCarrier) Keys() []string {
	keys := make([]string, len(c.rec.Headers))
	for i, h := range c.rec.Headers {
		keys[i] = h.Key
	}
	return keys
}
