package inbox

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/internal/testca"
	"github.com/cdc-relay/cdc-relay/internal/testtier"
)

// running is a Consumer running in the test process.
type running[T any] struct {
	c    *Consumer[T]
	stop context.CancelFunc
	done chan error
}

func runConsumer[T any](t *testing.T, cfg Config[T]) *running[T] {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running[T]{c: c, stop: cancel, done: make(chan error, 1)}
	go func() { r.done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-r.done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(60 * time.Second):
			t.Error("Run did not return within 60 s of the cancellation")
		}
	})
	return r
}

// baseConfig is a consumer of topic with fast retries.
func baseConfig[T any](t *testing.T, url, topic string, h Handler[T]) Config[T] {
	return Config[T]{
		Consumer: "c_" + suffix(), Brokers: []string{broker.Addr()}, Topics: []string{topic},
		RegistryURL: registry.URL(), DB: newPool(t, url), Handler: h, MaxAttempts: 3,
		DLQTopic: topic + ".dlq", SessionTimeout: 6 * time.Second, RetryMin: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond,
	}
}

func orderCreated(id, customer string, cents int64) map[string]any {
	return map[string]any{"order_id": id, "customer_id": customer, "status": "PENDING", "amount_cents": cents,
		"currency": "EUR", "items": []any{}, "coupon_code": nil, "created_at": time.UnixMilli(1700000000000)}
}

func uuidN(n int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", n) }

func header(r *kgo.Record, key string) string {
	v := ""
	for _, h := range r.Headers {
		if h.Key == key {
			v = string(h.Value) // the last of the name
		}
	}
	return v
}

// TestHandlerErrorsAndPoison: a failing handler rolls back its work and the
// mark, so the event is tried again; an event that keeps failing goes to
// the dead-letter topic after MaxAttempts with the error, and the partition
// (the same key, even) keeps moving; the committed offset passes it.
func TestHandlerErrorsAndPoison(t *testing.T) {
	url := newDB(t)
	execSQL(t, url, "CREATE TABLE effects (event_id text, attempt int)")
	topic := "h" + suffix()
	createTopic(t, topic, 1)
	s := registerSchema(t, topic+"-value", "OrderCreated")
	rec := func(id, key string) record {
		return record{key: key, value: avroValue(t, s, orderCreated(uuidN(1), "c-1", 100)),
			headers: map[string]string{"id": id, "event_type": "OrderCreated", "aggregate_type": "Order"}}
	}
	produce(t, topic, []record{rec("x", "k"), rec("poison", "k"), rec("z", "k"), rec("w", "other")})

	cfg := baseConfig(t, url, topic, func(ctx context.Context, tx pgx.Tx, ev *Event[map[string]any]) error {
		if _, err := tx.Exec(ctx, "INSERT INTO effects VALUES ($1, $2)", ev.ID, ev.Attempt); err != nil {
			return err
		}
		switch {
		case ev.ID == "x" && ev.Attempt < 3:
			return fmt.Errorf("transient failure %d", ev.Attempt)
		case ev.ID == "poison":
			return errors.New("cannot apply this event")
		}
		return nil
	})
	r := runConsumer(t, cfg)
	waitFor(t, 90*time.Second, "every offset committed", func() bool { return committed(t, cfg.Consumer, topic)[0] == 4 })

	if n := mustInt(t, url, "SELECT count(*) FROM effects WHERE event_id = 'x'"); n != 1 {
		t.Errorf("x has %d effects, want 1: failed attempts must roll back", n)
	}
	if n := mustInt(t, url, "SELECT attempt FROM effects WHERE event_id = 'x'"); n != 3 {
		t.Errorf("x applied at attempt %d, want 3", n)
	}
	if n := mustInt(t, url, "SELECT count(*) FROM effects WHERE event_id = 'poison'"); n != 0 {
		t.Errorf("the poison event left %d effects", n)
	}
	var marks []string
	conn, _ := pgx.Connect(context.Background(), url)
	rows, _ := conn.Query(context.Background(), "SELECT message_id FROM processed_messages WHERE consumer = $1 ORDER BY 1", cfg.Consumer)
	for rows.Next() {
		var m string
		rows.Scan(&m)
		marks = append(marks, m)
	}
	conn.Close(context.Background())
	if got, want := strings.Join(marks, ","), "w,x,z"; got != want {
		t.Errorf("marks = %s, want %s (no mark for the dead-lettered event)", got, want)
	}
	dl := readAll(t, cfg.DLQTopic, 1, 30*time.Second)
	if len(dl) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dl))
	}
	d := dl[0]
	if header(d, "id") != "poison" || string(d.Key) != "k" || header(d, HeaderAttempts) != "3" ||
		header(d, HeaderError) != "handler_failed: cannot apply this event" || header(d, HeaderTopic) != topic || header(d, HeaderOffset) != "1" {
		t.Errorf("dead letter key %q headers %v", d.Key, d.Headers)
	}
	st := r.c.Stats()
	if st.Processed != 3 || st.DeadLettered != 1 || st.Retries != 4 || st.Duplicates != 0 {
		t.Errorf("stats = %+v, want 3 processed, 1 dead-lettered, 4 retries", st)
	}
}

