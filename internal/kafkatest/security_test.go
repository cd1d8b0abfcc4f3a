package kafkatest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/testca"
	"github.com/cdc-relay/cdc-relay/internal/testtier"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

func TestSecurityProperties(t *testing.T) {
	got := properties(Options{
		SASLUsers: map[string]string{"alice": "alice-secret", "bob": "bob-secret"},
		TLS:       &TLS{CAPEM: []byte("ca"), ClientAuth: true},
	}, "/k", "/d", listenerPorts{plain: 9092, controller: 9093, sasl: 9094, saslSSL: 9095, ssl: 9096})
	for _, want := range []string{
		"listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093,SASL_PLAINTEXT://127.0.0.1:9094,SASL_SSL://127.0.0.1:9095,SSL://127.0.0.1:9096\n",
		"advertised.listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093,SASL_PLAINTEXT://127.0.0.1:9094,SASL_SSL://127.0.0.1:9095,SSL://127.0.0.1:9096\n",
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL\n",
		"inter.broker.listener.name=PLAINTEXT\n",
		"sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512\n",
		`listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret" user_bob="bob-secret";` + "\n",
		`listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret" user_bob="bob-secret";` + "\n",
		"listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;\n",
		"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;\n",
		"ssl.keystore.type=PEM\n",
		"ssl.keystore.location=/k/keystore.pem\n",
		"ssl.truststore.type=PEM\n",
		"ssl.truststore.location=/k/truststore.pem\n",
		"listener.name.ssl.ssl.client.auth=required\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("server.properties lacks %q:\n%s", want, got)
		}
	}
	if got, want := strings.Join(scramArgs(map[string]string{"alice": "alice-secret"}), " "),
		"--add-scram SCRAM-SHA-256=[name=alice,password=alice-secret] --add-scram SCRAM-SHA-512=[name=alice,password=alice-secret]"; got != want {
		t.Errorf("scramArgs = %q, want %q", got, want)
	}
}

