package relay

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/cdc-relay/cdc-relay/checkpoint"
	"github.com/cdc-relay/cdc-relay/publisher"
	"github.com/cdc-relay/cdc-relay/rabbitmq"
	"github.com/cdc-relay/cdc-relay/replication"
)

// newRabbitSink is run's RabbitMQ sink for cfg (--rabbitmq-url): its
// messages are counted in m, and the dead letters it makes (unroutable,
// invalid_routing_key) counted and logged, at most one line a minute per
// kind, and told to also when it is not nil.
func newRabbitSink(cfg *Config, m *Metrics, log *slog.Logger, also func(kind, id, reason string)) (*rabbitmq.Sink, error) {
	format, err := RabbitFormat(cfg)
	if err != nil {
		return nil, err
	}
	limit := &rateLog{}
	return rabbitmq.NewSink(rabbitmq.SinkConfig{
		URL:     cfg.RabbitMQURL,
		TLS:     cfg.RabbitMQTLSConfig(),
		Declare: cfg.RabbitMQDeclare,
		Format:  format,
		// The tracker bounds what is in flight by the rows' sizes; the
		// window only has to hold it, messages being somewhat larger.
		MaxInFlight:      cfg.MaxInFlightEvents + 1024,
		MaxInFlightBytes: 2*cfg.MaxInFlightBytes + 16<<20,
		DeadLetter: func(kind, id, reason string) {
			if also != nil {
				also(kind, id, reason)
			}
			m.DeadLetter(kind)
			if n, ok := limit.allow(kind, time.Now()); ok {
				log.Warn("event sent to the dead-letter stream", "id", id, "reason", kind, "error", reason,
					"dlq_stream", cfg.RabbitMQDLQStream, "events", n)
			}
		},
		Observer: rabbitObserver{m: m, exchange: cfg.RabbitMQExchange},
		Logger:   log,
	}), nil
}

// brokerOf is the broker cfg publishes to, for the operator's texts.
func brokerOf(cfg *Config) checkpoint.Broker {
	if cfg.RabbitMQ() {
		return checkpoint.RabbitMQ
	}
	return checkpoint.Kafka
}

// deadLetterPlace names where dead letters go, in the logs: the
// dead-letter topic and its log key dlq_topic, or under RabbitMQ the
// dead-letter stream and dlq_stream.
func deadLetterPlace(b checkpoint.Broker) (place, key string) {
	if b == checkpoint.RabbitMQ {
		return "the dead-letter stream", "dlq_stream"
	}
	return "the dead-letter topic", "dlq_topic"
}

// DeadLetterPlace names where cfg's dead letters go, for the operator's
// texts: the dead-letter topic, or under RabbitMQ the dead-letter stream.
func DeadLetterPlace(cfg *Config) string {
	place, _ := deadLetterPlace(brokerOf(cfg))
	return place
}

// newRabbitCheckpoints is the checkpoint's backend under RabbitMQ: the
// streams named after --rabbitmq-checkpoint-stream.
func newRabbitCheckpoints(cfg *Config) checkpoint.Backend {
	return rabbitmq.NewCheckpointStore(RabbitCheckpointConfig(cfg))
}

// RabbitCheckpointConfig is the checkpoint store's configuration under
// RabbitMQ: the streams named after --rabbitmq-checkpoint-stream.
func RabbitCheckpointConfig(cfg *Config) rabbitmq.CheckpointConfig {
	return rabbitmq.CheckpointConfig{URL: cfg.RabbitMQURL, TLS: cfg.RabbitMQTLSConfig(), Name: cfg.RabbitMQCheckpointStream}
}

// NewRabbitSink is the RabbitMQ sink run publishes through, for the
// tools that publish as run does (replay): its dead letters are counted
// in the set-up's metrics, logged, and told to deadLetter (nil: nobody),
// with the event's id, before the confirm that acknowledges them.
func (s *Setup) NewRabbitSink(deadLetter func(kind, id, reason string)) (*rabbitmq.Sink, error) {
	return newRabbitSink(s.Config, s.Metrics, s.log, deadLetter)
}

