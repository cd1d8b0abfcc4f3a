package main

// cdc-relay tail against the real services: what it prints of the rows,
// logical messages and dead letters the relay wrote is checked against the
// harness's franz-go consumer, and Avro values against goavro decoding
// with the writer schema srclient fetched from the registry.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/cdc-relay/cdc-relay/internal/kafkatest"
	"github.com/cdc-relay/cdc-relay/internal/testca"
	"github.com/cdc-relay/cdc-relay/internal/testtier"
)

// tailLine is one line tail printed.
type tailLine struct {
	Topic     string          `json:"topic"`
	Partition int32           `json:"partition"`
	Offset    int64           `json:"offset"`
	Timestamp string          `json:"timestamp"`
	Key       any             `json:"key"`
	Headers   map[string]any  `json:"headers"`
	Value     json.RawMessage `json:"value"`
	SchemaID  *int            `json:"schema_id"`
	Subject   *string         `json:"subject"`
}

// runTailCmd runs `cdc-relay tail args...` to its end.
func runTailCmd(t *testing.T, args ...string) (lines []tailLine, stderr string, code int) {
	t.Helper()
	return runTailCmdEnv(t, nil, args...)
}

// runTailCmdEnv is runTailCmd with env added to the test's environment.
func runTailCmdEnv(t *testing.T, env []string, args ...string) (lines []tailLine, stderr string, code int) {
	t.Helper()
	buildRelay(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, relayBin, append([]string{"tail"}, args...)...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("tail %q did not end: stderr %s", args, errb.String())
	}
	code = cmd.ProcessState.ExitCode()
	if err != nil && code < 0 {
		t.Fatalf("tail %q: %v", args, err)
	}
	return parseTailLines(t, out.Bytes()), errb.String(), code
}

func parseTailLines(t *testing.T, out []byte) []tailLine {
	t.Helper()
	var lines []tailLine
	for _, l := range bytes.Split(bytes.TrimSuffix(out, []byte("\n")), []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		var tl tailLine
		if err := json.Unmarshal(l, &tl); err != nil {
			t.Fatalf("tail printed a line that is not JSON: %q: %v", l, err)
		}
		lines = append(lines, tl)
	}
	return lines
}

// tailProc is a tail running in the background.
type tailProc struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	lines  []tailLine
	stderr bytes.Buffer
	done   chan struct{}
}

func startTail(t *testing.T, args ...string) *tailProc {
	t.Helper()
	buildRelay(t)
	p := &tailProc{cmd: exec.Command(relayBin, append([]string{"tail"}, args...)...), done: make(chan struct{})}
	p.cmd.Stderr = &lockedWriter{mu: &p.mu, w: &p.stderr}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			var tl tailLine
			if err := json.Unmarshal(sc.Bytes(), &tl); err != nil {
				tl.Topic = "NOT JSON: " + sc.Text()
			}
			p.mu.Lock()
			p.lines = append(p.lines, tl)
			p.mu.Unlock()
		}
		p.cmd.Wait()
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

