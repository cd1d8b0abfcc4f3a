package kafkasec

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/cdc-relay/cdc-relay/internal/testca"
)

// TestRawDialTLS: the raw dialer's TLS verifies the broker's certificate
// against the host it dials (ServerName from host:port), and bytes go both
// ways over it; a certificate for another name is refused.
func TestRawDialTLS(t *testing.T) {
	ca := testca.New(t)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.PEM)
	serve := func(hosts ...string) string {
		certPEM, keyPEM := ca.Issue(t, "broker", hosts...)
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() { defer c.Close(); io.Copy(c, c) }() // echo
			}
		}()
		return ln.Addr().String()
	}

	dial := rawDialer(&tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12})
	c, err := dial(context.Background(), "tcp", serve("127.0.0.1"))
	if err != nil {
		t.Fatalf("dial a broker with a certificate for 127.0.0.1: %v", err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4)
	if _, err := io.ReadFull(c, b); err != nil || string(b) != "ping" {
		t.Fatalf("echo: %q, %v", b, err)
	}

	_, err = dial(context.Background(), "tcp", serve("broker.example"))
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("dial a broker whose certificate names another host: %v, want a certificate error", err)
	}
}

// TestBuildRawSockets: RawSockets gives a Dial and makes it the client's
// dialer; without it there is none.
func TestBuildRawSockets(t *testing.T) {
	c, err := Settings{RawSockets: true}.Build()
	if err != nil || c.Dial == nil || len(c.Opts) != 1 {
		t.Fatalf("RawSockets: Dial set %v, %d options, %v; want a Dial and its option", c.Dial != nil, len(c.Opts), err)
	}
	c, err = Settings{}.Build()
	if err != nil || c.Dial != nil || len(c.Opts) != 0 {
		t.Fatalf("without RawSockets: Dial set %v, %d options, %v; want neither", c.Dial != nil, len(c.Opts), err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, _ = Settings{RawSockets: true}.Build()
	conn, err := c.Dial(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, ok := conn.(*net.TCPConn); ok {
		t.Fatal("the plain-text dial returned the runtime's TCP conn, not the raw one")
	}
}