// TestBadValuesGoToDLQ: values that cannot be decoded, or records without
// an id, go to the dead-letter topic with the reason at once; they never
// block the partition nor stop the consumer.
func TestBadValuesGoToDLQ(t *testing.T) {
	url := newDB(t)
	topic := "b" + suffix()
	createTopic(t, topic, 1)
	s := registerSchema(t, topic+"-value", "OrderCreated")
	good := avroValue(t, s, orderCreated(uuidN(7), "c-7", 1999))
	unknown := []byte{0, 0, 0, 0, 0, 1, 2, 3}
	binary.BigEndian.PutUint32(unknown[1:5], 987654)
	h := func(id string) map[string]string { return map[string]string{"id": id, "event_type": "OrderCreated"} }
	produce(t, topic, []record{
		{key: "k", value: []byte(`{"order_id": "1"}`), headers: h("json")},
		{key: "k", value: unknown, headers: h("unknown")},
		{key: "k", value: good, headers: map[string]string{"event_type": "OrderCreated"}},
		{key: "k", value: good[:len(good)-4], headers: h("truncated")},
		{key: "k", value: good, headers: h("good")},
	})
	var (
		mu  sync.Mutex
		got map[string]any
	)
	cfg := baseConfig(t, url, topic, func(ctx context.Context, tx pgx.Tx, ev *Event[map[string]any]) error {
		mu.Lock()
		got = ev.Value
		mu.Unlock()
		return nil
	})
	r := runConsumer(t, cfg)
	waitFor(t, 90*time.Second, "every offset committed", func() bool { return committed(t, cfg.Consumer, topic)[0] == 5 })
	dl := readAll(t, cfg.DLQTopic, 4, 30*time.Second)
	want := map[string]string{"json": ReasonBadMagic, "unknown": ReasonUnknownSchema, "": ReasonNoID, "truncated": ReasonUndecodable}
	for _, d := range dl {
		id := header(d, "id")
		if reason := header(d, HeaderError); !strings.HasPrefix(reason, want[id]+": ") {
			t.Errorf("dead letter %q: error header %q, want the reason %s", id, reason, want[id])
		}
		delete(want, id)
	}
	if len(want) != 0 {
		t.Errorf("missing dead letters: %v", want)
	}
	mu.Lock()
	defer mu.Unlock()
	if got["customer_id"] != "c-7" || got["amount_cents"] != int64(1999) {
		t.Errorf("decoded value = %v", got)
	}
	select {
	case err := <-r.done:
		t.Fatalf("the consumer stopped: %v", err)
	default:
	}
	if st := r.c.Stats(); st.Processed != 1 || st.DeadLettered != 4 {
		t.Errorf("stats = %+v", st)
	}
}

