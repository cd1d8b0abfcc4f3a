package main

// The integration harness: real PostgreSQL 15, Apache Kafka 4.x and the
// AxonOps schema registry, each started by the first test that uses it and
// shared by the package (TestMain stops them), so the tests that need none
// (the config tests, make unit) start none; the relay runs as the built
// binary, exactly as users run it, built by the first test that starts
// one; what lands in Kafka is read by franz-go and decoded by goavro, not
// by the relay's own code. A test that stops or restarts a service uses
// one of its own (fixture.ownBroker, startTarget), so that it can run in
// parallel with the tests on the shared ones.

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riferrei/srclient"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/internal/kafkatest"
	"github.com/cdc-relay/cdc-relay/internal/pgtest"
	"github.com/cdc-relay/cdc-relay/internal/relaytest"
)

// The package's services: each method of pg, broker and registry starts
// its service first (relaytest.NewLazy). newFixture and fixture.args start
// them through relaytest.Need, which fails just the test when one cannot
// start.
var (
	services = relaytest.NewLazy(relaytest.LazyOptions{
		ServiceOptions: relaytest.ServiceOptions{
			PG:    pgtest.Options{Settings: map[string]string{"wal_sender_timeout": "10s"}},
			Kafka: brokerOptions(),
		},
		PGReady: func(c *pgtest.Cluster) (err error) {
			dbURL, err = c.CreateDatabase(context.Background(), testDB)
			return err
		},
	})
	pg       = services.PG
	broker   = services.Broker
	registry = services.Registry
	// apicurio is the package's Apicurio Registry, the second registry of
	// the registry-facing tests (eachRegistry).
	apicurio = services.Apicurio
	// dbURL is testDB's URL, set when PostgreSQL starts: read it after
	// newFixture (or pg.Need).
	dbURL string
	// relayBin is the relay binary, built by the first startRelay into
	// binDir.
	relayBin  string
	binDir    string
	schemaDir string
)

const testDB = "relay_test"

// brokerOptions are the shared broker's, and each private broker's,
// options: three partitions per topic, so ordering and partitioning are
// exercised.
func brokerOptions() kafkatest.Options {
	return kafkatest.Options{ExtraConfig: map[string]string{"num.partitions": "3"}}
}

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

// testMain runs the tests and then stops the services they started.
func testMain(m *testing.M) int {
	schemaDir, _ = filepath.Abs("../../testdata/schemas")
	defer sharedRabbit.Close()
	defer func() {
		if err := services.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "integration harness: %v\n", err)
		}
		if binDir != "" {
			os.RemoveAll(binDir)
		}
	}()
	return m.Run()
}

var (
	buildOnce sync.Once
	buildErr  error
)

// buildRelay builds relayBin once; a test that needs it fails if it cannot.
func buildRelay(t *testing.T) {
	t.Helper()
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "cdc-relay-bin-"); buildErr != nil {
			return
		}
		relayBin = filepath.Join(binDir, "cdc-relay")
		// CDC_RELAY_TEST_BUILD_FLAGS="-race" runs every relay the tests
		// start under the race detector.
		buildErr = relaytest.Build("", binDir, strings.Fields(os.Getenv("CDC_RELAY_TEST_BUILD_FLAGS")), ".")
	})
	if buildErr != nil {
		t.Fatalf("build relay: %v", buildErr)
	}
}

// pgTarget is a database the tests run against: the harness's PostgreSQL 15
// database, or one on a cluster of another major (matrix_test.go).
type pgTarget struct {
	cluster *pgtest.Cluster
	db      string // database name
	url     string
}

// defaultTarget is the package's database on PostgreSQL 15.
func defaultTarget() pgTarget { return pgTarget{cluster: pg.Get(), db: testDB, url: dbURL} }

// fixture is one test's own table, slot, publication and topics.
type fixture struct {
	t           *testing.T
	pg          pgTarget
	name        string
	table       string
	slot        string
	publication string
	topicPrefix string
	dlq         string
	// reg is the registry f.args names: the package's AxonOps registry
	// unless the test runs under eachRegistry.
	reg relaytest.SchemaRegistry
	// kafka is the test's own broker (ownBroker), nil for the package's
	// shared one.
	kafka *kafkatest.Broker
}

