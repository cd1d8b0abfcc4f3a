package main

import (
	"os"

	"github.com/cdc-relay/cdc-relay/internal/config"
)

// kafkaSecurity validates the Kafka TLS and SASL settings into c.
func kafkaSecurity(c *Config, v *config.Values) error {
	c.KafkaTLS = config.KafkaTLS.From(v)
	c.KafkaTLSCAFile, c.KafkaTLSCertFile, c.KafkaTLSKeyFile = config.KafkaTLSCAFile.From(v), config.KafkaTLSCertFile.From(v), config.KafkaTLSKeyFile.From(v)
	for key, path := range map[string]string{"kafka-tls-ca-file": c.KafkaTLSCAFile, "kafka-tls-cert-file": c.KafkaTLSCertFile, "kafka-tls-key-file": c.KafkaTLSKeyFile} {
		if path == "" {
			continue
		}
		if !c.KafkaTLS {
			return cfgErr(key, "is set but --kafka-tls is false: set --kafka-tls true")
		}
		if _, err := os.Stat(path); err != nil {
			return cfgErr(key, "%v", err)
		}
	}
	if (c.KafkaTLSCertFile == "") != (c.KafkaTLSKeyFile == "") {
		return cfgErr("kafka-tls-cert-file", "a client certificate needs both --kafka-tls-cert-file and --kafka-tls-key-file")
	}
	c.KafkaSASL, c.KafkaSASLUser, c.KafkaSASLPassword = config.KafkaSASLMechanism.From(v), config.KafkaSASLUsername.From(v), config.KafkaSASLPassword.From(v)
	switch c.KafkaSASL {
	case "none":
	case "plain", "scram-sha-256", "scram-sha-512":
		if c.KafkaSASLUser == "" {
			return cfgErr("kafka-sasl-username", "is required with --kafka-sasl-mechanism %s", c.KafkaSASL)
		}
		if c.KafkaSASLPassword == "" {
			return cfgErr("kafka-sasl-password", "is required with --kafka-sasl-mechanism %s: set CDC_RELAY_KAFKA_SASL_PASSWORD or CDC_RELAY_KAFKA_SASL_PASSWORD_FILE", c.KafkaSASL)
		}
	default:
		return cfgErr("kafka-sasl-mechanism", "%q is not none, plain, scram-sha-256 or scram-sha-512", c.KafkaSASL)
	}
	return nil
}
