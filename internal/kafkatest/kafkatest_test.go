package kafkatest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
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
	}, "/d", 9092, 9093)
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

// TestAdvertisedHost routes clients through a TCP proxy that the broker
// advertises, as outage tests do.
func TestAdvertisedHost(t *testing.T) {
	p := newProxy(t)
	b, err := Start(Options{AdvertisedHost: p.addr(), ExtraConfig: map[string]string{"num.partitions": "2"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeBroker(t, b) })
	p.setTarget(b.Addr())

	topic := randomTopic(t)
	produce(t, p.addr(), topic, "k", "v")
	if got := consumeFirst(t, p.addr(), topic); got != "k=v" {
		t.Fatalf("got %q, want k=v", got)
	}
	if p.conns() == 0 {
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
// topic (the client retries while the topic is being created).
func produce(t *testing.T, addr, topic, key, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rec := &kgo.Record{Topic: topic, Key: []byte(key), Value: []byte(value)}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
}

// consumeFirst reads the first record of topic with franz-go, as
// "key=value".
func consumeFirst(t *testing.T, addr, topic string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
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

// proxy forwards TCP connections to a target set after it starts listening.
type proxy struct {
	ln     net.Listener
	mu     sync.Mutex
	target string
	open   map[net.Conn]bool
	n      int
}

func newProxy(t *testing.T) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, open: map[net.Conn]bool{}}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for c := range p.open {
			c.Close()
		}
		p.mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); p.forward(c) }()
		}
	}()
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) setTarget(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = addr
}

func (p *proxy) conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

// track records c as open (or forgets it) so that cleanup can close it.
func (p *proxy) track(c net.Conn, open bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if open {
		p.open[c] = true
	} else {
		delete(p.open, c)
	}
}

// forward copies bytes both ways until either side closes.
func (p *proxy) forward(c net.Conn) {
	p.mu.Lock()
	target := p.target
	p.n++
	p.mu.Unlock()
	up, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		c.Close()
		return
	}
	for _, x := range []net.Conn{c, up} {
		p.track(x, true)
		defer func() { x.Close(); p.track(x, false) }()
	}
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, c); done <- struct{}{} }()
	go func() { io.Copy(c, up); done <- struct{}{} }()
	<-done
	c.Close()
	up.Close()
	<-done
}
