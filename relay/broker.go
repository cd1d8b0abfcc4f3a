package relay

import (
	"os"
	"strings"

	"github.com/cdc-relay/cdc-relay/internal/config"
	"github.com/cdc-relay/cdc-relay/internal/kafkasec"
	"github.com/cdc-relay/cdc-relay/rabbitmq"
)

// ChooseBroker resolves which broker the relay publishes to: exactly one of
// --kafka-brokers and --rabbitmq-url, and no setting of the other one
// given explicitly (config.KafkaOnly, config.RabbitMQOnly).
func ChooseBroker(c *Config, v *config.Values) error {
	c.RabbitMQURL = config.RabbitMQURL.From(v)
	if c.RabbitMQURL != "" && len(c.KafkaBrokers) > 0 {
		// run's settings say so first (config.Command.OneOf); the other
		// commands that share them require --kafka-brokers.
		return ConfigErr("rabbitmq-url", "is set and so is --kafka-brokers: set exactly one of them")
	}
	if c.RabbitMQURL == "" {
		return Explicit(v, config.RabbitMQOnly, "is a RabbitMQ setting, and the relay publishes to Kafka (--kafka-brokers): remove it, or set --rabbitmq-url instead of --kafka-brokers")
	}
	if err := Explicit(v, config.KafkaOnly, "is a Kafka setting, and the relay publishes to RabbitMQ (--rabbitmq-url): remove it (see docs/CONFIGURATION.md#rabbitmq for its RabbitMQ counterpart, if any)"); err != nil {
		return err
	}
	if c.ExactlyOnce {
		return ConfigErr("delivery", "exactly-once needs Kafka: AMQP 0-9-1 has no transaction spanning the checkpoint and the messages that a consumer can read atomically (a tx channel commits queue by queue, and no consumer reads committed messages only); use at-least-once, and dedupe by message_id in the consumer")
	}
	c.RabbitMQExchange = config.RabbitMQExchange.From(v)
	c.RabbitMQDeclare = config.RabbitMQDeclare.From(v)
	c.RoutingKey = config.RoutingKey.From(v)
	c.RabbitMQDLQStream = config.RabbitMQDLQStream.From(v)
	c.RabbitMQCheckpointStream = config.RabbitMQCheckpointStream.From(v)
	if err := rabbitTLS(c, v); err != nil {
		return err
	}
	if _, err := rabbitmq.ParseRoutingKey(c.RoutingKey); err != nil {
		return ConfigErr("routing-key", "%v", err)
	}
	if c.RabbitMQDLQStream == c.RabbitMQExchange {
		return ConfigErr("rabbitmq-dlq-stream", "%q is the name of --rabbitmq-exchange too: give the dead-letter stream a name of its own", c.RabbitMQDLQStream)
	}
	return nil
}

// ToolBroker resolves the broker of a tool that takes some of run's
// settings only (tail, dlq stats, dlq retire): --rabbitmq-url into c, its
// TLS settings, and no setting of the other broker given explicitly. The
// command's OneOf has made sure exactly one of the two is set.
func ToolBroker(c *Config, v *config.Values) error {
	c.RabbitMQURL = config.RabbitMQURL.From(v)
	if c.RabbitMQURL == "" {
		return Explicit(v, config.RabbitMQOnly, "is a RabbitMQ setting, and --kafka-brokers names Kafka: remove it, or set --rabbitmq-url instead of --kafka-brokers")
	}
	if err := Explicit(v, config.KafkaOnly, "is a Kafka setting, and --rabbitmq-url names RabbitMQ: remove it (see docs/CONFIGURATION.md#rabbitmq for its RabbitMQ counterpart, if any)"); err != nil {
		return err
	}
	return rabbitTLS(c, v)
}

// rabbitTLS resolves the amqps settings into c: each file must exist,
// the URL must be amqps://, a client certificate needs its key, and the
// files must load.
func rabbitTLS(c *Config, v *config.Values) error {
	for _, s := range []config.StringSetting{config.RabbitMQTLSCAFile, config.RabbitMQTLSCertFile, config.RabbitMQTLSKeyFile} {
		path := s.From(v)
		if path == "" {
			continue
		}
		if !strings.HasPrefix(c.RabbitMQURL, "amqps://") {
			return ConfigErr(s.Name, "is set but --rabbitmq-url is not amqps://: TLS needs an amqps:// URL (port 5671 by default)")
		}
		if _, err := os.Stat(path); err != nil {
			return ConfigErr(s.Name, "%v", err)
		}
	}
	c.RabbitMQTLSCAFile, c.RabbitMQTLSCertFile, c.RabbitMQTLSKeyFile = config.RabbitMQTLSCAFile.From(v), config.RabbitMQTLSCertFile.From(v), config.RabbitMQTLSKeyFile.From(v)
	if (c.RabbitMQTLSCertFile == "") != (c.RabbitMQTLSKeyFile == "") {
		return ConfigErr("rabbitmq-tls-cert-file", "a client certificate needs both --rabbitmq-tls-cert-file and --rabbitmq-tls-key-file")
	}
	if c.RabbitMQTLSCAFile == "" && c.RabbitMQTLSCertFile == "" {
		return nil
	}
	tc, err := kafkasec.TLSConfig(c.RabbitMQTLSCAFile, c.RabbitMQTLSCertFile, c.RabbitMQTLSKeyFile)
	if err != nil {
		key := "rabbitmq-tls-ca-file"
		if c.RabbitMQTLSCertFile != "" && !strings.Contains(err.Error(), "CA") {
			key = "rabbitmq-tls-cert-file"
		}
		return ConfigErr(key, "%v", err)
	}
	c.RabbitMQTLS = tc
	return nil
}

// Explicit returns a *ConfigError naming the first of settings given
// explicitly (flag, env or YAML), with msg; a setting the command does not
// take is passed over.
func Explicit(v *config.Values, settings []string, msg string) error {
	for _, name := range settings {
		if v.Takes(name) && v.Source(name) != config.FromDefault {
			return ConfigErr(name, "%s", msg)
		}
	}
	return nil
}