func (p *tailProc) snapshot() ([]tailLine, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]tailLine(nil), p.lines...), p.stderr.String()
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// plainNative turns goavro's native form of a value into what its plain
// JSON decodes to: unions unwrapped ({"string": x} → x), timestamps RFC
// 3339, numbers float64. The schemas here have no Avro maps, so a
// one-key map is always a union.
func plainNative(v any) any {
	switch v := v.(type) {
	case map[string]any:
		if len(v) == 1 {
			for k, x := range v {
				if k == "string" || k == "long" || k == "int" || strings.Contains(k, ".") {
					return plainNative(x)
				}
			}
		}
		out := map[string]any{}
		for k, x := range v {
			out[k] = plainNative(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = plainNative(x)
		}
		return out
	case time.Time:
		return v.UTC().Format(time.RFC3339Nano)
	case int32:
		return float64(v)
	case int64:
		return float64(v)
	case float32:
		return float64(v)
	}
	return v
}

// TestTailDecodesRelayOutput: tail with no TOPIC reads the template's
// topics and the DLQ; every record the consumer saw is printed once, with
// its key, headers and timestamp, Avro values (rows and logical messages)
// decoded as goavro decodes them, with their schema id and subject, and the
// dead letter's raw JSON payload embedded.
func TestTailDecodesRelayOutput(t *testing.T) {
	t.Parallel()
	applyOutboxSQL(t)
	f := newFixture(t, "")
	prefix := "outbox_" + f.name
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	r := startRelay(t, f.args("--message-prefix", prefix))
	r.waitStreaming(60 * time.Second)
	ctx := context.Background()
	conn := connect(t)
	agg := uuidFor(901)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	insert := fmt.Sprintf(`INSERT INTO %s (aggregate_type, aggregate_id, event_type, payload, headers) VALUES ($1, $2, $3, $4::jsonb, $5::jsonb)`, f.table)
	rows := []struct{ aggType, eventType, payload, headers string }{
		{"Order", "OrderCreated", orderCreated(agg, 1), `{"traceparent": "00-tail-01"}`},
		{"Order", "OrderCreated", strings.Replace(orderCreated(agg, 2), `"currency": "EUR"`, `"currency": "EUR", "coupon_code": "SAVE10"`, 1), `{}`},
		{"Order", "OrderCancelled", orderCancelled(agg, 3), `{}`},
		{"Invoice", "OrderCreated", orderCreated(agg, 4), `{}`},
		{"Order", "ShipmentLost", `{"lost": true, "where": "Ωmega"}`, `{"traceparent": "00-tail-dlq"}`}, // no schema: a dead letter
	}
	for _, row := range rows {
		if _, err := tx.Exec(ctx, insert, row.aggType, agg, row.eventType, row.payload, row.headers); err != nil {
			t.Fatal(err)
		}
	}
	emit(t, ctx, tx, prefix, "Order", agg, "OrderCreated", orderCreated(agg, 5), nil)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var recs []record
	waitFor(t, 60*time.Second, "6 records in Kafka", func() bool { recs = c.records(); return len(recs) >= 6 })

	lines, stderr, code := runTailCmd(t, "--from-beginning", "--kafka-brokers", broker.Addr(), "--schema-registry-url", registry.URL(),
		"--topic-template", f.topicPrefix+".{aggregate_type}", "--dlq-topic", f.dlq)
	if code != exitOK {
		t.Fatalf("tail: exit %d, stderr %s", code, stderr)
	}
	if len(lines) != len(recs) {
		t.Fatalf("tail printed %d records, the consumer saw %d:\n%v\nstderr %s", len(lines), len(recs), lines, stderr)
	}
	type pos struct {
		topic     string
		partition int32
		offset    int64
	}
	byPos := map[pos]tailLine{}
	for _, l := range lines {
		byPos[pos{l.Topic, l.Partition, l.Offset}] = l
	}
	dec := newAvroDecoder()
	var decoded, dead int
	for _, rec := range recs {
		l, ok := byPos[pos{rec.Topic, rec.Partition, rec.Offset}]
		if !ok {
			t.Errorf("tail did not print %s/%d@%d", rec.Topic, rec.Partition, rec.Offset)
			continue
		}
		if l.Key != rec.Key {
			t.Errorf("%s@%d: key %#v, want %q", rec.Topic, rec.Offset, l.Key, rec.Key)
		}
		if want := rec.Timestamp.UTC().Format("2006-01-02T15:04:05.000Z07:00"); l.Timestamp != want {
			t.Errorf("%s@%d: timestamp %s, want %s", rec.Topic, rec.Offset, l.Timestamp, want)
		}
		if len(l.Headers) != len(rec.Headers) {
			t.Errorf("%s@%d: headers %v, want %v", rec.Topic, rec.Offset, l.Headers, rec.Headers)
		}
		for k, v := range rec.Headers {
			if l.Headers[k] != v {
				t.Errorf("%s@%d: header %s = %#v, want %q", rec.Topic, rec.Offset, k, l.Headers[k], v)
			}
		}
		var got any
		if err := json.Unmarshal(l.Value, &got); err != nil {
			t.Fatal(err)
		}
		if rec.Topic == f.dlq {
			dead++
			var want any
			json.Unmarshal(rec.Value, &want)
			if !reflect.DeepEqual(got, want) || l.SchemaID != nil || l.Subject != nil {
				t.Errorf("dead letter: value %s, schema_id %v, subject %v; want the raw payload %s and nulls", l.Value, l.SchemaID, l.Subject, rec.Value)
			}
			if l.Headers["error_kind"] != "no_schema" || l.Headers["traceparent"] != "00-tail-dlq" {
				t.Errorf("dead letter headers %v", l.Headers)
			}
			continue
		}
		native, id, err := dec.decode(rec.Value)
		if err != nil {
			t.Fatalf("%s@%d: goavro: %v", rec.Topic, rec.Offset, err)
		}
		if want := plainNative(native); !reflect.DeepEqual(got, want) {
			t.Errorf("%s@%d: tail decoded\n%s\ngoavro decoded %#v", rec.Topic, rec.Offset, l.Value, want)
		}
		if l.SchemaID == nil || *l.SchemaID != int(id) || id != binary.BigEndian.Uint32(rec.Value[1:5]) {
			t.Errorf("%s@%d: schema_id %v, want %d", rec.Topic, rec.Offset, l.SchemaID, id)
		}
		eventType := rec.Headers["event_type"]
		if want := rec.Topic + "-com.example.orders." + eventType; l.Subject == nil || *l.Subject != want {
			t.Errorf("%s@%d: subject %v, want %s", rec.Topic, rec.Offset, l.Subject, want)
		}
		decoded++
	}
	if decoded != 5 || dead != 1 {
		t.Errorf("%d Avro values and %d dead letters, want 5 and 1", decoded, dead)
	}
	// The coupon's union is plain JSON, the message's payload too.
	var sawCoupon, sawMessage bool
	for _, l := range lines {
		sawCoupon = sawCoupon || strings.Contains(string(l.Value), `"coupon_code":"SAVE10"`)
		sawMessage = sawMessage || strings.Contains(string(l.Value), `"customer_id":"c-5"`)
	}
	if !sawCoupon || !sawMessage {
		t.Errorf("coupon %v, message %v in %v", sawCoupon, sawMessage, lines)
	}
}

// TestTailPositions: JSON values and keys (--value-format json, --key-format
// json) read from a named topic; --count, --offset, --since and
// --from-beginning stop where they should without --follow; --follow
// prints what arrives, in new topics too, and --count ends it; a bad flag
// is exit 2.
func TestTailPositions(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	args := []string{"run", "--pg-url", dbURL, "--slot", f.slot, "--publication", f.publication, "--table", "public." + f.table,
		"--kafka-brokers", broker.Addr(), "--topic-template", f.topicPrefix + ".{aggregate_type}", "--dlq-topic", f.dlq,
		"--key-format", "json", "--value-format", "json"}
	r := startRelay(t, args)
	r.waitStreaming(60 * time.Second)
	ctx := context.Background()
	conn := f.connect()
	agg := uuidFor(902)
	ev := func(n int) event {
		return event{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, n)}
	}
	first, err := f.insertTx(ctx, conn, []event{ev(1), ev(2), ev(3)})
	if err != nil {
		t.Fatal(err)
	}
	recsA := c.waitIDs(60*time.Second, first)
	second, err := f.insertTx(ctx, conn, []event{ev(4), ev(5)})
	if err != nil {
		t.Fatal(err)
	}
	recs := c.waitIDs(60*time.Second, append(first, second...))
	if len(recs) != 5 || len(recsA) != 3 {
		t.Fatalf("consumer saw %d records, want 5", len(recs))
	}
	topic := f.topic("Order")
	part := recs[0].Partition
	for _, rec := range recs {
		if rec.Partition != part || rec.Topic != topic {
			t.Fatalf("records of one aggregate in %s/%d and %s/%d", rec.Topic, rec.Partition, topic, part)
		}
	}
	base := []string{"--kafka-brokers", broker.Addr(), "--key-format", "json", topic}
	offsets := func(lines []tailLine) string {
		var s []string
		for _, l := range lines {
			s = append(s, strconv.FormatInt(l.Offset, 10))
		}
		return strings.Join(s, ",")
	}
	all, stderr, code := runTailCmd(t, append(base, "--from-beginning")...)
	if code != exitOK || offsets(all) != "0,1,2,3,4" {
		t.Fatalf("--from-beginning: exit %d, offsets %s, stderr %s", code, offsets(all), stderr)
	}
	for i, l := range all {
		var got, want any
		json.Unmarshal(l.Value, &got)
		json.Unmarshal(recs[i].Value, &want)
		if !reflect.DeepEqual(got, want) || l.SchemaID != nil || l.Key != agg {
			t.Errorf("offset %d: key %#v value %s schema_id %v; want key %q (the JSON string decoded), value %s, no schema", l.Offset, l.Key, l.Value, l.SchemaID, agg, recs[i].Value)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--from-beginning", "--count", "2"}, "0,1"},
		{[]string{"--offset", fmt.Sprintf("%d:3", part)}, "3,4"},
		{[]string{"--offset", fmt.Sprintf("%d:99", part)}, ""},
		{[]string{"--since", recs[3].Timestamp.UTC().Format(time.RFC3339Nano)}, "3,4"},
		{[]string{"--since", "10m", "--count", "1"}, "0"},
		{[]string{"--since", time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}, ""},
	} {
		lines, stderr, code := runTailCmd(t, append(append([]string{}, base...), tc.args...)...)
		if code != exitOK || offsets(lines) != tc.want {
			t.Errorf("%v: exit %d, offsets %q, want %q; stderr %s", tc.args, code, offsets(lines), tc.want, stderr)
		}
	}
	if _, stderr, code := runTailCmd(t, append(base, "--offset", "nope")...); code != exitConfig || !strings.Contains(stderr, "--offset:") {
		t.Errorf("--offset nope: exit %d, stderr %s", code, stderr)
	}
	if _, stderr, code := runTailCmd(t, "--kafka-brokers", broker.Addr(), f.topicPrefix+".Missing"); code != exitFailed || !strings.Contains(stderr, "does not exist") {
		t.Errorf("a missing topic: exit %d, stderr %s", code, stderr)
	}

	// --follow from the beginning: the five, then what arrives.
	p := startTail(t, append(base, "--from-beginning", "--follow")...)
	waitFor(t, 60*time.Second, "tail --follow prints the 5 records", func() bool { l, _ := p.snapshot(); return len(l) == 5 })
	third, err := f.insertTx(ctx, conn, []event{ev(6)})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "tail --follow prints the new record", func() bool {
		l, _ := p.snapshot()
		return len(l) == 6 && l[5].Headers["id"] == strconv.FormatInt(third[0], 10) && l[5].Offset == 5
	})
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatal("tail --follow did not stop on SIGTERM")
	}
	if code := p.cmd.ProcessState.ExitCode(); code != exitOK {
		t.Errorf("tail --follow after SIGTERM: exit %d", code)
	}

	// No start flag and no TOPIC: from the end of the template's topics,
	// following, a topic created meanwhile too; --count 2 ends it.
	q := startTail(t, "--kafka-brokers", broker.Addr(), "--key-format", "json", "--topic-template", f.topicPrefix+".{aggregate_type}", "--dlq-topic", f.dlq, "--count", "2")
	waitFor(t, 60*time.Second, "tail to start reading", func() bool { _, e := q.snapshot(); return strings.Contains(e, "msg=reading") })
	fresh := event{AggregateType: "Fresh", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, 7)}
	if _, err := f.insertTx(ctx, conn, []event{ev(8), fresh}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-q.done:
	case <-time.After(90 * time.Second):
		l, e := q.snapshot()
		t.Fatalf("tail --count 2 did not end: lines %v, stderr %s", l, e)
	}
	lines, e := q.snapshot()
	if code := q.cmd.ProcessState.ExitCode(); code != exitOK || len(lines) != 2 {
		t.Fatalf("default tail --count 2: exit %d, lines %v, stderr %s", code, lines, e)
	}
	topics := map[string]bool{}
	for _, l := range lines {
		topics[l.Topic] = true
	}
	if !topics[topic] || !topics[f.topic("Fresh")] {
		t.Errorf("default tail printed %v, want one record of %s (from its end: the 7th record only) and one of the new topic %s", lines, topic, f.topic("Fresh"))
	}
	for _, l := range lines {
		if l.Topic == topic && l.Offset != 6 {
			t.Errorf("from the end: printed offset %d of %s, want 6", l.Offset, topic)
		}
	}
}

