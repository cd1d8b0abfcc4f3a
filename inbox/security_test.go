package inbox

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/cdc-relay/cdc-relay/internal/kafkatest"
	"github.com/cdc-relay/cdc-relay/internal/relaytest"
	"github.com/cdc-relay/cdc-relay/internal/testca"
	"github.com/cdc-relay/cdc-relay/outbox"
)

// TestSecuredKafka runs the consumer against a Kafka broker of its own
// with SASL_PLAINTEXT, SASL_SSL and mutual-TLS SSL listeners, as the
// relay's TestKafkaSecurity does (the test's CA signs the broker's and the
// consumer's certificates). For each mechanism and listener the consumer
// applies the events once, commits past them, dead-letters an undecodable
// value (the DLQ producer authenticates too) and Redrive reads the letter
// back (so does its reader). The records are written, and the letters
// read, by franz-go authenticating as another user. A wrong password makes
// the consumer log the broker's refusal and apply nothing. Last, the whole
// way: outbox rows, the relay binary and the consumer, both with
// SCRAM-SHA-512 over SASL_SSL.
func TestSecuredKafka(t *testing.T) {
	ca := testca.New(t)
	serverCert, serverKey := ca.Issue(t, "kafka", "127.0.0.1", "localhost")
	clientCert, clientKey := ca.Issue(t, "inbox")
	password, writerPassword := "inbox-pw-"+suffix(), "writer-pw-"+suffix()
	sb, err := kafkatest.Start(kafkatest.Options{
		SASLUsers: map[string]string{"inbox": password, "writer": writerPassword},
		TLS:       &kafkatest.TLS{CertPEM: serverCert, KeyPEM: serverKey, CAPEM: ca.PEM, ClientAuth: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			if b, err := os.ReadFile(sb.LogPath()); err == nil {
				t.Logf("tail of the secured broker's log:\n%s", b[max(0, len(b)-6000):])
			}
		}
		sb.Close()
	})
	dir := t.TempDir()
	caFile, certFile, keyFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem")
	for path, data := range map[string][]byte{caFile: ca.PEM, certFile: clientCert, keyFile: clientKey} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The independent writer and reader: another user, SASL_PLAINTEXT.
	writer, err := kgo.NewClient(kgo.SeedBrokers(sb.SASLAddr()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.SASL(scram.Auth{User: "writer", Pass: writerPassword}.AsSha512Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(writer.Close)

	sasl := func(cfg *Config[map[string]any], mechanism, pw string) {
		cfg.SASLMechanism, cfg.SASLUsername, cfg.SASLPassword = mechanism, "inbox", pw
	}
	withTLS := func(cfg *Config[map[string]any]) { cfg.TLS, cfg.TLSCAFile = true, caFile }
	for _, tc := range []struct {
		name   string
		addr   string
		secure func(*Config[map[string]any])
		// refused, when set, is what the consumer must log while it
		// applies nothing; "" means every event is applied.
		refused string
	}{
		{"PLAIN over SASL_PLAINTEXT", sb.SASLAddr(), func(c *Config[map[string]any]) { sasl(c, SASLPlain, password) }, ""},
		{"SCRAM-SHA-256 over SASL_PLAINTEXT", sb.SASLAddr(), func(c *Config[map[string]any]) { sasl(c, SASLScramSHA256, password) }, ""},
		{"SCRAM-SHA-512 over SASL_SSL", sb.SASLSSLAddr(), func(c *Config[map[string]any]) { sasl(c, SASLScramSHA512, password); withTLS(c) }, ""},
		{"PLAIN over SASL_SSL", sb.SASLSSLAddr(), func(c *Config[map[string]any]) { sasl(c, SASLPlain, password); withTLS(c) }, ""},
		{"mutual TLS over SSL", sb.SSLAddr(), func(c *Config[map[string]any]) {
			withTLS(c)
			c.TLSCertFile, c.TLSKeyFile = certFile, keyFile
		}, ""},
		{"SCRAM-SHA-512 wrong password over SASL_SSL", sb.SASLSSLAddr(), func(c *Config[map[string]any]) {
			sasl(c, SASLScramSHA512, "wrong-"+password)
			withTLS(c)
		}, "SASL_AUTHENTICATION_FAILED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := newDB(t)
			execSQL(t, url, "CREATE TABLE effects (event_id text)")
			topic := "sec" + suffix()
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			if _, err := kadm.NewClient(writer).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
				t.Fatal(err)
			}
			recs := orderRecords(t, topic, 4, func(i int) string { return fmt.Sprintf("k%d", i) })
			recs = append(recs, record{key: "bad", value: []byte("not avro"), headers: map[string]string{"id": "bad"}})
			produceWith(t, writer, topic, recs)

			logs := &relaytest.LogBuffer{}
			// Not baseConfig: that would start the package's plain broker.
			cfg := Config[map[string]any]{Consumer: "c_" + suffix(), Brokers: []string{tc.addr}, Topics: []string{topic},
				RegistryURL: registry.URL(), DB: newPool(t, url), DLQTopic: topic + ".dlq", MaxAttempts: 1,
				SessionTimeout: 6 * time.Second, RetryMin: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond,
				Logger: slog.New(slog.NewTextHandler(logs, nil)),
				Handler: func(ctx context.Context, tx pgx.Tx, ev *Event[map[string]any]) error {
					_, err := tx.Exec(ctx, "INSERT INTO effects VALUES ($1)", ev.ID)
					return err
				}}
			tc.secure(&cfg)
			r := runConsumer(t, cfg)
			if tc.refused != "" {
				waitFor(t, 60*time.Second, "the refusal logged twice", func() bool {
					return strings.Count(logs.String(), tc.refused) >= 2
				})
				if n := mustInt(t, url, "SELECT count(*) FROM effects"); n != 0 {
					t.Errorf("%d events applied by a consumer the broker refuses", n)
				}
				if strings.Contains(logs.String(), password) {
					t.Error("the consumer logged the SASL password")
				}
				return
			}
			waitFor(t, 90*time.Second, "every offset committed", func() bool {
				return committedWith(t, writer, cfg.Consumer, topic) == 5
			})
			if got := mustInt(t, url, "SELECT count(DISTINCT event_id) FROM effects"); got != 4 {
				t.Errorf("%d distinct events applied, want 4", got)
			}
			if got := mustInt(t, url, "SELECT count(*) FROM effects"); got != 4 {
				t.Errorf("%d effects, want 4 (one per event)", got)
			}
			if st := r.c.Stats(); st.Processed != 4 || st.DeadLettered != 1 {
				t.Errorf("stats = %+v, want 4 processed and 1 dead-lettered", st)
			}
			if strings.Contains(logs.String(), password) {
				t.Error("the consumer logged the SASL password")
			}
			st, err := r.c.Redrive(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if st.Read != 1 || st.Failed != 1 {
				t.Errorf("Redrive over the secured listener: %+v, want the letter read and failed again", st)
			}
		})
	}
	// The whole way: outbox rows, the relay and the consumer, both with
	// SCRAM-SHA-512 over SASL_SSL.
	t.Run("relay to consumer, SCRAM-SHA-512 over SASL_SSL", func(t *testing.T) {
		url := newDB(t)
		execDoc(t, url, "outbox.sql")
		execSQL(t, url, "CREATE TABLE effects (event_id text, order_id text)")
		s := suffix()
		prefix := "sr" + s
		topic := prefix + ".Order"
		ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
		defer cancel()
		if _, err := kadm.NewClient(writer).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
		t.Setenv("CDC_RELAY_KAFKA_SASL_PASSWORD", password)
		startRelay(t, url, s, append(relayArgsOn(sb.SASLSSLAddr(), url, s, prefix, prefix+".relay-dlq"),
			"--kafka-sasl-mechanism", "scram-sha-512", "--kafka-sasl-username", "inbox", "--kafka-tls", "true", "--kafka-tls-ca-file", caFile))
		cfg := Config[map[string]any]{Consumer: "c_" + s, Brokers: []string{sb.SASLSSLAddr()}, Topics: []string{topic},
			RegistryURL: registry.URL(), DB: newPool(t, url), DLQTopic: topic + ".dlq",
			TLS: true, TLSCAFile: caFile, SASLMechanism: SASLScramSHA512, SASLUsername: "inbox", SASLPassword: password,
			Handler: func(ctx context.Context, tx pgx.Tx, ev *Event[map[string]any]) error {
				orderID, _ := ev.Value["order_id"].(string)
				_, err := tx.Exec(ctx, "INSERT INTO effects VALUES ($1, $2)", ev.ID, orderID)
				return err
			}}
		runConsumer(t, cfg)
		pool := newPool(t, url)
		for i := range 20 {
			order := uuidN(i)
			err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				_, err := outbox.Write(ctx, tx, outbox.Event{AggregateType: "Order", AggregateID: order, EventType: "OrderCreated",
					Payload: map[string]any{"order_id": order, "customer_id": "c-1", "status": "PENDING", "amount_cents": i,
						"items": []any{}, "created_at": time.Now().UnixMilli()}})
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, 120*time.Second, "the 20 orders applied", func() bool {
			n, _ := queryInt(url, "SELECT count(*) FROM effects")
			return n >= 20
		})
		if n := mustInt(t, url, "SELECT count(DISTINCT order_id) FROM effects WHERE event_id IN (SELECT id::text FROM outbox)"); n != 20 {
			t.Errorf("%d distinct orders applied with their outbox ids, want 20", n)
		}
		if n := mustInt(t, url, "SELECT count(*) FROM effects"); n != 20 {
			t.Errorf("%d effects, want 20 (each event once)", n)
		}
	})
}

// committedWith returns the group's committed offset of partition 0 of
// topic, read with cl (-1 for none).
func committedWith(t *testing.T, cl *kgo.Client, group, topic string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
	if err != nil {
		return -1 // the coordinator is not ready yet: callers poll
	}
	o, ok := offs.Lookup(topic, 0)
	if !ok || o.Err != nil {
		return -1
	}
	return o.At
}
