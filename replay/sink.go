package replay

import (
	"context"

	"github.com/cdc-relay/cdc-relay/publisher"
	"github.com/cdc-relay/cdc-relay/rabbitmq"
	"github.com/cdc-relay/cdc-relay/relay"
)

// session is what replay hands its records to: a session of the Kafka
// publisher, or under --rabbitmq-url one of run's RabbitMQ sink.
type session interface {
	Enqueue(*publisher.Record) error
	Drain(context.Context) error
	Close()
	Done() <-chan struct{}
	Err() error
}

var (
	_ session = (*publisher.Session)(nil)
	_ session = rabbitSession{}
)

// rabbitSession is a RabbitMQ session whose errors that no retry fixes
// (an exchange of another type, a stream missing) name the setting: the
// replay exits 2 on them.
type rabbitSession struct{ *rabbitmq.Session }

func (s rabbitSession) Enqueue(r *publisher.Record) error { return rabbitErr(s.Session.Enqueue(r)) }
func (s rabbitSession) Drain(ctx context.Context) error   { return rabbitErr(s.Session.Drain(ctx)) }
func (s rabbitSession) Err() error                        { return rabbitErr(s.Session.Err()) }

func rabbitErr(err error) error {
	if cerr := relay.RabbitConfigErr(err); cerr != nil {
		return cerr
	}
	return err
}

// newRabbitSessions makes run's RabbitMQ sink and checks (or declares)
// its exchange and dead-letter stream: a setting to fix is a
// *relay.ConfigError; a broker not reachable is an error as it is. The
// events it makes dead letters of (unroutable, invalid_routing_key) are
// printed as such.
func newRabbitSessions(ctx context.Context, su *relay.Setup, acker *replayAcker, dryRun bool) (func(context.Context, publisher.Acker) session, error) {
	dlq := su.Config.RabbitMQDLQStream
	sink, err := su.NewRabbitSink(func(kind, id, reason string) { acker.deadLettered(id, dlq, reason) })
	if err != nil {
		return nil, err
	}
	if !dryRun {
		if err := sink.Prepare(ctx); err != nil {
			return nil, rabbitErr(err)
		}
	}
	return func(ctx context.Context, acker publisher.Acker) session {
		return rabbitSession{sink.NewSession(ctx, acker)}
	}, nil
}

// broker names the broker replay publishes to, for messages.
func broker(cfg *relay.Config) string {
	if cfg.RabbitMQ() {
		return "RabbitMQ"
	}
	return "Kafka"
}

// brokerKey and brokerValue are the broker in replay's start log line.
func brokerKey(cfg *relay.Config) string {
	if cfg.RabbitMQ() {
		return "rabbitmq_url"
	}
	return "kafka_brokers"
}

func brokerValue(cfg *relay.Config) any {
	if cfg.RabbitMQ() {
		return relay.Redact(cfg.RabbitMQURL)
	}
	return cfg.KafkaBrokers
}
