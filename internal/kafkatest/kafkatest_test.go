package kafkatest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/internal/tcpproxy"
	"github.com/cdc-relay/cdc-relay/internal/testtier"
)

func TestVersionMatchesPom(t *testing.T) {
	pom, err := os.ReadFile("../../scripts/kafka/pom.xml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`<kafka.version>([^<]+)</kafka.version>`).FindSubmatch(pom)
	if m == nil {
		t.Fatal("no <kafka.version> in scripts/kafka/pom.xml")
	}
	if got := string(m[1]); got != Version {
		t.Fatalf("pom.xml has Kafka %s, kafkatest.Version is %s", got, Version)
	}
}

func TestProperties(t *testing.T) {
	got := properties(Options{
		MessageMaxBytes: 2 << 20,
		AdvertisedHost:  "127.0.0.1:1111",
		ExtraConfig:     map[string]string{"num.partitions": "3"},
	}, "/k", "/d", listenerPorts{plain: 9092, controller: 9093})
	for _, want := range []string{
		"listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093\n",
		"advertised.listeners=PLAINTEXT://127.0.0.1:1111,CONTROLLER://127.0.0.1:9093\n",
		"controller.quorum.bootstrap.servers=127.0.0.1:9093\n",
		"message.max.bytes=2097152\n",
		"num.partitions=3\n",
		"log.dirs=/d\n",
		"offsets.topic.replication.factor=1\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("server.properties lacks %q:\n%s", want, got)
		}
	}
}

// TestBrokerLifecycle produces a record, stops and restarts the broker, and
// reads the record back, then checks that Close removes the temp dir.
func TestBrokerLifecycle(t *testing.T) {
	testtier.Need(t)
	began := time.Now()
	b, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("broker ready on %s in %s", b.Addr(), time.Since(began).Round(time.Millisecond))
	t.Cleanup(func() { closeBroker(t, b) })

	topic := randomTopic(t)
	produce(t, b.Addr(), topic, "k1", "v1")
	if got := consumeFirst(t, b.Addr(), topic); got != "k1=v1" {
		t.Fatalf("before restart: got %q, want k1=v1", got)
	}
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := probe(b.Addr()); err == nil {
		t.Fatal("broker still answers after Stop")
	}
	began = time.Now()
	if err := b.Restart(); err != nil {
		t.Fatal(err)
	}
	t.Logf("broker restarted in %s", time.Since(began).Round(time.Millisecond))
	if got := consumeFirst(t, b.Addr(), topic); got != "k1=v1" {
		t.Fatalf("after restart: got %q, want k1=v1", got)
	}

	dir := b.Dir()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("Close left %s behind (stat: %v)", dir, err)
	}
}

// TestBrokerMapsClassArchive: a test's broker maps its classes from the
// archive make setup wrote; -Xshare:on makes the JVM refuse to start when
// it cannot (another JVM build, another class path).
func TestBrokerMapsClassArchive(t *testing.T) {
	testtier.Need(t)
	libs, err := libsDir()
	if err != nil {
		t.Fatal(err)
	}
	flags := archiveFlags(libs)
	if len(flags) == 0 {
		path, err := archivePath(libs)
		t.Fatalf("no class archive for this JVM (%s, %v): run make setup, which writes it", path, err)
	}
	b, err := Start(Options{JVMOptions: []string{"-Xshare:on"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeBroker(t, b) })
	out, err := os.ReadFile("/proc/" + strconv.Itoa(b.proc.cmd.Process.Pid) + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), flags[0]) {
		t.Fatalf("the broker runs without %s: %q", flags[0], out)
	}
	topic := randomTopic(t)
	produce(t, b.Addr(), topic, "k1", "v1")
	if got := consumeFirst(t, b.Addr(), topic); got != "k1=v1" {
		t.Fatalf("got %q, want k1=v1", got)
	}
}

// TestAdvertisedHost routes clients through a TCP proxy that the broker
// advertises, as outage tests do.
func TestAdvertisedHost(t *testing.T) {
	testtier.Need(t)
	p, err := tcpproxy.New("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	b, err := Start(Options{AdvertisedHost: p.Addr(), ExtraConfig: map[string]string{"num.partitions": "2"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeBroker(t, b) })
	p.SetTarget(b.Addr())

	topic := randomTopic(t)
	produce(t, p.Addr(), topic, "k", "v")
	if got := consumeFirst(t, p.Addr(), topic); got != "k=v" {
		t.Fatalf("got %q, want k=v", got)
	}
	if p.Accepted() == 0 {
		t.Fatal("no client connection went through the proxy")
	}
}

func closeBroker(t *testing.T, b *Broker) {
	t.Helper()
	if t.Failed() {
		t.Logf("tail of %s:\n%s", b.LogPath(), tail(b.LogPath(), 60))
	}
	if err := b.Close(); err != nil {
		t.Error(err)
	}
}

func randomTopic(t *testing.T) string {
	t.Helper()
	var r [4]byte
	if _, err := rand.Read(r[:]); err != nil {
		t.Fatal(err)
	}
	return "kafkatest-" + hex.EncodeToString(r[:])
}

// produce writes one record with franz-go, letting the broker create the
// topic (the client retries while the topic is being created); opts add
// client options such as SASL or TLS.
func produce(t *testing.T, addr, topic, key, value string, opts ...kgo.Opt) {
	t.Helper()
	if err := tryProduce(addr, topic, key, value, 30*time.Second, opts...); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
}

// tryProduce writes one record with franz-go and returns the error.
func tryProduce(addr, topic, key, value string, timeout time.Duration, opts ...kgo.Opt) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation(),
		// A fresh broker on a loaded machine may take a while to create the
		// topic: retry until the timeout, not 4 times.
		kgo.UnknownTopicRetries(-1)}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	rec := &kgo.Record{Topic: topic, Key: []byte(key), Value: []byte(value)}
	return cl.ProduceSync(ctx, rec).FirstErr()
}

// consumeFirst reads the first record of topic with franz-go, as
// "key=value"; opts add client options such as SASL or TLS.
func consumeFirst(t *testing.T, addr, topic string, opts ...kgo.Opt) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consume from %s: %v", topic, err)
		}
		for _, fe := range fetches.Errors() {
			t.Logf("fetch %s/%d: %v", fe.Topic, fe.Partition, fe.Err)
		}
		if recs := fetches.Records(); len(recs) > 0 {
			return string(recs[0].Key) + "=" + string(recs[0].Value)
		}
	}
}