// ownBroker gives the fixture a Kafka broker of its own: f.args,
// f.consume and f.stopBroker use it instead of the shared broker, so a test
// that stops Kafka can run in parallel with the others.
func (f *fixture) ownBroker() {
	f.t.Helper()
	f.kafka = relaytest.PrivateBroker(f.t, brokerOptions())
}

// brokerAddr is the address of the fixture's broker.
func (f *fixture) brokerAddr() string {
	f.t.Helper()
	if f.kafka != nil {
		return f.kafka.Addr()
	}
	relaytest.Need(f.t, broker)
	return broker.Addr()
}

func randSuffix() string {
	b := make([]byte, 4)
	rand.Read(b)
	return hex.EncodeToString(b)
}

const outboxDDL = `CREATE TABLE %s (
	id bigserial PRIMARY KEY,
	aggregate_type text NOT NULL,
	aggregate_id text NOT NULL,
	event_type text NOT NULL,
	payload jsonb NOT NULL,
	headers jsonb NOT NULL DEFAULT '{}',
	created_at timestamptz NOT NULL DEFAULT now()
)`

// newFixture creates the test's outbox table (ddl "" means the default DDL)
// in the harness's PostgreSQL 15 database.
func newFixture(t *testing.T, ddl string) *fixture {
	t.Helper()
	relaytest.Need(t, pg)
	return newFixtureOn(t, defaultTarget(), ddl)
}

// newFixtureOn creates the test's outbox table in target's database.
func newFixtureOn(t *testing.T, target pgTarget, ddl string) *fixture {
	t.Helper()
	s := randSuffix()
	f := &fixture{t: t, pg: target, name: s, table: "outbox_" + s, slot: "slot_" + s, publication: "pub_" + s,
		topicPrefix: "t" + s, dlq: "t" + s + ".dlq", reg: registry}
	if ddl == "" {
		ddl = outboxDDL
	}
	f.exec(fmt.Sprintf(ddl, "public."+f.table))
	t.Cleanup(func() {
		// Drop the slot so WAL is not retained for the rest of the run.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, f.pg.url)
		if err == nil {
			conn.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active", f.slot)
			conn.Close(ctx)
		}
	})
	return f
}

func (f *fixture) exec(sql string, args ...any) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := f.pg.cluster.Exec(ctx, f.pg.db, sql, args...); err != nil {
		f.t.Fatalf("exec %q: %v", sql, err)
	}
}

func (f *fixture) topic(aggregateType string) string { return f.topicPrefix + "." + aggregateType }

// args are the relay flags for this fixture, plus extra.
func (f *fixture) args(extra ...string) []string {
	f.t.Helper()
	if f.reg == nil {
		f.reg = registry // a fixture built by hand, not by newFixture
	}
	relaytest.Need(f.t, f.reg)
	return append([]string{"run",
		"--pg-url", f.pg.url,
		"--slot", f.slot,
		"--publication", f.publication,
		"--table", "public." + f.table,
		"--kafka-brokers", f.brokerAddr(),
		"--topic-template", f.topicPrefix + ".{aggregate_type}",
		"--schema-registry-url", f.reg.URL(),
		"--schemas-dir", schemaDir,
		"--dlq-topic", f.dlq,
		"--log-level", "debug",
	}, extra...)
}

// registries are the schema registries the registry-facing tests run
// against (AxonOps and Apicurio Registry), one of each per test binary.
var registries = services.Registries()

// eachRegistry runs test as a parallel subtest per registry, named
// "axonops" and "apicurio"; newFixtureFor gives the subtest a fixture whose
// relay flags name that registry.
func eachRegistry(t *testing.T, test func(t *testing.T, reg relaytest.SchemaRegistry)) {
	t.Helper()
	relaytest.EachRegistry(t, registries, test)
}