func TestSecurityOptionsRejected(t *testing.T) {
	ca := testca.New(t)
	certPEM, keyPEM := ca.Issue(t, "broker")
	_, otherKey := ca.Issue(t, "other")
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"comma in password", Options{SASLUsers: map[string]string{"alice": "a,b"}}, "not allowed"},
		{"quote in name", Options{SASLUsers: map[string]string{`al"ice`: "x"}}, "not allowed"},
		{"empty password", Options{SASLUsers: map[string]string{"alice": ""}}, "empty"},
		{"key of another certificate", Options{TLS: &TLS{CertPEM: certPEM, KeyPEM: otherKey}}, "TLS.CertPEM"},
		{"client auth without CA", Options{TLS: &TLS{CertPEM: certPEM, KeyPEM: keyPEM, ClientAuth: true}}, "CAPEM"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Start(tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Start: got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestSecurityListeners starts one broker with SASL_PLAINTEXT, SASL_SSL and
// a mutual-TLS SSL listener, and has franz-go produce and consume through
// each with each mechanism; wrong credentials and a missing client
// certificate are refused.
func TestSecurityListeners(t *testing.T) {
	testtier.Need(t)
	ca := testca.New(t)
	serverCert, serverKey := ca.Issue(t, "broker")
	clientCert, clientKey := ca.Issue(t, "client")
	began := time.Now()
	b, err := Start(Options{
		SASLUsers: map[string]string{"alice": "alice-secret", "bob": "bob-secret"},
		TLS:       &TLS{CertPEM: serverCert, KeyPEM: serverKey, CAPEM: ca.PEM, ClientAuth: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("secured broker ready in %s: SASL_PLAINTEXT %s, SASL_SSL %s, SSL %s",
		time.Since(began).Round(time.Millisecond), b.SASLAddr(), b.SASLSSLAddr(), b.SSLAddr())
	t.Cleanup(func() { closeBroker(t, b) })
	if b.SASLAddr() == "" || b.SASLSSLAddr() == "" || b.SSLAddr() == "" {
		t.Fatal("a security listener has no address")
	}

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.PEM)
	serverTLS := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	pair, err := tls.X509KeyPair(clientCert, clientKey)
	if err != nil {
		t.Fatal(err)
	}
	mutualTLS := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}}
	mechanism := map[string]func(user, pass string) sasl.Mechanism{
		"PLAIN":         func(u, p string) sasl.Mechanism { return plain.Auth{User: u, Pass: p}.AsMechanism() },
		"SCRAM-SHA-256": func(u, p string) sasl.Mechanism { return scram.Auth{User: u, Pass: p}.AsSha256Mechanism() },
		"SCRAM-SHA-512": func(u, p string) sasl.Mechanism { return scram.Auth{User: u, Pass: p}.AsSha512Mechanism() },
	}

	type tc struct {
		name string
		addr string
		opts []kgo.Opt
		// wantErr is checked with errors.Is when set; wantErrText is
		// looked for in the error text otherwise. Neither: must work.
		wantErr     error
		wantErrText string
	}
	var cases []tc
	for _, m := range Mechanisms {
		cases = append(cases,
			tc{name: m + " over SASL_PLAINTEXT", addr: b.SASLAddr(), opts: []kgo.Opt{kgo.SASL(mechanism[m]("alice", "alice-secret"))}},
			tc{name: m + " over SASL_SSL", addr: b.SASLSSLAddr(), opts: []kgo.Opt{kgo.SASL(mechanism[m]("bob", "bob-secret")), kgo.DialTLSConfig(serverTLS)}},
			tc{name: m + " wrong password", addr: b.SASLAddr(), opts: []kgo.Opt{kgo.SASL(mechanism[m]("alice", "bob-secret"))}, wantErr: kerr.SaslAuthenticationFailed},
		)
	}
	cases = append(cases,
		tc{name: "SCRAM-SHA-256 unknown user", addr: b.SASLSSLAddr(), opts: []kgo.Opt{kgo.SASL(mechanism["SCRAM-SHA-256"]("mallory", "alice-secret")), kgo.DialTLSConfig(serverTLS)}, wantErr: kerr.SaslAuthenticationFailed},
		tc{name: "mutual TLS over SSL", addr: b.SSLAddr(), opts: []kgo.Opt{kgo.DialTLSConfig(mutualTLS)}},
		tc{name: "SSL without a client certificate", addr: b.SSLAddr(), opts: []kgo.Opt{kgo.DialTLSConfig(serverTLS)}, wantErrText: "certificate"},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			topic := randomTopic(t)
			if c.wantErr == nil && c.wantErrText == "" {
				produce(t, c.addr, topic, "k", c.name, c.opts...)
				if got := consumeFirst(t, c.addr, topic, c.opts...); got != "k="+c.name {
					t.Fatalf("got %q, want %q", got, "k="+c.name)
				}
				return
			}
			// A refused client learns why at once. (Producing would not
			// tell: franz-go retries the metadata load until the context
			// ends and reports only the deadline.)
			began := time.Now()
			err := ping(c.addr, 20*time.Second, c.opts...)
			switch {
			case err == nil:
				t.Fatal("produce succeeded, want it refused")
			case c.wantErr != nil && !errors.Is(err, c.wantErr):
				t.Fatalf("produce: got %v, want %v", err, c.wantErr)
			case c.wantErrText != "" && !strings.Contains(err.Error(), c.wantErrText):
				t.Fatalf("produce: got %v, want an error mentioning %q", err, c.wantErrText)
			}
			t.Logf("refused after %s: %v", time.Since(began).Round(time.Millisecond), err)
		})
	}
	// The PLAINTEXT listener still serves clients without credentials.
	topic := randomTopic(t)
	produce(t, b.Addr(), topic, "k", "plaintext")
	if got := consumeFirst(t, b.Addr(), topic); got != "k=plaintext" {
		t.Fatalf("PLAINTEXT listener: got %q", got)
	}

	// Restart keeps the listeners and the SCRAM credentials (they live in
	// the cluster metadata, written once by format).
	began = time.Now()
	if err := b.Restart(); err != nil {
		t.Fatal(err)
	}
	t.Logf("secured broker restarted in %s", time.Since(began).Round(time.Millisecond))
	scram512 := []kgo.Opt{kgo.SASL(mechanism["SCRAM-SHA-512"]("alice", "alice-secret")), kgo.DialTLSConfig(serverTLS)}
	if got := consumeFirst(t, b.SASLSSLAddr(), topic, scram512...); got != "k=plaintext" {
		t.Fatalf("SCRAM-SHA-512 over SASL_SSL after restart: got %q", got)
	}
}

// ping has franz-go send one ApiVersions request (after its TLS and SASL
// handshakes) and returns the error.
func ping(addr string, timeout time.Duration, opts ...kgo.Opt) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	return cl.Ping(ctx)
}
