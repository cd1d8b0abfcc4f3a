package relay

import (
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