// defaultBackward is relaytest.DefaultBackward.
var defaultBackward = relaytest.DefaultBackward

// newFixtureFor is newFixture with reg as the fixture's registry.
func newFixtureFor(t *testing.T, reg relaytest.SchemaRegistry, ddl string) *fixture {
	t.Helper()
	f := newFixture(t, ddl)
	f.reg = reg
	return f
}

// event is one outbox row to insert.
type event struct {
	AggregateType, AggregateID, EventType string
	Payload                               string
	Headers                               string
}

// insertTx inserts events in one transaction and returns their ids.
func (f *fixture) insertTx(ctx context.Context, conn *pgx.Conn, evs []event) ([]int64, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(ctx)
	ids := make([]int64, len(evs))
	for i, e := range evs {
		h := e.Headers
		if h == "" {
			h = "{}"
		}
		if err := tx.QueryRow(ctx, fmt.Sprintf(`INSERT INTO public.%s (aggregate_type, aggregate_id, event_type, payload, headers)
			VALUES ($1, $2, $3, $4::jsonb, $5::jsonb) RETURNING id`, f.table), e.AggregateType, e.AggregateID, e.EventType, e.Payload, h).Scan(&ids[i]); err != nil {
			return nil, err
		}
	}
	return ids, tx.Commit(ctx)
}

func connect(t *testing.T) *pgx.Conn {
	t.Helper()
	relaytest.Need(t, pg)
	return connectURL(t, dbURL)
}

// connect opens a connection to the fixture's database, closed at cleanup.
func (f *fixture) connect() *pgx.Conn {
	f.t.Helper()
	return connectURL(f.t, f.pg.url)
}

func connectURL(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// slotState reads the slot's confirmed_flush_lsn and whether a process holds
// it (0 and false when the slot is missing or cannot be read).
func (f *fixture) slotState() (confirmed uint64, active bool) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, f.pg.url) // closed here: callers poll this
	if err != nil {
		return 0, false
	}
	defer conn.Close(context.Background())
	var s *string
	err = conn.QueryRow(ctx, "SELECT confirmed_flush_lsn::text, active FROM pg_replication_slots WHERE slot_name = $1", f.slot).Scan(&s, &active)
	if err != nil {
		return 0, false
	}
	if s != nil {
		confirmed = parseLSN(f.t, *s)
	}
	return confirmed, active
}

// confirmedFlush reads the slot's confirmed_flush_lsn (0 if the slot is missing).
func (f *fixture) confirmedFlush() uint64 {
	f.t.Helper()
	confirmed, _ := f.slotState()
	return confirmed
}

// slotActive reports whether a process holds the slot.
func (f *fixture) slotActive() bool {
	f.t.Helper()
	_, active := f.slotState()
	return active
}

func parseLSN(t *testing.T, s string) uint64 {
	var hi, lo uint32
	if _, err := fmt.Sscanf(s, "%X/%X", &hi, &lo); err != nil {
		t.Fatalf("parse LSN %q: %v", s, err)
	}
	return uint64(hi)<<32 | uint64(lo)
}

func currentLSN(t *testing.T, conn *pgx.Conn) uint64 {
	t.Helper()
	var s string
	if err := conn.QueryRow(context.Background(), "SELECT pg_current_wal_insert_lsn()::text").Scan(&s); err != nil {
		t.Fatal(err)
	}
	return parseLSN(t, s)
}

// relay is one running cdc-relay process: a relaytest.Process under the
// names the tests use. done is closed, and exitCode set, once it exited.
type relay struct {
	*relaytest.Process
	t           *testing.T
	cmd         *exec.Cmd
	metricsAddr string
	done        chan struct{}
	exitCode    int
}

