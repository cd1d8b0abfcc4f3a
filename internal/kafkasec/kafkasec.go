// Package kafkasec builds the franz-go client options for Kafka TLS and
// SASL, in one place for the relay, its tools and the inbox.
//
// In: Settings (TLS on or off, the CA bundle, an optional client pair, the
// SASL mechanism and its credentials), already validated by the caller,
// which names its own settings in its errors.
// Out: kgo options, and the TLS config and SASL mechanism themselves for
// the code that dials outside kgo (the transactional session's fence).
// Owns: nothing; every call reads the files again.
package kafkasec

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/xdg-go/stringprep"
)

// The SASL mechanisms, as the settings spell them.
const (
	None        = "none"
	Plain       = "plain"
	ScramSHA256 = "scram-sha-256"
	ScramSHA512 = "scram-sha-512"
)

// Settings are the Kafka TLS and SASL settings.
type Settings struct {
	TLS                       bool
	CAFile, CertFile, KeyFile string // CAFile "": the system roots
	Mechanism                 string // "" or None, Plain, ScramSHA256, ScramSHA512
	Username, Password        string
}

// Client is what Build makes of Settings.
type Client struct {
	TLS  *tls.Config    // nil: plain text
	SASL sasl.Mechanism // nil: no SASL
	Opts []kgo.Opt      // both, as kgo options
}

// Build loads the TLS files and makes the SASL mechanism. An unknown
// mechanism is an error. CheckSCRAM is the caller's to call.
func (s Settings) Build() (Client, error) {
	var c Client
	if s.TLS {
		cfg, err := TLSConfig(s.CAFile, s.CertFile, s.KeyFile)
		if err != nil {
			return Client{}, err
		}
		c.TLS = cfg
		c.Opts = append(c.Opts, kgo.DialTLSConfig(cfg.Clone()))
	}
	switch s.Mechanism {
	case "", None:
	case Plain:
		c.SASL = plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism()
	case ScramSHA256, ScramSHA512:
		a := scram.Auth{User: s.Username, Pass: s.Password}
		if s.Mechanism == ScramSHA256 {
			c.SASL = a.AsSha256Mechanism()
		} else {
			c.SASL = a.AsSha512Mechanism()
		}
	default:
		return Client{}, fmt.Errorf("SASL mechanism %q is not none, plain, scram-sha-256 or scram-sha-512", s.Mechanism)
	}
	if c.SASL != nil {
		c.Opts = append(c.Opts, kgo.SASL(c.SASL))
	}
	return c, nil
}

// CheckSCRAM says whether SCRAM can use the username and password: both
// must pass SASLprep (RFC 4013), as SCRAM (RFC 5802) requires. No broker
// could authenticate them otherwise.
func CheckSCRAM(username, password string) error {
	if _, err := stringprep.SASLprep.Prepare(username); err != nil {
		return fmt.Errorf("SCRAM cannot use username %q: %v", username, err)
	}
	if _, err := stringprep.SASLprep.Prepare(password); err != nil {
		return fmt.Errorf("SCRAM cannot use the password: %v", err)
	}
	return nil
}

// TLSConfig loads a CA bundle (caFile "": the system roots) and an
// optional client certificate pair, with TLS 1.2 at least.
func TLSConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
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