// TestResumeFromEarliestUnprocessed kills the example consumer with -9
// while later offsets of a partition are done but an earlier one is not
// (its handler waits on a row lock the test holds). The next instance
// starts from the earliest unprocessed offset: the blocked event is applied
// once, and the later ones come again and are skipped as duplicates.
func TestResumeFromEarliestUnprocessed(t *testing.T) {
	t.Parallel()
	url := newDB(t)
	topic := "r" + suffix()
	createTopic(t, topic, 1)
	consumer := "loyalty_" + suffix()
	args := []string{"--pg-url", url, "--kafka-brokers", broker.Addr(), "--schema-registry-url", registry.URL(),
		"--topics", topic, "--consumer", consumer, "--session-timeout", "6s", "--workers", "4"}
	first := start(t, "loyalty-1", loyaltyBin, append(args, "--setup")...)
	waitFor(t, 60*time.Second, "the loyalty tables", func() bool {
		n, _ := queryInt(url, "SELECT count(*) FROM pg_tables WHERE tablename = 'loyalty_effects'")
		return n == 1
	})
	execSQL(t, url, "INSERT INTO loyalty_balances VALUES ('c-stall', 0)")
	ctx := context.Background()
	lock, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close(ctx)
	ltx, err := lock.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ltx.Exec(ctx, "SELECT * FROM loyalty_balances WHERE customer_id = 'c-stall' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}

	s := registerSchema(t, topic+"-value", "OrderCreated")
	worker := func(key string) uint32 { h := fnv.New32a(); h.Write([]byte(key)); return h.Sum32() % 4 }
	stalled := uuidN(0)
	recs := []record{{key: stalled, value: avroValue(t, s, orderCreated(stalled, "c-stall", 500)),
		headers: map[string]string{"id": "ev-0", "event_type": "OrderCreated"}}}
	// Ten later events on other workers than the stalled one.
	for n := 1; len(recs) <= 10; n++ {
		if worker(uuidN(n)) == worker(stalled) {
			continue
		}
		recs = append(recs, record{key: uuidN(n), value: avroValue(t, s, orderCreated(uuidN(n), fmt.Sprintf("c-%d", n), 300)),
			headers: map[string]string{"id": fmt.Sprintf("ev-%d", n), "event_type": "OrderCreated"}})
	}
	produce(t, topic, recs)
	waitFor(t, 90*time.Second, "the ten later events applied", func() bool {
		n, _ := queryInt(url, "SELECT count(*) FROM bonus_accruals")
		return n == 10
	})
	if off, ok := committed(t, consumer, topic)[0]; ok && off > 0 {
		t.Fatalf("committed offset %d while offset 0 is not processed", off)
	}
	first.Kill()
	if err := ltx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	second := start(t, "loyalty-2", loyaltyBin, args...)
	waitFor(t, 120*time.Second, "the stalled event applied and every offset committed", func() bool {
		n, _ := queryInt(url, "SELECT count(*) FROM bonus_accruals WHERE order_id = $1", stalled)
		return n == 1 && committed(t, consumer, topic)[0] == 11
	})
	if n := mustInt(t, url, "SELECT count(*) FROM bonus_accruals"); n != 11 {
		t.Errorf("%d accruals, want 11 (one per order)", n)
	}
	if n := mustInt(t, url, "SELECT points FROM loyalty_balances WHERE customer_id = 'c-stall'"); n != 5 {
		t.Errorf("c-stall has %d points, want 5", n)
	}
	if dups := len(second.Lines("duplicate ")); dups != 10 {
		t.Errorf("the second instance skipped %d duplicates, want the 10 events done before the kill", dups)
	}
}

func TestNewConfigErrors(t *testing.T) {
	testtier.Need(t)
	h := func(context.Context, pgx.Tx, *Event[map[string]any]) error { return nil }
	valid := Config[map[string]any]{Consumer: "c", Brokers: []string{"b:9092"}, Topics: []string{"t"}, RegistryURL: "http://r",
		DB: newPool(t, pg.URL("")), Handler: h}
	c, err := New(valid)
	if err != nil {
		t.Fatalf("valid config: %v", err)
	}
	ca := testca.New(t)
	cert, key := ca.Issue(t, "inbox")
	dir := t.TempDir()
	caFile, certFile, keyFile, notPEM := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), filepath.Join(dir, "not.pem")
	for path, data := range map[string][]byte{caFile: ca.PEM, certFile: cert, keyFile: key, notPEM: []byte("not PEM")} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.cfg; got.MaxAttempts != 5 || got.BatchSize != 1 || got.TransientTimeout != 10*time.Minute || got.KeyFormat != KeyString || got.ReadUncommitted {
		t.Errorf("defaults: MaxAttempts %d, BatchSize %d, TransientTimeout %s, KeyFormat %q, ReadUncommitted %v; want 5, 1, 10m, string, false",
			got.MaxAttempts, got.BatchSize, got.TransientTimeout, got.KeyFormat, got.ReadUncommitted)
	}
	secured := valid
	secured.TLS, secured.TLSCAFile, secured.TLSCertFile, secured.TLSKeyFile = true, caFile, certFile, keyFile
	secured.SASLMechanism, secured.SASLUsername, secured.SASLPassword = SASLScramSHA512, "inbox", "pw"
	if _, err := New(secured); err != nil {
		t.Errorf("TLS with a CA and a client certificate, SCRAM-SHA-512: %v", err)
	}
	for _, c := range []struct {
		field string
		mod   func(*Config[map[string]any])
	}{
		{"Consumer", func(c *Config[map[string]any]) { c.Consumer = "" }},
		{"Handler", func(c *Config[map[string]any]) { c.Handler = nil }},
		{"BatchSize", func(c *Config[map[string]any]) { c.BatchSize = -1 }},
		{"TxOptions", func(c *Config[map[string]any]) { c.TxOptions = pgx.TxOptions{AccessMode: pgx.ReadOnly} }},
		{"KeyFormat", func(c *Config[map[string]any]) { c.KeyFormat = "protobuf" }},
		{"SQLHandler", func(c *Config[map[string]any]) {
			c.SQLHandler = func(context.Context, *sql.Tx, *Event[map[string]any]) error { return nil }
		}},
		{"SQLDB", func(c *Config[map[string]any]) {
			c.Handler, c.SQLHandler = nil, func(context.Context, *sql.Tx, *Event[map[string]any]) error { return nil }
		}},
		{"MaxAttempts", func(c *Config[map[string]any]) { c.MaxAttempts = -2 }},
		{"Brokers", func(c *Config[map[string]any]) { c.Brokers = nil }},
		{"Topics", func(c *Config[map[string]any]) { c.Topics = nil }},
		{"RegistryURL", func(c *Config[map[string]any]) { c.RegistryURL = "" }},
		{"DB", func(c *Config[map[string]any]) { c.DB = nil }},
		{"Table", func(c *Config[map[string]any]) { c.Table = "a.b.c" }},
		{"RegistryURL", func(c *Config[map[string]any]) { c.RegistryURL = "registry:8081" }},
		{"TLSCAFile", func(c *Config[map[string]any]) { c.TLSCAFile = caFile }},
		{"TLSCAFile", func(c *Config[map[string]any]) { c.TLS, c.TLSCAFile = true, filepath.Join(dir, "missing.pem") }},
		{"TLSCAFile", func(c *Config[map[string]any]) { c.TLS, c.TLSCAFile = true, notPEM }},
		{"TLSCertFile", func(c *Config[map[string]any]) { c.TLS, c.TLSCertFile = true, certFile }},
		{"TLSCertFile", func(c *Config[map[string]any]) { c.TLS, c.TLSCertFile, c.TLSKeyFile = true, notPEM, keyFile }},
		{"TLSCertFile", func(c *Config[map[string]any]) { c.TLSCertFile, c.TLSKeyFile = certFile, keyFile }},
		{"TLSKeyFile", func(c *Config[map[string]any]) {
			c.TLS, c.TLSCertFile, c.TLSKeyFile = true, certFile, filepath.Join(dir, "missing-key.pem")
		}},
		{"SASLMechanism", func(c *Config[map[string]any]) { c.SASLMechanism = "gssapi" }},
		{"SASLUsername", func(c *Config[map[string]any]) { c.SASLMechanism, c.SASLPassword = SASLScramSHA256, "pw" }},
		{"SASLPassword", func(c *Config[map[string]any]) { c.SASLMechanism, c.SASLUsername = SASLPlain, "u" }},
		{"SASLUsername", func(c *Config[map[string]any]) {
			c.SASLMechanism, c.SASLUsername, c.SASLPassword = SASLScramSHA512, "bell\a", "pw"
		}},
	} {
		cfg := valid
		c.mod(&cfg)
		_, err := New(cfg)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field || !strings.Contains(err.Error(), "Config."+c.field) {
			t.Errorf("%s: err = %v, want a ConfigError naming %s", c.field, err, c.field)
		}
	}
}