// startRelay runs the binary with args and a metrics port of its own.
func startRelay(t *testing.T, args []string) *relay {
	t.Helper()
	buildRelay(t)
	p := relaytest.Start(t, relayBin, args, relaytest.Options{MetricsPort: true, LogDir: os.Getenv("CDC_RELAY_TEST_LOG_DIR"), TailBytes: 6000})
	r := &relay{Process: p, t: t, cmd: p.Cmd, metricsAddr: p.MetricsAddr, done: make(chan struct{})}
	go func() {
		<-p.Done()
		r.exitCode = p.ExitCode()
		close(r.done)
	}()
	return r
}

func tailString(s string, n int) string { return relaytest.Tail(s, n) }

func (r *relay) kill() { r.Kill(); <-r.done }

// wait waits for the process to exit and returns its exit code.
func (r *relay) wait(timeout time.Duration) int {
	r.t.Helper()
	code := r.Wait(timeout)
	<-r.done
	return code
}

// terminate sends SIGTERM and returns the exit code.
func (r *relay) terminate() int {
	r.t.Helper()
	code := r.Terminate()
	<-r.done
	return code
}

// getJSON GETs path from the relay's HTTP server and decodes the JSON
// object it answers (status 0 when it does not answer).
func (r *relay) getJSON(path string) (int, map[string]string) { return r.GetJSON(path) }

// metric reads one unlabelled metric (or the sum over its label sets).
func (r *relay) metric(name string) (float64, error) { return r.Metric(name) }

// waitFor polls cond until it is true or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	relaytest.WaitFor(t, timeout, what, cond)
}

// stopBroker stops the shared broker and returns the function that starts
// it again. When the test ends without calling it, cleanup restarts the
// broker for the tests that follow.
func stopBroker(t *testing.T) (restart func()) {
	t.Helper()
	if err := broker.Stop(); err != nil {
		t.Fatal(err)
	}
	up := false
	t.Cleanup(func() {
		if !up {
			broker.Restart()
		}
	})
	return func() {
		t.Helper()
		if err := broker.Restart(); err != nil {
			t.Fatal(err)
		}
		up = true
	}
}

// stopBroker stops the fixture's broker and returns the function that
// starts it again. The shared broker is restarted at cleanup when the test
// did not (see stopBroker); the fixture's own is closed at cleanup.
func (f *fixture) stopBroker() (restart func()) {
	f.t.Helper()
	if f.kafka == nil {
		return stopBroker(f.t)
	}
	if err := f.kafka.Stop(); err != nil {
		f.t.Fatal(err)
	}
	return func() {
		f.t.Helper()
		if err := f.kafka.Restart(); err != nil {
			f.t.Fatal(err)
		}
	}
}

// record is what the independent consumer saw.
type record struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       string
	Value     []byte
	Headers   map[string]string
	// Codec is the compression of the record's batch as stored by the
	// broker (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
	Codec uint8
	// At is when the consumer received the record.
	At time.Time
	// Timestamp is the record's timestamp (on a topic with
	// message.timestamp.type=LogAppendTime, the broker's append time).
	Timestamp time.Time
	// NullValue is true for a null value (a tombstone).
	NullValue bool
	// NullHeaders names the headers with a null value.
	NullHeaders []string
}

// consumer reads topics from the start with franz-go.
type consumer struct {
	t      *testing.T
	client *kgo.Client
	mu     sync.Mutex
	recs   []record
	cancel context.CancelFunc
	done   chan struct{}
}

// consume starts reading every topic whose name matches the regex.
func consume(t *testing.T, topicRegex string, opts ...kgo.Opt) *consumer {
	t.Helper()
	relaytest.Need(t, broker)
	return consumeAt(t, broker.Addr(), topicRegex, opts...)
}

// consume reads, from the fixture's broker, every topic whose name
// matches the regex.
func (f *fixture) consume(topicRegex string, opts ...kgo.Opt) *consumer {
	f.t.Helper()
	return consumeAt(f.t, f.brokerAddr(), topicRegex, opts...)
}