// RabbitConfigErr is err as a *ConfigError naming the setting to fix (an
// exchange or stream of another kind, or missing while nothing is
// declared), or nil when err is none of those.
func RabbitConfigErr(err error) error { return rabbitConfigErr(err) }

// rabbitSession is a rabbitmq.Session as the handler's recordSink, its
// errors in the relay's terms (rabbitErr).
type rabbitSession struct{ *rabbitmq.Session }

var _ recordSink = rabbitSession{}

func (s rabbitSession) Enqueue(r *publisher.Record) error { return rabbitErr(s.Session.Enqueue(r)) }
func (s rabbitSession) Drain(ctx context.Context) error   { return rabbitErr(s.Session.Drain(ctx)) }
func (s rabbitSession) Err() error                        { return rabbitErr(s.Session.Err()) }

// rabbitErr makes the errors no reconnect fixes (an exchange or stream of
// another kind, one missing while the relay declares nothing, a dead-letter
// stream that routes nowhere) fatal configuration errors naming the
// setting: run exits 2.
func rabbitErr(err error) error {
	if err == nil {
		return nil
	}
	if cerr := rabbitConfigErr(err); cerr != nil {
		return replication.Fatal(cerr)
	}
	return err
}

// rabbitConfigErr is err as a *ConfigError naming the setting to fix, or
// nil when err is none of those.
func rabbitConfigErr(err error) error {
	var exErr *rabbitmq.ExchangeError
	var stErr *rabbitmq.StreamError
	var missing *rabbitmq.MissingError
	switch {
	case errors.As(err, &exErr):
		return ConfigErr("rabbitmq-exchange", "%v", exErr)
	case errors.As(err, &stErr):
		return ConfigErr("rabbitmq-dlq-stream", "%v", stErr)
	case errors.As(err, &missing) && missing.Kind == "exchange":
		return ConfigErr("rabbitmq-exchange", "%v", missing)
	case errors.As(err, &missing):
		return ConfigErr("rabbitmq-dlq-stream", "%v", missing)
	case errors.Is(err, rabbitmq.ErrDeadLetterUnroutable):
		return ConfigErr("rabbitmq-dlq-stream", "the broker returned a dead letter: no queue of that name takes it (deleted while the relay ran?); declare the stream, or let the relay (--rabbitmq-declare=true)")
	}
	return nil
}

// prepareRabbit declares (or checks) the exchange and the dead-letter
// stream before the stream starts: a setting to fix is a *StartError;
// a broker that cannot be reached is logged, and the relay starts anyway,
// its session retrying.
func prepareRabbit(ctx context.Context, sink *rabbitmq.Sink, cfg *Config, log *slog.Logger) error {
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	err := sink.Prepare(pctx)
	if err == nil || ctx.Err() != nil {
		return nil
	}
	if cerr := rabbitConfigErr(err); cerr != nil {
		return &StartError{Err: cerr}
	}
	if errors.Is(err, amqp.ErrCredentials) {
		// As Kafka's SASL refusal, retried: the password may be rotated
		// on the broker first.
		log.Error("rabbitmq refused the relay's credentials at startup: check the user and password in --rabbitmq-url (CDC_RELAY_RABBITMQ_URL or CDC_RELAY_RABBITMQ_URL_FILE); the relay retries; nothing is confirmed to PostgreSQL until the broker confirms the messages",
			"rabbitmq_url", Redact(cfg.RabbitMQURL), "err", Redact(err.Error()))
		return nil
	}
	log.Error("rabbitmq not reachable at startup: the relay retries; nothing is confirmed to PostgreSQL until the broker confirms the messages",
		"rabbitmq_url", Redact(cfg.RabbitMQURL), "err", Redact(err.Error()))
	return nil
}

// rabbitObserver counts what the broker answered in m.
type rabbitObserver struct {
	m        *Metrics
	exchange string
}

