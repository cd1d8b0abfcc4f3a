package main

import (
	"github.com/cdc-relay/cdc-relay/internal/config"
	"github.com/cdc-relay/cdc-relay/rabbitmq"
)

// chooseBroker resolves which broker the relay publishes to: exactly one of
// --kafka-brokers and --rabbitmq-url, and no setting of the other one
// given explicitly (config.KafkaOnly, config.RabbitMQOnly).
func chooseBroker(c *Config, v *config.Values) error {
	c.RabbitMQURL = config.RabbitMQURL.From(v)
	if c.RabbitMQURL != "" && len(c.KafkaBrokers) > 0 {
		// run's settings say so first (config.Command.OneOf); the other
		// commands that share them require --kafka-brokers.
		return cfgErr("rabbitmq-url", "is set and so is --kafka-brokers: set exactly one of them")
	}
	if c.RabbitMQURL == "" {
		return explicit(v, config.RabbitMQOnly, "is a RabbitMQ setting, and the relay publishes to Kafka (--kafka-brokers): remove it, or set --rabbitmq-url instead of --kafka-brokers")
	}
	if err := explicit(v, config.KafkaOnly, "is a Kafka setting, and the relay publishes to RabbitMQ (--rabbitmq-url): remove it (see docs/CONFIGURATION.md#rabbitmq for its RabbitMQ counterpart, if any)"); err != nil {
		return err
	}
	if c.ExactlyOnce {
		return cfgErr("delivery", "exactly-once needs Kafka: AMQP 0-9-1 has no transaction spanning the checkpoint and the messages that a consumer can read atomically (a tx channel commits queue by queue, and no consumer reads committed messages only); use at-least-once, and dedupe by message_id in the consumer")
	}
	c.RabbitMQExchange = config.RabbitMQExchange.From(v)
	c.RabbitMQDeclare = config.RabbitMQDeclare.From(v)
	c.RoutingKey = config.RoutingKey.From(v)
	c.RabbitMQDLQStream = config.RabbitMQDLQStream.From(v)
	c.RabbitMQCheckpointStream = config.RabbitMQCheckpointStream.From(v)
	if _, err := rabbitmq.ParseRoutingKey(c.RoutingKey); err != nil {
		return cfgErr("routing-key", "%v", err)
	}
	if c.RabbitMQDLQStream == c.RabbitMQExchange {
		return cfgErr("rabbitmq-dlq-stream", "%q is the name of --rabbitmq-exchange too: give the dead-letter stream a name of its own", c.RabbitMQDLQStream)
	}
	return nil
}

// explicit returns a *ConfigError naming the first of settings given
// explicitly (flag, env or YAML), with msg.
func explicit(v *config.Values, settings []string, msg string) error {
	for _, name := range settings {
		if v.Source(name) != config.FromDefault {
			return cfgErr(name, "%s", msg)
		}
	}
	return nil
}
