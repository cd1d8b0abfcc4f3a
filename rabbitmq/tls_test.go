package rabbitmq

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/rabbittest"
	"github.com/cdc-relay/cdc-relay/internal/testca"
	"github.com/cdc-relay/cdc-relay/internal/testtier"
)

// TestPublishOverTLS: amqps with the CA that signed the node's certificate
// publishes and acks; with another CA the publisher never connects, and
// Health says why.
func TestPublishOverTLS(t *testing.T) {
	testtier.Need(t)
	sfx := fresh()
	ca := testca.New(t)
	n := rabbittest.Own(t, rabbittest.Options{TLS: rabbittest.TLSFilesOf(t, ca)})
	topology(t, n, "ex-tls"+sfx, "q-tls"+sfx, "#", nil)

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.PEM)
	a := &acks{t: t}
	p := New(Config{URL: n.AMQPSURL(), TLS: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}, Exchange: "ex-tls" + sfx, Declare: true, Acked: a.acked})
	run(t, p)
	for i := uint64(1); i <= 100; i++ {
		if err := p.Publish(context.Background(), msg("ex-tls"+sfx, i, "k")); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "every message acked over amqps", time.Minute, func() bool { return a.get() == 100 })
	if got := consume(t, n, "q-tls"+sfx, 100, time.Minute); len(got) != 100 {
		t.Fatalf("%d of 100", len(got))
	}

	other := testca.New(t)
	wrong := x509.NewCertPool()
	wrong.AppendCertsFromPEM(other.PEM)
	bad := New(Config{URL: n.AMQPSURL(), TLS: &tls.Config{RootCAs: wrong, MinVersion: tls.VersionTLS12}, Exchange: "ex-tls" + sfx})
	run(t, bad)
	waitFor(t, "the untrusted certificate reported", time.Minute, func() bool {
		h := bad.Health()
		return !h.FailingSince.IsZero() && strings.Contains(h.LastError, "certificate")
	})
}
