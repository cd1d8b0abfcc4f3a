package inbox

// The test harness: real PostgreSQL 15, Apache Kafka 4.x and the schema
// registry, each started by the first test that uses it and shared by the
// package (TestMain stops them); the relay and the example services run as
// binaries built by the first test that starts one, so kill -9 is real. What lands in Kafka
// is read, and test records are written, with franz-go and goavro (through
// srclient), not with this package's code.

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riferrei/srclient"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cdc-relay/cdc-relay/internal/freeport"
	"github.com/cdc-relay/cdc-relay/internal/kafkatest"
	"github.com/cdc-relay/cdc-relay/internal/pgtest"
	"github.com/cdc-relay/cdc-relay/internal/relaytest"
)

// The package's services: each method of pg, broker and registry starts
// its service first (relaytest.NewLazy).
var (
	services = relaytest.NewLazy(relaytest.LazyOptions{ServiceOptions: relaytest.ServiceOptions{
		PG: pgtest.Options{Settings: map[string]string{"wal_sender_timeout": "10s"}},
		Kafka: kafkatest.Options{ExtraConfig: map[string]string{
			"num.partitions": "3", "group.initial.rebalance.delay.ms": "0"}},
	}})
	pg       = services.PG
	broker   = services.Broker
	registry = services.Registry
	root     string // the module root
	// The binaries, built together by the first start of any of them.
	relayBin   string
	ordersBin  string
	loyaltyBin string
)

// Tests that stop or restart a shared service (the broker, the RabbitMQ
// node) or set the environment are not parallel: Go runs every serial
// test before the parallel ones start.
func TestMain(m *testing.M) { os.Exit(testMain(m)) }

// testMain runs the tests and then stops the services they started.
func testMain(m *testing.M) int {
	fail := func(what string, err error) int {
		fmt.Fprintf(os.Stderr, "inbox tests: %s: %v\n", what, err)
		return 1
	}
	var err error
	if root, err = filepath.Abs(".."); err != nil {
		return fail("module root", err)
	}
	tmp, err := os.MkdirTemp("", "inbox-bin-")
	if err != nil {
		return fail("temp dir", err)
	}
	defer os.RemoveAll(tmp)
	relayBin, ordersBin, loyaltyBin = filepath.Join(tmp, "cdc-relay"), filepath.Join(tmp, "orders"), filepath.Join(tmp, "loyalty")
	defer rabbit.Close()
	defer func() {
		if err := services.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "inbox tests: %v\n", err)
		}
	}()
	return m.Run()
}

var (
	buildOnce sync.Once
	buildErr  error
)

// build builds relayBin, ordersBin and loyaltyBin once; a test that needs
// them fails if they cannot be built.
func build(t testing.TB) {
	t.Helper()
	buildOnce.Do(func() {
		buildErr = relaytest.Build(root, filepath.Dir(relayBin), nil, "./cmd/cdc-relay", "./examples/orders", "./examples/loyalty")
	})
	if buildErr != nil {
		t.Fatalf("build: %v", buildErr)
	}
}

func suffix() string {
	b := make([]byte, 4)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// newDB creates the test's own database with processed_messages
// (docs/inbox.sql) and returns its URL.
func newDB(t testing.TB) string {
	t.Helper()
	relaytest.Need(t, pg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	url, err := pg.CreateDatabase(ctx, "t_"+suffix())
	if err != nil {
		t.Fatal(err)
	}
	execDoc(t, url, "inbox.sql")
	return url
}

// execDoc runs a DDL file of docs/ (e.g. outbox.sql) in the database.
func execDoc(t testing.TB, url, name string) {
	t.Helper()
	ddl, err := os.ReadFile(filepath.Join(root, "docs", name))
	if err != nil {
		t.Fatal(err)
	}
	execSQL(t, url, string(ddl))
}

func execSQL(t testing.TB, url, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("exec %q: %v", sql, err)
	}
}

// queryInt runs a query returning one integer (0 on error: callers poll).
func queryInt(url, sql string, args ...any) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	var n int64
	err = conn.QueryRow(ctx, sql, args...).Scan(&n)
	return n, err
}

