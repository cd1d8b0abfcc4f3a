package main

import (
	"crypto/tls"
	"net/http"
	"os"

	"github.com/twmb/franz-go/pkg/kgo"
	fsasl "github.com/twmb/franz-go/pkg/sasl"

	"github.com/cdc-relay/cdc-relay/internal/config"
	"github.com/cdc-relay/cdc-relay/internal/kafkasec"
)

// kafkaSecurity validates the Kafka TLS and SASL settings into c.
func kafkaSecurity(c *Config, v *config.Values) error {
	c.KafkaTLS = v.Bool("kafka-tls")
	c.KafkaTLSCAFile, c.KafkaTLSCertFile, c.KafkaTLSKeyFile = v.String("kafka-tls-ca-file"), v.String("kafka-tls-cert-file"), v.String("kafka-tls-key-file")
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
	c.KafkaSASL, c.KafkaSASLUser, c.KafkaSASLPassword = v.String("kafka-sasl-mechanism"), v.String("kafka-sasl-username"), v.String("kafka-sasl-password")
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

// tlsConfig loads a CA bundle (nil: system roots) and an optional client pair.
func tlsConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	return kafkasec.TLSConfig(caFile, certFile, keyFile)
}

// registryHTTPClient is the schema registry's HTTP client (TLS with the CA).
func registryHTTPClient(c *Config) (*http.Client, error) {
	if c.RegistryCAFile == "" {
		return nil, nil
	}
	tlsCfg, err := tlsConfig(c.RegistryCAFile, "", "")
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg, Proxy: http.ProxyFromEnvironment}}, nil
}

// kafkaSettings is the configured Kafka TLS and SASL.
func kafkaSettings(c *Config) kafkasec.Settings {
	return kafkasec.Settings{TLS: c.KafkaTLS, CAFile: c.KafkaTLSCAFile, CertFile: c.KafkaTLSCertFile, KeyFile: c.KafkaTLSKeyFile,
		Mechanism: c.KafkaSASL, Username: c.KafkaSASLUser, Password: c.KafkaSASLPassword}
}

// kafkaClientSecurity is the configured TLS and SASL for franz-go, which
// the publisher and the checkpoint store use: the TLS config (nil for
// plain text), the SASL mechanism (nil for none), and both as kgo options.
func kafkaClientSecurity(c *Config) (*tls.Config, fsasl.Mechanism, []kgo.Opt, error) {
	cl, err := kafkaSettings(c).Build()
	if err != nil {
		return nil, nil, nil, err
	}
	return cl.TLS, cl.SASL, cl.Opts, nil
}

// kgoSecurity is kafkaClientSecurity's kgo options: the franz-go client
// options for the Kafka TLS and SASL settings.
func kgoSecurity(c *Config) ([]kgo.Opt, error) {
	_, _, opts, err := kafkaClientSecurity(c)
	return opts, err
}

// checkedKgoSecurity is kgoSecurity for run, slot recreate, replay, dlq
// redrive and check, which also refuse at start a SCRAM username the
// mechanism cannot use (a *ConfigError naming --kafka-sasl-username), as
// they did when kafka-go built the SCRAM mechanism.
func checkedKgoSecurity(c *Config) ([]kgo.Opt, error) {
	if c.KafkaSASL == kafkasec.ScramSHA256 || c.KafkaSASL == kafkasec.ScramSHA512 {
		if err := kafkasec.CheckSCRAM(c.KafkaSASLUser, c.KafkaSASLPassword); err != nil {
			return nil, cfgErr("kafka-sasl-username", "%v", err)
		}
	}
	return kgoSecurity(c)
}