// TestCleanup deletes old marks of one consumer in bounded batches and
// keeps recent marks and other consumers' marks.
func TestCleanup(t *testing.T) {
	url := newDB(t)
	execSQL(t, url, `INSERT INTO processed_messages (consumer, message_id, processed_at)
		SELECT 'me', 'old-' || i, now() - interval '2 hours' FROM generate_series(1, 2500) i;
		INSERT INTO processed_messages (consumer, message_id) SELECT 'me', 'new-' || i FROM generate_series(1, 10) i;
		INSERT INTO processed_messages (consumer, message_id, processed_at)
		SELECT 'other', 'old-' || i, now() - interval '2 hours' FROM generate_series(1, 30) i`)
	c, err := New(Config[map[string]any]{Consumer: "me", Brokers: []string{"b"}, Topics: []string{"t"}, RegistryURL: "http://r",
		DB: newPool(t, url), MaxAttempts: 1, CleanupBatch: 1000,
		Handler: func(context.Context, pgx.Tx, *Event[map[string]any]) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	n, err := c.Cleanup(context.Background(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2500 {
		t.Errorf("Cleanup deleted %d, want 2500", n)
	}
	if got := mustInt(t, url, "SELECT count(*) FROM processed_messages WHERE consumer = 'me'"); got != 10 {
		t.Errorf("%d marks of the consumer left, want the 10 recent ones", got)
	}
	if got := mustInt(t, url, "SELECT count(*) FROM processed_messages WHERE consumer = 'other'"); got != 30 {
		t.Errorf("%d marks of another consumer left, want 30", got)
	}
	if _, err := c.Cleanup(context.Background(), 0); err == nil {
		t.Error("Cleanup without Retention or an age: no error")
	}
}
