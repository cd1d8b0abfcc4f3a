package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/testca"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/cdc-relay/cdc-relay/internal/kafkatest"
	"github.com/cdc-relay/cdc-relay/internal/testtier"
)

// TestKafkaSecurity runs the relay against one Kafka broker of its own with
// SASL_PLAINTEXT, SASL_SSL and mutual-TLS SSL listeners (the test's CA signs
// the broker's and the relay's certificates). Each working setup streams
// events end to end, read back by franz-go authenticating as another SASL
// user, and is confirmed to PostgreSQL. Each refused setup makes the relay
// say why in its log, keep retrying, and confirm nothing. The SASL password
// never shows in the relay's output or its metrics. The cases run in
// parallel: each gives its relay its environment (startRelayEnv).
func TestKafkaSecurity(t *testing.T) {
	testtier.Need(t)
	t.Parallel()
	began := time.Now()
	ca := testca.New(t)
	serverCert, serverKey := ca.Issue(t, "kafka", "127.0.0.1", "localhost")
	clientCert, clientKey := ca.Issue(t, "cdc-relay")
	relayPassword, readerPassword := "relay-pw-"+randSuffix(), "reader-pw-"+randSuffix()
	sb, err := kafkatest.Start(kafkatest.Options{
		ExtraConfig: map[string]string{"num.partitions": "3"},
		SASLUsers:   map[string]string{"relay": relayPassword, "reader": readerPassword},
		TLS:         &kafkatest.TLS{CertPEM: serverCert, KeyPEM: serverKey, CAPEM: ca.PEM, ClientAuth: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("secured broker ready in %s", time.Since(began).Round(time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			if b, err := os.ReadFile(sb.LogPath()); err == nil {
				t.Logf("tail of the secured broker's log:\n%s", tailString(string(b), 6000))
			}
		}
		sb.Close()
	})
	dir := t.TempDir()
	caFile, otherCAFile := filepath.Join(dir, "ca.PEM"), filepath.Join(dir, "other-ca.PEM")
	certFile, keyFile, passwordFile := filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem"), filepath.Join(dir, "password")
	for path, data := range map[string][]byte{caFile: ca.PEM, otherCAFile: testca.New(t).PEM, certFile: clientCert, keyFile: clientKey,
		passwordFile: []byte(relayPassword + "\n")} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sasl := func(mechanism string) []string {
		return []string{"--kafka-sasl-mechanism", mechanism, "--kafka-sasl-username", "relay"}
	}
	withTLS := []string{"--kafka-tls", "true", "--kafka-tls-ca-file", caFile}
	wrongPassword := "wrong-pw-" + randSuffix()

	cases := []struct {
		name  string
		addr  string
		flags []string
		// env is added to the relay's environment (passwords go there,
		// never on the command line).
		env map[string]string
		// wantLog, when set, is what the relay must log, at least twice
		// (it retries), while nothing is confirmed; "" means events must
		// arrive and be confirmed.
		wantLog string
	}{
		{name: "PLAIN over SASL_PLAINTEXT", addr: sb.SASLAddr(), flags: sasl("plain"),
			env: map[string]string{"CDC_RELAY_KAFKA_SASL_PASSWORD": relayPassword}},
		{name: "SCRAM-SHA-256 over SASL_PLAINTEXT", addr: sb.SASLAddr(), flags: sasl("scram-sha-256"),
			env: map[string]string{"CDC_RELAY_KAFKA_SASL_PASSWORD": relayPassword}},
		{name: "SCRAM-SHA-512 over SASL_PLAINTEXT, password from a file", addr: sb.SASLAddr(), flags: sasl("scram-sha-512"),
			env: map[string]string{"CDC_RELAY_KAFKA_SASL_PASSWORD_FILE": passwordFile}},
		{name: "SCRAM-SHA-512 over SASL_SSL", addr: sb.SASLSSLAddr(), flags: append(sasl("scram-sha-512"), withTLS...),
			env: map[string]string{"CDC_RELAY_KAFKA_SASL_PASSWORD": relayPassword}},
		{name: "PLAIN over SASL_SSL", addr: sb.SASLSSLAddr(), flags: append(sasl("plain"), withTLS...),
			env: map[string]string{"CDC_RELAY_KAFKA_SASL_PASSWORD": relayPassword}},
		{name: "mutual TLS over SSL", addr: sb.SSLAddr(),
			flags: append([]string{"--kafka-tls-cert-file", certFile, "--kafka-tls-key-file", keyFile}, withTLS...)},

		// The one refused password on a real broker: the relay and check
		// against kfake refuse PLAIN and another user's password with
		// SCRAM-SHA-512 (TestKafkaSecurityRefusedFake).
		{name: "SCRAM-SHA-256 wrong password over SASL_SSL", addr: sb.SASLSSLAddr(), flags: append(sasl("scram-sha-256"), withTLS...),
			env:     map[string]string{"CDC_RELAY_KAFKA_SASL_PASSWORD": wrongPassword},
			wantLog: "SASL_AUTHENTICATION_FAILED"},
		{name: "SASL_SSL with a CA that did not sign the broker", addr: sb.SASLSSLAddr(),
			flags:   append(sasl("scram-sha-512"), "--kafka-tls", "true", "--kafka-tls-ca-file", otherCAFile),
			env:     map[string]string{"CDC_RELAY_KAFKA_SASL_PASSWORD": relayPassword},
			wantLog: "x509: certificate signed by unknown authority"},
		// Go's TLS client reports the broker's alert; the publisher takes
		// it for a network error and retries within the session.
		{name: "SSL without a client certificate", addr: sb.SSLAddr(), flags: withTLS,
			wantLog: "remote error: tls: bad certificate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			caseBegan := time.Now()
			var env []string
			for k, v := range tc.env {
				env = append(env, k+"="+v)
			}
			f := newFixture(t, "")
			args := f.args(tc.flags...)
			setFlag(args, "--kafka-brokers", tc.addr)
			checkRefusal(t, args, tc.env, tc.addr, tc.wantLog, relayPassword, wrongPassword)
			if tc.wantLog != "" {
				// Nothing can be acknowledged: do not wait the default 30 s
				// for in-flight events at shutdown.
				args = append(args, "--shutdown-timeout", "2s")
			}
			// The independent reader authenticates as another user, over
			// SASL_PLAINTEXT whatever listener the relay uses.
			c := consumeSecured(t, "^"+f.topicPrefix+`\..*`, kgo.SeedBrokers(sb.SASLAddr()),
				kgo.SASL(scram.Auth{User: "reader", Pass: readerPassword}.AsSha512Mechanism()))
			r := startRelayEnv(t, args, env)
			if tc.wantLog != "" {
				waitRefused(t, f, r, tc.wantLog)
				return
			}
			r.waitStreaming(60 * time.Second)

			conn := connect(t)
			ctx := context.Background()
			agg := uuidFor(1)
			ids, err := f.insertTx(ctx, conn, []event{
				{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, 1)},
				{AggregateType: "Order", AggregateID: agg, EventType: "OrderCancelled", Payload: orderCancelled(agg, 1)},
			})
			if err != nil {
				t.Fatal(err)
			}
			// At or past the commit's end LSN. An idle relay may confirm WAL
			// up to the transaction's commit record (DESIGN.md, the ack
			// rule), never that far while the events are unacknowledged.
			committed := currentLSN(t, conn)

			if tc.wantLog == "" {
				recs := c.waitIDs(60*time.Second, ids)
				dec := newAvroDecoder()
				for _, rec := range recs {
					if rec.Topic != f.topic("Order") || rec.Key != agg {
						t.Errorf("record %s on %s key %q, want topic %s key %s", rec.Headers["id"], rec.Topic, rec.Key, f.topic("Order"), agg)
					}
					if m, _, err := dec.decode(rec.Value); err != nil || m["order_id"] != agg {
						t.Errorf("record %s: decoded %v, %v; want order_id %s", rec.Headers["id"], m, err, agg)
					}
				}
				waitFor(t, 30*time.Second, "confirmed_flush_lsn to pass the events", func() bool { return f.confirmedFlush() >= committed })
			} else {
				// Two failures in the log: the relay retries rather than
				// exiting or hanging on the first.
				waitFor(t, 60*time.Second, fmt.Sprintf("the relay to log %q twice", tc.wantLog), func() bool {
					return strings.Count(r.Output(), tc.wantLog) >= 2
				})
				select {
				case <-r.done:
					t.Fatalf("relay exited with %d, want it to keep retrying", r.exitCode)
				default:
				}
				if got := f.confirmedFlush(); got >= committed {
					t.Errorf("confirmed_flush_lsn moved to %X, past the events' commit (%X), although Kafka refused the relay", got, committed)
				}
				if got := len(c.records()); got != 0 {
					t.Errorf("the reader saw %d records, want none", got)
				}
			}
			metrics := r.metricsText(t)
			if code := r.terminate(); code != 0 {
				t.Errorf("exit code %d after SIGTERM, want 0", code)
			}
			if got := f.confirmedFlush(); tc.wantLog != "" && got >= committed {
				t.Errorf("after shutdown, confirmed_flush_lsn is %X, past the events' commit (%X), although Kafka refused the relay", got, committed)
			}
			for _, pw := range []string{relayPassword, readerPassword, wrongPassword} {
				if strings.Contains(r.Output(), pw) {
					t.Errorf("a SASL password appears in the relay's output")
				}
				if strings.Contains(metrics, pw) {
					t.Errorf("a SASL password appears in /metrics")
				}
			}
			if tc.wantLog != "" {
				t.Logf("relay said: %s", firstLine(r.Output(), tc.wantLog))
				t.Logf("confirmed_flush_lsn %X, events committed by %X", f.confirmedFlush(), committed)
			}
			t.Logf("case took %s", time.Since(caseBegan).Round(time.Millisecond))
		})
	}
}

