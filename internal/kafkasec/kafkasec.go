// Package kafkasec builds the franz-go client options for Kafka TLS and
// SASL, in one place for the relay, its tools and the inbox.
//
// In: Settings (TLS on or off, the CA bundle, an optional client pair, the
// SASL mechanism and its credentials), already validated by the caller,
// which names its own settings in its errors.
// Out: kgo options, and the TLS config and SASL mechanism themselves for
// the code that dials outside kgo (the transactional session's fence).
// With RawSockets (the relay's clients) the options dial through Dial,
// which wraps each broker connection with internal/rawsock under its TLS.
// Owns: nothing; every call reads the files again.
package kafkasec

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/xdg-go/stringprep"

	"github.com/cdc-relay/cdc-relay/internal/rawsock"
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
	// RawSockets: dial brokers with internal/rawsock's reads and writes
	// (the relay's own clients; the inbox keeps the runtime's).
	RawSockets bool
}

// Client is what Build makes of Settings.
type Client struct {
	TLS  *tls.Config    // nil: plain text
	SASL sasl.Mechanism // nil: no SASL
	// Dial dials a broker, TLS included, with raw socket reads and writes
	// (internal/rawsock); nil without Settings.RawSockets.
	Dial func(ctx context.Context, network, host string) (net.Conn, error)
	Opts []kgo.Opt // TLS (or Dial) and SASL, as kgo options
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
		if !s.RawSockets {
			c.Opts = append(c.Opts, kgo.DialTLSConfig(cfg.Clone()))
		}
	}
	if s.RawSockets {
		c.Dial = rawDialer(c.TLS)
		c.Opts = append(c.Opts, kgo.Dialer(c.Dial))
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

// dialTimeout bounds a broker dial with its TLS handshake, as kgo's
// default dialer does.
const dialTimeout = 10 * time.Second

// rawDialer dials brokers as kgo's default dialer does (with TLS on top
// when tlsCfg is set, its ServerName the broker's host unless set), with
// the TCP connection wrapped by rawsock.
func rawDialer(tlsCfg *tls.Config) func(ctx context.Context, network, host string) (net.Conn, error) {
	d := &net.Dialer{Timeout: dialTimeout}
	return func(ctx context.Context, network, host string) (net.Conn, error) {
		var cfg *tls.Config
		if tlsCfg != nil {
			cfg = tlsCfg.Clone()
			if cfg.ServerName == "" {
				server, _, err := net.SplitHostPort(host)
				if err != nil {
					return nil, fmt.Errorf("unable to split host:port for dialing: %w", err)
				}
				cfg.ServerName = server
			}
		}
		ctx, cancel := context.WithTimeout(ctx, dialTimeout)
		defer cancel()
		raw, err := d.DialContext(ctx, network, host)
		if err != nil {
			return nil, err
		}
		if cfg == nil {
			return rawsock.Wrap(raw), nil
		}
		tc := tls.Client(rawsock.Wrap(raw), cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, err
		}
		return tc, nil
	}
}
