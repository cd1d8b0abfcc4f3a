package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"
	"github.com/twmb/franz-go/pkg/kgo"
	fsasl "github.com/twmb/franz-go/pkg/sasl"
	fplain "github.com/twmb/franz-go/pkg/sasl/plain"
	fscram "github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/cdc-relay/cdc-relay/internal/config"
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

// kafkaTransport builds the kafka-go transport for the configured TLS and SASL.
func kafkaTransport(c *Config) (*kafka.Transport, error) {
	tr := &kafka.Transport{DialTimeout: 10 * time.Second, ClientID: "cdc-relay", MetadataTTL: 5 * time.Second}
	if c.KafkaTLS {
		tlsCfg, err := tlsConfig(c.KafkaTLSCAFile, c.KafkaTLSCertFile, c.KafkaTLSKeyFile)
		if err != nil {
			return nil, err
		}
		tr.TLS = tlsCfg
	}
	mech, err := saslMechanism(c)
	if err != nil {
		return nil, err
	}
	tr.SASL = mech
	return tr, nil
}

func saslMechanism(c *Config) (sasl.Mechanism, error) {
	switch c.KafkaSASL {
	case "plain":
		return plain.Mechanism{Username: c.KafkaSASLUser, Password: c.KafkaSASLPassword}, nil
	case "scram-sha-256":
		m, err := scram.Mechanism(scram.SHA256, c.KafkaSASLUser, c.KafkaSASLPassword)
		if err != nil {
			return nil, cfgErr("kafka-sasl-username", "%v", err)
		}
		return m, nil
	case "scram-sha-512":
		m, err := scram.Mechanism(scram.SHA512, c.KafkaSASLUser, c.KafkaSASLPassword)
		if err != nil {
			return nil, cfgErr("kafka-sasl-username", "%v", err)
		}
		return m, nil
	}
	return nil, nil
}

// tlsConfig loads a CA bundle (nil: system roots) and an optional client pair.
func tlsConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		b, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("read CA %s: %w", caFile, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("CA file %s holds no PEM certificate", caFile)
		}
		cfg.RootCAs = pool
	}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("load client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
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

// kafkaClientSecurity is the configured TLS and SASL for franz-go, which
// the publisher and the checkpoint store use: the TLS config (nil for
// plain text), the SASL mechanism (nil for none), and both as kgo options.
func kafkaClientSecurity(c *Config) (*tls.Config, fsasl.Mechanism, []kgo.Opt, error) {
	var tlsCfg *tls.Config
	var opts []kgo.Opt
	if c.KafkaTLS {
		var err error
		if tlsCfg, err = tlsConfig(c.KafkaTLSCAFile, c.KafkaTLSCertFile, c.KafkaTLSKeyFile); err != nil {
			return nil, nil, nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(tlsCfg.Clone()))
	}
	var mech fsasl.Mechanism
	switch c.KafkaSASL {
	case "plain":
		mech = fplain.Auth{User: c.KafkaSASLUser, Pass: c.KafkaSASLPassword}.AsMechanism()
	case "scram-sha-256":
		mech = fscram.Auth{User: c.KafkaSASLUser, Pass: c.KafkaSASLPassword}.AsSha256Mechanism()
	case "scram-sha-512":
		mech = fscram.Auth{User: c.KafkaSASLUser, Pass: c.KafkaSASLPassword}.AsSha512Mechanism()
	}
	if mech != nil {
		opts = append(opts, kgo.SASL(mech))
	}
	return tlsCfg, mech, opts, nil
}

// kgoSecurity is kafkaClientSecurity's kgo options: the franz-go client
// options for the Kafka TLS and SASL settings (the same ones kafkaTransport
// gives kafka-go).
func kgoSecurity(c *Config) ([]kgo.Opt, error) {
	_, _, opts, err := kafkaClientSecurity(c)
	return opts, err
}

// checkedKgoSecurity is kgoSecurity for run and slot recreate, which also
// refuse at start a SCRAM username the mechanism cannot use (a
// *ConfigError naming --kafka-sasl-username), as they did before the
// checkpoint moved to franz-go.
func checkedKgoSecurity(c *Config) ([]kgo.Opt, error) {
	if _, err := saslMechanism(c); err != nil {
		return nil, err
	}
	return kgoSecurity(c)
}