func mustInt(t testing.TB, url, sql string, args ...any) int64 {
	t.Helper()
	n, err := queryInt(url, sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func newPool(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// waitFor polls cond until it is true or the timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	relaytest.WaitFor(t, timeout, what, cond)
}

func kafkaClient(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	relaytest.Need(t, broker)
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(broker.Addr())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// createTopic creates a topic with n partitions.
func createTopic(t testing.TB, topic string, n int32) {
	t.Helper()
	cl := kafkaClient(t)
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, n, 1
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 30000
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Topics[0].ErrorCode; code != 0 {
		t.Fatalf("create topic %s: error code %d", topic, code)
	}
}

// record is a test record to produce.
type record struct {
	key     string
	value   []byte
	headers map[string]string
	// partition, when >= 0, is set explicitly (manual partitioner).
	partition int32
}

// produce writes records in order, synchronously.
func produce(t testing.TB, topic string, recs []record) {
	t.Helper()
	produceWith(t, kafkaClient(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MaxBufferedRecords(100000)), topic, recs)
}

// produceWith writes records in order, synchronously, with cl, a client
// with the manual partitioner.
func produceWith(t testing.TB, cl *kgo.Client, topic string, recs []record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	krs := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		kr := &kgo.Record{Topic: topic, Key: []byte(r.key), Value: r.value, Partition: r.partition}
		for k, v := range r.headers {
			kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
		}
		krs[i] = kr
	}
	if err := cl.ProduceSync(ctx, krs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// readAll reads a topic from the start until want records arrived.
func readAll(t testing.TB, topic string, want int, timeout time.Duration) []*kgo.Record {
	t.Helper()
	cl := kafkaClient(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(250*time.Millisecond))
	var recs []*kgo.Record
	deadline := time.Now().Add(timeout)
	for len(recs) < want {
		if time.Now().After(deadline) {
			t.Fatalf("read %d records of %s, want %d", len(recs), topic, want)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
		cancel()
	}
	return recs
}

// committed returns the group's committed offsets of topic by partition,
// read with franz-go (-1 for none).
func committed(t testing.TB, group, topic string) map[int32]int64 {
	t.Helper()
	cl := kafkaClient(t)
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = topic
	rt.Partitions = []int32{0, 1, 2}
	req.Topics = append(req.Topics, rt)
	var resp *kmsg.OffsetFetchResponse
	waitFor(t, 60*time.Second, "the group coordinator", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var err error
		resp, err = req.RequestWith(ctx, cl)
		return err == nil && resp.ErrorCode == 0
	})
	out := map[int32]int64{}
	for _, tt := range resp.Topics {
		for _, p := range tt.Partitions {
			if p.ErrorCode == 0 {
				out[p.Partition] = p.Offset
			}
		}
	}
	return out
}

// endOffsets returns the sum of topic's end offsets over partitions 0..n-1,
// read with franz-go: how many records the topic holds. Its client is
// closed on return, so it may be polled.
func endOffsets(t testing.TB, topic string, n int32) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := range n {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = p, -1 // -1: the end
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, tt := range resp.Topics {
		for _, p := range tt.Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("list offsets of %s/%d: error code %d", topic, p.Partition, p.ErrorCode)
			}
			sum += p.Offset
		}
	}
	return sum
}

// registerSchema registers an .avsc of testdata/schemas under subject and
// returns srclient's view of it (id and goavro codec).
func registerSchema(t testing.TB, subject, eventType string) *srclient.Schema {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(root, "testdata", "schemas", eventType+".avsc"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := srclient.NewSchemaRegistryClient(registry.URL()).CreateSchema(subject, string(text), srclient.Avro)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// avroValue encodes native with goavro in the Confluent wire format.
func avroValue(t testing.TB, s *srclient.Schema, native map[string]any) []byte {
	t.Helper()
	v := []byte{0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(v[1:], uint32(s.ID()))
	v, err := s.Codec().BinaryFromNative(v, native)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// proc is a running binary whose output is kept.
type proc = relaytest.Process

// start runs bin with args in the module root.
func start(t testing.TB, name, bin string, args ...string) *proc {
	t.Helper()
	build(t)
	return relaytest.Start(t, bin, args, relaytest.Options{Name: name, Dir: root, TailBytes: 3000})
}

// relayArgs are the flags of a relay for database url and topic prefix.
func relayArgs(url, s, topicPrefix, dlq string) []string {
	return relayArgsOn(broker.Addr(), url, s, topicPrefix, dlq)
}

// relayArgsOn is relayArgs for another Kafka.
func relayArgsOn(brokers, url, s, topicPrefix, dlq string) []string {
	port, _ := freeport.Get()
	return []string{"run", "--pg-url", url, "--slot", "slot_" + s, "--publication", "pub_" + s, "--table", "public.outbox",
		"--kafka-brokers", brokers, "--topic-template", topicPrefix + ".{aggregate_type}",
		"--schema-registry-url", registry.URL(), "--schemas-dir", filepath.Join(root, "testdata", "schemas"),
		"--dlq-topic", dlq, "--metrics-addr", "127.0.0.1:" + strconv.Itoa(port), "--halt-linger", "0s"}
}

// startRelay starts the relay binary with argv (relayArgs) and waits until
// it streams from its slot, slot_<s>. An active slot is not enough: a slot
// being created is active while it waits for the transactions running in
// the cluster (other tests') to end, and rows committed before it is
// consistent are never decoded. Those rows went missing when tests ran
// beside this one.
func startRelay(t testing.TB, url, s string, argv []string) *proc {
	t.Helper()
	p := start(t, "relay", relayBin, argv...)
	waitFor(t, 60*time.Second, "the relay streaming from its slot", func() bool {
		if !strings.Contains(p.Output(), "msg=streaming") {
			return false
		}
		n, _ := queryInt(url, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1 AND active", "slot_"+s)
		return n == 1
	})
	return p
}