var _ rabbitmq.Observer = rabbitObserver{}

func (o rabbitObserver) Confirmed(n int) { o.m.published.WithLabelValues(o.exchange).Add(float64(n)) }
func (o rabbitObserver) Nacked()         { o.m.rabbit.nacks.Inc() }
func (o rabbitObserver) Returned()       { o.m.rabbit.unroutable.Inc() }
func (o rabbitObserver) Reconnected()    {}

// rabbitHealth is the RabbitMQ health that /readyz and
// cdc_relay_rabbitmq_blocked read: the sink's, blocked also while the
// checkpoint store's own connection is (a relay started during an alarm is
// blocked there first, before it publishes any event), since the earlier
// of the two.
func rabbitHealth(sink func() rabbitmq.Health, store checkpoint.Backend) func() rabbitmq.Health {
	blocked, _ := store.(checkpointAlarm)
	return func() rabbitmq.Health {
		h := sink()
		if blocked == nil {
			return h
		}
		if since, reason := blocked.Blocked(); !since.IsZero() && (h.BlockedSince.IsZero() || since.Before(h.BlockedSince)) {
			h.BlockedSince, h.BlockReason = since, reason
		}
		return h
	}
}

// checkpointAlarm is what rabbitHealth reads of the checkpoint store.
type checkpointAlarm interface {
	Blocked() (since time.Time, reason string)
}

var _ checkpointAlarm = (*rabbitmq.CheckpointStore)(nil)

// rabbitMetrics are the metrics of the RabbitMQ path.
type rabbitMetrics struct {
	nacks, unroutable prometheus.Counter
}

// newRabbitMetrics registers the RabbitMQ metrics in reg; blocked reads
// ready's RabbitMQ health.
func newRabbitMetrics(reg *prometheus.Registry, ready *readiness) rabbitMetrics {
	r := rabbitMetrics{
		nacks: prometheus.NewCounter(prometheus.CounterOpts{Name: "cdc_relay_rabbitmq_nacks_total",
			Help: "Messages RabbitMQ refused (basic.nack: a full queue with overflow=reject-publish), each sent again after a backoff."}),
		unroutable: prometheus.NewCounter(prometheus.CounterOpts{Name: "cdc_relay_rabbitmq_unroutable_total",
			Help: "Messages RabbitMQ returned as unroutable (no queue bound for the routing key), each sent to the dead-letter stream instead."}),
	}
	reg.MustRegister(r.nacks, r.unroutable, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cdc_relay_rabbitmq_blocked",
		Help: "1 while RabbitMQ blocks publishing, the relay's messages or its checkpoint writes (connection.blocked: a memory or disk alarm)."}, func() float64 {
		return boolFloat(ready.rabbitmq != nil && !ready.rabbitmq().BlockedSince.IsZero())
	}))
	return r
}

// rabbitDegraded is the degraded decision under RabbitMQ: publishing
// blocked by an alarm for longer than ProduceFailingLimit, connecting
// failing that long while events wait, or the oldest in-flight event
// older than InFlightAgeLimit.
func rabbitDegraded(h rabbitmq.Health, oldest time.Duration, now time.Time) string {
	if !h.BlockedSince.IsZero() {
		if d := now.Sub(h.BlockedSince); d > ProduceFailingLimit {
			return "rabbitmq: the broker has blocked publishing for " + d.Truncate(time.Second).String() + " (connection.blocked, a memory or disk alarm: " + h.BlockReason + ")"
		}
	}
	if !h.FailingSince.IsZero() && oldest > 0 {
		if d := now.Sub(h.FailingSince); d > ProduceFailingLimit {
			return "rabbitmq: cannot connect for " + d.Truncate(time.Second).String() + ": " + Redact(h.LastError)
		}
	}
	if oldest > InFlightAgeLimit {
		return "rabbitmq: oldest in-flight event waiting for " + oldest.Truncate(time.Second).String()
	}
	return ""
}
