package relay

import (
	"github.com/cdc-relay/cdc-relay/publisher"
	"github.com/cdc-relay/cdc-relay/rabbitmq"
	recordpkg "github.com/cdc-relay/cdc-relay/record"
)

// RabbitFormat is how run's RabbitMQ sink makes messages of records: the
// exchange, the --routing-key template, the dead-letter stream and the
// content type of --value-format. dlq redrive publishes with it as run
// does. A bad template is a *ConfigError.
func RabbitFormat(cfg *Config) (rabbitmq.Format, error) {
	rk, err := rabbitmq.ParseRoutingKey(cfg.RoutingKey)
	if err != nil {
		return rabbitmq.Format{}, ConfigErr("routing-key", "%v", err)
	}
	contentType := "application/avro"
	if cfg.ValueFormat == recordpkg.ValueJSON {
		contentType = "application/json"
	}
	return rabbitmq.Format{Exchange: cfg.RabbitMQExchange, RoutingKey: rk, DLQStream: cfg.RabbitMQDLQStream,
		ContentType: contentType, CloudEvents: cfg.CloudEvents}, nil
}

// RabbitDestination is where the RabbitMQ sink of f sends rec: its
// exchange and routing key, or for a dead letter of the record step (rec's
// topic is the dead-letter stream) the default exchange ("") and the
// dead-letter stream. badKey says that the routing key is over 255 bytes,
// which makes the sink send a dead letter (invalid_routing_key) instead.
func RabbitDestination(f *rabbitmq.Format, rec *publisher.Record) (exchange, routingKey string, badKey bool) {
	if rec.Topic == f.DLQStream {
		return "", f.DLQStream, false
	}
	k := f.RoutingKey.Append(nil, rec.EventType, rec.AggregateType, rec.AggregateID)
	return f.Exchange, string(k), len(k) > rabbitmq.MaxRoutingKeyBytes
}