// consumeAt is consume against the broker at addr.
func consumeAt(t *testing.T, addr, topicRegex string, opts ...kgo.Opt) *consumer {
	t.Helper()
	base := []kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumeRegex(), kgo.ConsumeTopics(topicRegex),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.MetadataMinAge(250 * time.Millisecond), kgo.MetadataMaxAge(time.Second),
		kgo.FetchMaxWait(250 * time.Millisecond)} // new topics join the next fetch sooner
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &consumer{t: t, client: cl, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for ctx.Err() == nil {
			fetches := cl.PollFetches(ctx)
			at := time.Now()
			fetches.EachRecord(func(r *kgo.Record) {
				h := map[string]string{}
				var nulls []string
				for _, x := range r.Headers {
					h[x.Key] = string(x.Value)
					if x.Value == nil {
						nulls = append(nulls, x.Key)
					}
				}
				c.mu.Lock()
				c.recs = append(c.recs, record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: string(r.Key), Value: r.Value, Headers: h,
					Codec: r.Attrs.CompressionType(), At: at, Timestamp: r.Timestamp, NullValue: r.Value == nil, NullHeaders: nulls})
				c.mu.Unlock()
			})
		}
	}()
	t.Cleanup(func() { cancel(); cl.Close(); <-c.done })
	return c
}

func (c *consumer) records() []record {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]record(nil), c.recs...)
}

// distinctIDs counts records by their id header.
func distinctIDs(recs []record) map[string]int {
	m := map[string]int{}
	for _, r := range recs {
		m[r.Headers["id"]]++
	}
	return m
}

// waitIDs waits until every id in want has been seen.
func (c *consumer) waitIDs(timeout time.Duration, want []int64) []record {
	c.t.Helper()
	var recs []record
	waitFor(c.t, timeout, fmt.Sprintf("%d events in Kafka", len(want)), func() bool {
		recs = c.records()
		seen := distinctIDs(recs)
		for _, id := range want {
			if seen[strconv.FormatInt(id, 10)] == 0 {
				return false
			}
		}
		return true
	})
	return recs
}

// avroDecoder decodes Confluent-framed values the way a Go consumer would:
// srclient fetches the writer schema by id, and its goavro codec decodes the
// body. Nothing of the relay's own encoder is involved.
type avroDecoder struct {
	client *srclient.SchemaRegistryClient
}

func newAvroDecoder() *avroDecoder { return newAvroDecoderAt(registry.URL()) }

// newAvroDecoderAt is an avroDecoder against the registry at url.
func newAvroDecoderAt(url string) *avroDecoder {
	return &avroDecoder{client: srclient.NewSchemaRegistryClient(url)}
}

// avroDecoder is an avroDecoder against the fixture's registry.
func (f *fixture) avroDecoder() *avroDecoder {
	if f.reg == nil {
		f.reg = registry
	}
	return newAvroDecoderAt(f.reg.URL())
}

func (d *avroDecoder) decode(value []byte) (map[string]any, uint32, error) {
	if len(value) < 5 || value[0] != 0 {
		return nil, 0, fmt.Errorf("value is not in the Confluent wire format: % x", value[:min(len(value), 8)])
	}
	id := binary.BigEndian.Uint32(value[1:5])
	schema, err := d.client.GetSchema(int(id))
	if err != nil {
		return nil, id, fmt.Errorf("schema %d: %w", id, err)
	}
	native, rest, err := schema.Codec().NativeFromBinary(value[5:])
	if err != nil {
		return nil, id, err
	}
	if len(rest) != 0 {
		return nil, id, fmt.Errorf("%d trailing bytes after the Avro body", len(rest))
	}
	m, ok := native.(map[string]any)
	if !ok {
		return nil, id, fmt.Errorf("decoded %T, want a record", native)
	}
	return m, id, nil
}

// waitMetric polls a metric until cond holds.
func (r *relay) waitMetric(name string, timeout time.Duration, cond func(float64) bool) float64 {
	r.t.Helper()
	return r.WaitMetric(name, timeout, cond)
}

// waitStreaming waits until the relay reports it holds the slot.
func (r *relay) waitStreaming(timeout time.Duration) {
	r.t.Helper()
	r.waitMetric("cdc_relay_active", timeout, func(v float64) bool { return v == 1 })
}
