package relay

import (
	"net/http"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/internal/kafkasec"
)

// KafkaSettings are cfg's Kafka TLS and SASL settings.
func (c *Config) KafkaSettings() kafkasec.Settings {
	return kafkasec.Settings{TLS: c.KafkaTLS, CAFile: c.KafkaTLSCAFile, CertFile: c.KafkaTLSCertFile, KeyFile: c.KafkaTLSKeyFile,
		Mechanism: c.KafkaSASL, Username: c.KafkaSASLUser, Password: c.KafkaSASLPassword, RawSockets: true}
}

// CheckedKafkaSecurity builds cfg's Kafka TLS and SASL, and refuses a
// SCRAM username or password the mechanism cannot use (a *ConfigError
// naming --kafka-sasl-username), which run, replay and dlq redrive do at
// start.
func CheckedKafkaSecurity(c *Config) (kafkasec.Client, error) {
	if c.KafkaSASL == kafkasec.ScramSHA256 || c.KafkaSASL == kafkasec.ScramSHA512 {
		if err := kafkasec.CheckSCRAM(c.KafkaSASLUser, c.KafkaSASLPassword); err != nil {
			return kafkasec.Client{}, ConfigErr("kafka-sasl-username", "%v", err)
		}
	}
	return c.KafkaSettings().Build()
}

// KafkaOptions are the franz-go options every Kafka client of the relay
// and its tools starts from: cfg's brokers, client id cdc-relay, a 10 s
// dial timeout, and the TLS and SASL settings. Its error is one of the TLS
// files (the caller names the setting).
func KafkaOptions(c *Config) ([]kgo.Opt, error) {
	sec, err := c.KafkaSettings().Build()
	if err != nil {
		return nil, err
	}
	return ClientOptions(c, sec), nil
}

// ClientOptions are KafkaOptions with the TLS and SASL of sec, built
// already (CheckedKafkaSecurity).
func ClientOptions(c *Config, sec kafkasec.Client) []kgo.Opt {
	return append([]kgo.Opt{kgo.SeedBrokers(c.KafkaBrokers...), kgo.ClientID("cdc-relay"), kgo.DialTimeout(10 * time.Second)}, sec.Opts...)
}

// RegistryHTTPClient is the schema registry's HTTP client: nil (the
// default client) without --schema-registry-ca-file, else TLS with that CA.
func RegistryHTTPClient(c *Config) (*http.Client, error) {
	if c.RegistryCAFile == "" {
		return nil, nil
	}
	tlsCfg, err := kafkasec.TLSConfig(c.RegistryCAFile, "", "")
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg, Proxy: http.ProxyFromEnvironment}}, nil
}