// TestTailKafkaSecurity: tail reads with run's Kafka settings: SASL PLAIN
// and SCRAM (the password from CDC_RELAY_KAFKA_SASL_PASSWORD_FILE), SASL
// over TLS, and mutual TLS; a wrong password is exit 1 saying so, and the
// password never shows.
func TestTailKafkaSecurity(t *testing.T) {
	t.Parallel()
	testtier.Need(t)
	ca := testca.New(t)
	serverCert, serverKey := ca.Issue(t, "kafka", "127.0.0.1", "localhost")
	clientCert, clientKey := ca.Issue(t, "cdc-relay")
	password := "tail-pw-" + randSuffix()
	sb, err := kafkatest.Start(kafkatest.Options{
		SASLUsers: map[string]string{"relay": password},
		TLS:       &kafkatest.TLS{CertPEM: serverCert, KeyPEM: serverKey, CAPEM: ca.PEM, ClientAuth: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	dir := t.TempDir()
	caFile, certFile, keyFile, passwordFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem"), filepath.Join(dir, "password")
	for path, data := range map[string][]byte{caFile: ca.PEM, certFile: clientCert, keyFile: clientKey, passwordFile: []byte(password + "\n")} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	topic := "tail-secure-" + randSuffix()
	cl, err := kgo.NewClient(kgo.SeedBrokers(sb.SASLAddr()), kgo.SASL(scram.Auth{User: "relay", Pass: password}.AsSha512Mechanism()),
		kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("k-1"), Value: []byte(`{"secure": true}`)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	withTLS := []string{"--kafka-tls", "--kafka-tls-ca-file", caFile}
	for _, tc := range []struct {
		name  string
		addr  string
		flags []string
		fail  string
	}{
		{"PLAIN over SASL_PLAINTEXT", sb.SASLAddr(), []string{"--kafka-sasl-mechanism", "plain"}, ""},
		{"SCRAM-SHA-256 over SASL_SSL", sb.SASLSSLAddr(), append([]string{"--kafka-sasl-mechanism", "scram-sha-256"}, withTLS...), ""},
		{"mutual TLS over SSL", sb.SSLAddr(), append([]string{"--kafka-tls-cert-file", certFile, "--kafka-tls-key-file", keyFile}, withTLS...), ""},
		{"SCRAM-SHA-512 wrong password", sb.SASLAddr(), []string{"--kafka-sasl-mechanism", "scram-sha-512", "--kafka-sasl-password", "wrong-" + password}, "SASL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := []string{"CDC_RELAY_KAFKA_SASL_USERNAME=relay", "CDC_RELAY_KAFKA_SASL_PASSWORD_FILE=" + passwordFile}
			args := append([]string{"--kafka-brokers", tc.addr, "--from-beginning", topic}, tc.flags...)
			lines, stderr, code := runTailCmdEnv(t, env, args...)
			if strings.Contains(stderr, password) {
				t.Errorf("the SASL password shows in tail's output")
			}
			if tc.fail != "" {
				if code != exitFailed || !strings.Contains(stderr, tc.fail) {
					t.Errorf("exit %d, stderr %s; want 1 naming %s", code, stderr, tc.fail)
				}
				return
			}
			if code != exitOK || len(lines) != 1 || lines[0].Key != "k-1" || string(lines[0].Value) != `{"secure":true}` {
				t.Errorf("exit %d, lines %+v, stderr %s", code, lines, stderr)
			}
		})
	}
}