// waitRefused: Kafka refuses the relay r of f, so its checkpoint cannot be
// read: it says why (wantLog), waits, retrying, and creates no slot
// meanwhile. The publisher's first connection logs it too: wait until the
// stream has retried on the checkpoint.
func waitRefused(t *testing.T, f *fixture, r *relay, wantLog string) {
	t.Helper()
	waitFor(t, 60*time.Second, fmt.Sprintf("the relay to log %q twice and report the checkpoint in /readyz", wantLog), func() bool {
		if strings.Count(r.Output(), wantLog) < 2 {
			return false
		}
		_, body := r.getJSON("/readyz")
		return body["state"] == "reconnecting"
	})
	if code, body := r.getJSON("/readyz"); code != 503 || body["state"] != "reconnecting" || !strings.Contains(body["reason"], "checkpoint") {
		t.Errorf("/readyz = %d %v, want 503 reconnecting on the checkpoint", code, body)
	}
	select {
	case <-r.done:
		t.Fatalf("relay exited with %d, want it to keep retrying", r.exitCode)
	default:
	}
	if slotExists(t, connect(t), f.slot) {
		t.Error("the relay created its slot although it could not read its checkpoint")
	}
}

// checkRefusal runs check with the relay's args and env: it reaches the
// broker at addr, or names what refused it (wantLog, the relay's word for
// it: SASL is the credentials, anything else TLS). No password shows.
func checkRefusal(t *testing.T, args []string, envs map[string]string, addr, wantLog string, passwords ...string) {
	t.Helper()
	want, wantCode := "ok    Kafka: 1 broker(s) reachable via "+addr+"\n", exitOK
	switch {
	case strings.Contains(wantLog, "SASL"):
		want, wantCode = "FAIL  Kafka: authentication failed (", exitFailed
	case wantLog != "":
		want, wantCode = "FAIL  Kafka: TLS failed (", exitFailed
	}
	var out strings.Builder
	code := run(commandArgs("check", args), env(envs), &out, &out)
	if code != wantCode || !strings.Contains(out.String(), want) {
		t.Errorf("check = %d, want %d and %q:\n%s", code, wantCode, want, out.String())
	}
	for _, pw := range passwords {
		if strings.Contains(out.String(), pw) {
			t.Errorf("a SASL password appears in check's output")
		}
	}
}

// consumeSecured is consume with client options of the caller's (seed
// brokers, SASL, TLS): it reads every topic matching topicRegex from the start.
func consumeSecured(t *testing.T, topicRegex string, opts ...kgo.Opt) *consumer {
	t.Helper()
	return consume(t, topicRegex, opts...)
}

// metricsText returns the relay's whole /metrics page.
func (r *relay) metricsText(t *testing.T) string {
	t.Helper()
	resp, err := http.Get("http://" + r.metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
