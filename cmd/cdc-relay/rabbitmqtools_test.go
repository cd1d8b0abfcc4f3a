package main

// The operator tools with --rabbitmq-url, run as the built binary against
// the package's private RabbitMQ node: check, tail, the dlq verbs, the
// lost-slot contract (exit 3, slot recreate --accept-gap, replay) and
// amqps. What arrives is read by a plain amqp091-go consumer.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/cdc-relay/cdc-relay/internal/rabbittest"
	"github.com/cdc-relay/cdc-relay/internal/testca"
	"github.com/cdc-relay/cdc-relay/internal/testtier"
)

// runBin runs the built binary with args to its end (at most 3 minutes).
func runBin(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	buildRelay(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, relayBin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("cdc-relay %q did not end: stdout %s\nstderr %s", args, out.String(), errb.String())
	}
	code = cmd.ProcessState.ExitCode()
	if err != nil && code < 0 {
		t.Fatalf("cdc-relay %q: %v", args, err)
	}
	return code, out.String(), errb.String()
}

// bgBin is the binary running in the background, its output collected.
type bgBin struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	err  bytes.Buffer
	done chan struct{}
}

func startBin(t *testing.T, args ...string) *bgBin {
	t.Helper()
	buildRelay(t)
	p := &bgBin{cmd: exec.Command(relayBin, args...), done: make(chan struct{})}
	p.cmd.Stdout = &lockedWriter{mu: &p.mu, w: &p.out}
	p.cmd.Stderr = &lockedWriter{mu: &p.mu, w: &p.err}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.cmd.Process.Kill(); <-p.done })
	return p
}

func (p *bgBin) output() (stdout, stderr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String(), p.err.String()
}

// rabbitLines parses tail's JSON lines into maps, for the members only
// RabbitMQ's lines have.
func rabbitLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("tail printed a line that is not JSON: %q: %v", l, err)
		}
		lines = append(lines, m)
	}
	return lines
}

// toolArgs are the fixture's run settings for command cmd (check, replay,
// slot recreate, dlq redrive): rabbitArgs without "run".
func (f *fixture) toolArgs(n *rabbittest.Node, cmd []string, extra ...string) []string {
	return append(append([]string{}, cmd...), f.rabbitArgs(n, extra...)[1:]...)
}

// replaceFlag is a copy of args with flag set to value: in place when it
// is there, else appended (a flag given twice is exit 2).
func replaceFlag(args []string, flag, value string) []string {
	out := append([]string(nil), args...)
	if i := slices.Index(out, flag); i >= 0 && i+1 < len(out) {
		out[i+1] = value
		return out
	}
	return append(out, flag, value)
}

// TestRabbitMQCheck: check --rabbitmq-url passes against a node where the
// relay can work (exit 0), and FAILs (exit 1) when an exchange of another
// type has the relay's exchange's name, naming it.
func TestRabbitMQCheck(t *testing.T) {
	t.Parallel()
	n := needRabbit(t)
	f := newFixture(t, "")
	code, out, errs := runBin(t, f.toolArgs(n, []string{"check"}, "--metrics-addr", "127.0.0.1:0")...)
	if code != 0 || !strings.Contains(out, "all checks passed") {
		t.Fatalf("check = %d, want 0:\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{"ok    wal_level = logical", "RabbitMQ", f.exchange()} {
		if !strings.Contains(out, want) {
			t.Errorf("check output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Kafka:") {
		t.Errorf("check looked at Kafka with --rabbitmq-url:\n%s", out)
	}

	g := newFixture(t, "")
	if err := n.Channel(t).ExchangeDeclare(g.exchange(), amqp.ExchangeFanout, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	code, out, errs = runBin(t, g.toolArgs(n, []string{"check"}, "--metrics-addr", "127.0.0.1:0")...)
	if code != exitFailed {
		t.Fatalf("check with a fanout exchange = %d, want %d:\n%s\n%s", code, exitFailed, out, errs)
	}
	if !regexp.MustCompile(`(?m)^FAIL .*` + regexp.QuoteMeta(g.exchange())).MatchString(out) {
		t.Fatalf("no FAIL line names exchange %s:\n%s", g.exchange(), out)
	}
}

// TestRabbitMQTailExchange: tail follows the relay's exchange through a
// queue bound with --pattern and prints the events as JSON lines with
// exchange and routing_key; the event --pattern does not match is not
// printed. --from-beginning on an exchange is exit 2 with the reason.
func TestRabbitMQTailExchange(t *testing.T) {
	t.Parallel()
	f, n, got, _ := rabbitRelay(t, "#")
	tailArgs := []string{"tail", "--rabbitmq-url", n.URL(), "--rabbitmq-exchange", f.exchange()}

	code, _, errs := runBin(t, append(tailArgs, "--from-beginning")...)
	if code != exitConfig || !strings.Contains(errs, "--from-beginning") || !strings.Contains(errs, "is not a stream") {
		t.Fatalf("tail --from-beginning on an exchange = %d, want %d with the reason:\n%s", code, exitConfig, errs)
	}

	p := startBin(t, append(tailArgs, "--pattern", "OrderCreated", "--count", "1")...)
	waitFor(t, 30*time.Second, "tail following the exchange", func() bool { _, e := p.output(); return strings.Contains(e, "msg=following") })
	agg := uuidFor(1)
	ids, err := f.insertTx(context.Background(), f.connect(), []event{
		{AggregateType: "Order", AggregateID: agg, EventType: "OrderCancelled", Payload: orderCancelled(agg, 1)},
		{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, 2)},
	})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "both events in the bound queue", func() bool { return len(got()) >= 2 })
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		_, e := p.output()
		t.Fatalf("tail --count 1 did not end:\n%s", e)
	}
	out, errs := p.output()
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("tail exit %d:\n%s", code, errs)
	}
	lines := rabbitLines(t, out)
	if len(lines) != 1 {
		t.Fatalf("%d lines, want 1:\n%s", len(lines), out)
	}
	l := lines[0]
	want := map[string]any{"exchange": f.exchange(), "routing_key": "OrderCreated", "message_id": strconv.FormatInt(ids[1], 10), "type": "OrderCreated", "key": agg}
	for k, v := range want {
		if l[k] != v {
			t.Errorf("%s = %v, want %v (line %v)", k, l[k], v, l)
		}
	}
	if v, ok := l["value"].(map[string]any); !ok || len(v) == 0 {
		t.Errorf("value %v is not the payload as a JSON object", l["value"])
	}
}

// TestRabbitMQDeadLetterTools: an unroutable event is a dead letter in
// the stream; tail --from-beginning on the stream shows it; replay makes
// it a dead letter again and says so; dlq stats counts both by
// error_kind; dlq retire retires a third one, which stats counts retired
// and redrive passes over; dlq redrive fails the two (exit 1) while no
// queue is bound, then sends them once one is (exit 0), and they arrive
// there; stats then counts them redriven. The Kafka-only dlq settings are
// exit 2.
func TestRabbitMQDeadLetterTools(t *testing.T) {
	t.Parallel()
	f, n, _, r := rabbitRelay(t, "nothing.bound")
	stream := f.exchange() + ".dlq"
	agg := uuidFor(7)
	ids, err := f.insertTx(context.Background(), f.connect(), []event{{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, 7)}})
	if err != nil {
		t.Fatal(err)
	}
	id := strconv.FormatInt(ids[0], 10)
	r.waitMetric("cdc_relay_rabbitmq_unroutable_total", 60*time.Second, func(v float64) bool { return v == 1 })
	stored := collect(t, n, stream, true)
	// dlq lists the dead letters in the stream (readers' end markers left out).
	dlq := func() (letters []amqp.Delivery) {
		for _, d := range stored() {
			if _, ok := d.Headers["error_kind"]; ok {
				letters = append(letters, d)
			}
		}
		return letters
	}
	waitFor(t, 60*time.Second, "the dead letter in the stream", func() bool { return len(dlq()) >= 1 })

	code, out, errs := runBin(t, "tail", "--rabbitmq-url", n.URL(), "--from-beginning", stream)
	if code != 0 {
		t.Fatalf("tail --from-beginning %s = %d:\n%s", stream, code, errs)
	}
	lines := rabbitLines(t, out)
	if len(lines) != 1 {
		t.Fatalf("tail of the stream printed %d lines, want 1:\n%s", len(lines), out)
	}
	h, _ := lines[0]["headers"].(map[string]any)
	if lines[0]["message_id"] != id || lines[0]["stream"] != stream || h["error_kind"] != "unroutable" {
		t.Fatalf("the dead letter's line: %v", lines[0])
	}

	// replay publishes through run's sink: the event is unroutable again,
	// and printed as a dead letter, naming the dead-letter stream and
	// where the event was to go, not a topic.
	code, out, errs = runBin(t, f.toolArgs(n, []string{"replay", "--from-id", id, "--to-id", id})...)
	if code != 0 || !strings.Contains(out, "dead-lettered id="+id+" dlq_stream="+stream+" exchange="+f.exchange()+" routing_key=OrderCreated reason=") ||
		strings.Contains(out, "topic=") || !strings.Contains(out, "replayed 1 events (1 to the dead-letter stream)") {
		t.Fatalf("replay of the unroutable event = %d:\n%s\n%s", code, out, errs)
	}
	waitFor(t, 60*time.Second, "the replay's dead letter in the stream", func() bool { return len(dlq()) >= 2 })

	dlqArgs := []string{"--rabbitmq-url", n.URL(), "--rabbitmq-dlq-stream", stream}
	stats := func() dlqCounts { return rabbitDLQStats(t, n, stream) }
	if c := stats(); c.Pending != 2 || c.Kinds["unroutable"] != 2 || c.Topic != stream {
		t.Fatalf("dlq stats: %+v, want 2 pending unroutable letters in %s", c, stream)
	}

	// A letter retired is pending no more, and redrive passes over it.
	cancelled, err := f.insertTx(context.Background(), f.connect(), []event{{AggregateType: "Order", AggregateID: agg, EventType: "OrderCancelled", Payload: orderCancelled(agg, 8)}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the third dead letter in the stream", func() bool { return len(dlq()) >= 3 })
	code, out, errs = runBin(t, append([]string{"dlq", "retire", "--reason", "INC-7", "--event-type", "OrderCancelled"}, dlqArgs...)...)
	if code != 0 || !strings.Contains(out, "retired id="+strconv.FormatInt(cancelled[0], 10)+" ") || !strings.Contains(out, "retire: retired 1, already retired 0, left out by the filters 2") {
		t.Fatalf("dlq retire = %d:\n%s\n%s", code, out, errs)
	}
	if c := stats(); c.Pending != 2 || c.Retired != 1 {
		t.Fatalf("dlq stats after the retirement: %+v, want 2 pending, 1 retired", c)
	}
	for _, bad := range [][]string{{"--group", "g"}, {"--dlq-retired-topic", "r"}, {"--dlq-topic", "d"}} {
		if code, _, errs := runBin(t, append(append([]string{"dlq", "stats"}, dlqArgs...), bad...)...); code != exitConfig || !strings.Contains(errs, bad[0]+":") {
			t.Errorf("dlq stats %s with RabbitMQ = %d, want %d naming it:\n%s", bad[0], code, exitConfig, errs)
		}
	}

	redrive := f.toolArgs(n, []string{"dlq", "redrive"})
	code, out, errs = runBin(t, redrive...)
	if code != exitFailed || !strings.Contains(out, "still failing 2") {
		t.Fatalf("dlq redrive with no queue bound = %d, want %d:\n%s\n%s", code, exitFailed, out, errs)
	}
	got := collect(t, n, f.bindQueue(n.Channel(t), "OrderCreated"), false)
	code, out, errs = runBin(t, redrive...)
	if code != 0 || !strings.Contains(out, "redrive: redriven 2, still failing 0") {
		t.Fatalf("dlq redrive = %d, want 0:\n%s\n%s", code, out, errs)
	}
	waitFor(t, 60*time.Second, "the redriven event", func() bool { return len(got()) >= 1 })
	if d := got()[0]; d.MessageId != id || d.RoutingKey != "OrderCreated" || d.Exchange != f.exchange() {
		t.Fatalf("redriven message %s via %s/%s, want %s via %s/OrderCreated", d.MessageId, d.Exchange, d.RoutingKey, id, f.exchange())
	}
	if _, ok := got()[0].Headers["error_kind"]; ok {
		t.Fatalf("the redriven message keeps the dead-letter headers: %v", got()[0].Headers)
	}
	if c := stats(); c.Pending != 0 || c.Redriven != 2 || c.Retired != 1 {
		t.Fatalf("dlq stats after the redrive: %+v, want 0 pending, 2 redriven, 1 retired", c)
	}
}

// rabbitDLQStats runs dlq stats --json on the dead-letter stream.
func rabbitDLQStats(t *testing.T, n *rabbittest.Node, stream string) dlqCounts {
	t.Helper()
	code, out, errs := runBin(t, "dlq", "stats", "--json", "--rabbitmq-url", n.URL(), "--rabbitmq-dlq-stream", stream)
	if code != 0 {
		t.Fatalf("dlq stats = %d:\n%s\n%s", code, out, errs)
	}
	var c dlqCounts
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatalf("dlq stats --json: %v:\n%s", err, out)
	}
	return c
}

// dlqCounts is what dlq stats --json prints, as the test reads it.
type dlqCounts struct {
	Topic    string         `json:"topic"`
	Pending  int            `json:"pending"`
	Redriven int            `json:"redriven"`
	Retired  int            `json:"retired"`
	Kinds    map[string]int `json:"error_kinds"`
}

// TestRabbitMQSlotDroppedWhileStopped: the lost-slot contract over
// RabbitMQ, as TestSlotDroppedWhileStopped over Kafka: a slot dropped
// while the relay is stopped, then two rows; check FAILs, run exits 3 and
// creates nothing, and status says so from the checkpoint streams; slot
// recreate needs --accept-gap (exit 2), then records
// the gap in the checkpoint streams; run streams again, and the replay
// slot recreate gives brings the two rows to the queue.
func TestRabbitMQSlotDroppedWhileStopped(t *testing.T) {
	t.Parallel()
	f, n, got, r := rabbitRelay(t, "#", "--halt-linger", "0s")
	conn := f.connect()
	ctx := context.Background()
	ids := func() map[string]bool {
		seen := map[string]bool{}
		for _, d := range got() {
			seen[d.MessageId] = true
		}
		return seen
	}
	// order inserts the OrderCreated event of aggregate i in a transaction
	// of its own and returns its id.
	order := func(i int) int64 {
		t.Helper()
		agg := uuidFor(i)
		ids, err := f.insertTx(ctx, conn, []event{{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, i)}})
		if err != nil {
			t.Fatal(err)
		}
		return ids[0]
	}
	first := []int64{order(1)}
	waitFor(t, 60*time.Second, "the first row", func() bool { return ids()[fmt.Sprint(first[0])] })
	f.waitSlotPast(currentLSN(t, conn), 30*time.Second)
	if code := r.terminate(); code != 0 {
		t.Fatalf("exit code %d", code)
	}

	f.exec("SELECT pg_drop_replication_slot($1)", f.slot)
	missed := []int64{order(2), order(3)}

	code, out, _ := runBin(t, f.toolArgs(n, []string{"check"}, "--metrics-addr", "127.0.0.1:0")...)
	if code != exitFailed || !strings.Contains(out, "FAIL  replication slot \""+f.slot+"\" does not exist") || !strings.Contains(out, "slot recreate --accept-gap") {
		t.Fatalf("check = %d, want a FAIL for the dropped slot:\n%s", code, out)
	}
	namesRabbitMQ(t, "check's FAIL for the dropped slot", linesWith(out, "slot recreate --accept-gap"))
	code, out, errs := runBin(t, "status", "--pg-url", f.pg.url, "--slot", f.slot, "--rabbitmq-url", n.URL(), "--rabbitmq-checkpoint-stream", f.exchange()+".checkpoints")
	if code != exitFailed || !strings.Contains(errs, "cdc-relay run exits 3") || !strings.Contains(errs, "slot recreate --accept-gap") {
		t.Fatalf("status = %d, want %d saying run exits 3, from the checkpoint streams:\n%s\n%s", code, exitFailed, out, errs)
	}
	namesRabbitMQ(t, "status on the dropped slot", errs)
	args := f.rabbitArgs(n, "--halt-linger", "0s")
	r2 := startRelay(t, args)
	if code := r2.wait(90 * time.Second); code != exitGap {
		t.Fatalf("exit code %d, want %d:\n%s", code, exitGap, tailString(r2.Output(), 3000))
	}
	for _, want := range []string{"level=ERROR", `"` + f.slot + `"`, "slot recreate --accept-gap", "replay --since"} {
		if !strings.Contains(r2.Output(), want) {
			t.Fatalf("the exit message lacks %q:\n%s", want, tailString(r2.Output(), 3000))
		}
	}
	namesRabbitMQ(t, "the exit-3 message", linesWith(r2.Output(), "slot recreate --accept-gap"))
	if slotExists(t, conn, f.slot) {
		t.Fatal("the relay created a slot after the gap")
	}

	if code, _, errs := runBin(t, f.toolArgs(n, []string{"slot", "recreate"})...); code != exitConfig || !strings.Contains(errs, "--accept-gap is required") {
		t.Fatalf("slot recreate without --accept-gap = %d, want %d:\n%s", code, exitConfig, errs)
	} else {
		namesRabbitMQ(t, "slot recreate without --accept-gap", errs)
	}
	code, out, errs = runBin(t, f.toolArgs(n, []string{"slot", "recreate", "--accept-gap", "--reason", "INC-42"})...)
	if code != 0 || !strings.Contains(out, "created slot "+f.slot) || !strings.Contains(out, "gap recorded in stream "+f.exchange()+".checkpoints.gaps") {
		t.Fatalf("slot recreate = %d:\n%s\n%s", code, out, errs)
	}
	if !slotExists(t, conn, f.slot) {
		t.Fatal("slot recreate created no slot")
	}

	r3 := startRelay(t, args)
	r3.waitStreaming(60 * time.Second)
	after := order(4)
	waitFor(t, 60*time.Second, "the row after the new slot", func() bool { return ids()[fmt.Sprint(after)] })
	if code := r3.terminate(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	for _, id := range missed {
		if ids()[fmt.Sprint(id)] {
			t.Fatalf("row %d of the gap arrived without a replay: the test does not reproduce the gap", id)
		}
	}

	m := regexp.MustCompile(`cdc-relay replay --since (\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("slot recreate does not say which replay to run:\n%s", out)
	}
	code, out, errs = runBin(t, f.toolArgs(n, []string{"replay", "--since", m[1]})...)
	if code != 0 || !strings.Contains(out, "replayed ") {
		t.Fatalf("replay --since %s = %d:\n%s\n%s", m[1], code, out, errs)
	}
	// Each event's line names the exchange and its routing key, never a topic.
	for _, id := range missed {
		if !strings.Contains(out, fmt.Sprintf("published id=%d exchange=%s routing_key=", id, f.exchange())) || strings.Contains(out, "topic=") {
			t.Fatalf("replay does not print row %d's exchange and routing key (or prints a topic):\n%s", id, out)
		}
	}
	waitFor(t, 60*time.Second, "the rows of the gap, replayed", func() bool {
		seen := ids()
		for _, id := range missed {
			if !seen[fmt.Sprint(id)] {
				return false
			}
		}
		return true
	})
}

// TestRabbitMQAMQPS: over amqps with --rabbitmq-tls-ca-file the relay
// publishes, and check and tail of the dead-letter stream pass; without
// the CA the broker's certificate is not trusted (check exit 1); a TLS
// setting with an amqp:// URL is exit 2.
func TestRabbitMQAMQPS(t *testing.T) {
	t.Parallel()
	testtier.Need(t)
	ca := testca.New(t)
	files := rabbittest.TLSFilesOf(t, ca)
	n := rabbittest.Own(t, rabbittest.Options{TLS: files})
	f := newFixture(t, "")
	got := collect(t, n, f.bindQueue(n.Channel(t), "#"), false)
	amqps := func(args []string) []string {
		return replaceFlag(replaceFlag(args, "--rabbitmq-url", n.AMQPSURL()), "--rabbitmq-tls-ca-file", files.CA)
	}
	check := f.toolArgs(n, []string{"check"}, "--metrics-addr", "127.0.0.1:0")
	code, out, errs := runBin(t, amqps(check)...)
	if code != 0 || !strings.Contains(out, "all checks passed") {
		t.Fatalf("check over amqps = %d:\n%s\n%s", code, out, errs)
	}
	code, out, _ = runBin(t, replaceFlag(check, "--rabbitmq-url", n.AMQPSURL())...)
	if code != exitFailed || !strings.Contains(out, "FAIL") || !strings.Contains(out, "certificate") {
		t.Fatalf("check over amqps without the CA = %d, want %d naming the certificate:\n%s", code, exitFailed, out)
	}
	if code, _, errs := runBin(t, f.toolArgs(n, []string{"check"}, "--rabbitmq-tls-ca-file", files.CA)...); code != exitConfig || !strings.Contains(errs, "--rabbitmq-tls-ca-file: is set but --rabbitmq-url is not amqps://") {
		t.Fatalf("a CA file with amqp:// = %d, want %d:\n%s", code, exitConfig, errs)
	}

	r := startRelay(t, amqps(f.rabbitArgs(n)))
	r.waitStreaming(60 * time.Second)
	ids, err := f.insertTx(context.Background(), f.connect(), []event{{AggregateType: "Order", AggregateID: "a", EventType: "OrderCreated", Payload: `{"n": 1}`}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the event published over amqps", func() bool { return len(got()) >= 1 })
	if d := got()[0]; d.MessageId != strconv.FormatInt(ids[0], 10) {
		t.Fatalf("message %s, want %d", d.MessageId, ids[0])
	}
	if !strings.Contains(r.Output(), "rabbitmq_url=amqps://") {
		t.Fatalf("the relay did not start on the amqps URL:\n%s", tailString(r.Output(), 3000))
	}
	code, _, errs = runBin(t, amqps([]string{"tail", "--from-beginning", "--follow=false", f.exchange() + ".dlq"})...)
	if code != 0 {
		t.Fatalf("tail of the dead-letter stream over amqps = %d:\n%s", code, errs)
	}
}

// TestRabbitMQToolSettings: every tool takes exactly one broker; a
// setting of the other broker is exit 2 naming it, as with run.
func TestRabbitMQToolSettings(t *testing.T) {
	amqpURL := "amqp://guest:secret@r:5672/"
	rab := []string{"--pg-url", "postgres://u@h/db", "--rabbitmq-url", amqpURL, "--value-format", "json"}
	tests := []struct {
		args []string
		want string
	}{
		{append([]string{"check", "--kafka-brokers", "k:9092"}, rab...), "--rabbitmq-url: is set and so is --kafka-brokers"},
		{append([]string{"replay", "--since", "1h", "--kafka-compression", "lz4"}, rab...), "--kafka-compression: is a Kafka setting"},
		{append([]string{"slot", "recreate", "--accept-gap", "--checkpoint-topic", "c"}, rab...), "--checkpoint-topic: is a Kafka setting"},
		{[]string{"tail"}, "--kafka-brokers: is required"},
		{[]string{"tail", "--kafka-brokers", "k:9092", "--rabbitmq-url", amqpURL}, "--rabbitmq-url: is set and so is --kafka-brokers"},
		{[]string{"tail", "--kafka-brokers", "k:9092", "--pattern", "#"}, "--pattern: binds tail's queue to a RabbitMQ exchange"},
		{[]string{"tail", "--kafka-brokers", "k:9092", "--rabbitmq-exchange", "x"}, "--rabbitmq-exchange: is a RabbitMQ setting"},
		{[]string{"tail", "--rabbitmq-url", amqpURL, "--topic-template", "x.{event_type}"}, "--topic-template: is a Kafka setting"},
		{[]string{"tail", "--rabbitmq-url", amqpURL, "--pattern", "#", "s"}, "--pattern: binds tail's queue to the exchange, and a STREAM argument"},
		{[]string{"tail", "--rabbitmq-url", amqpURL, "a", "b"}, "--stream: tail reads one stream"},
		{[]string{"tail", "--rabbitmq-url", amqpURL, "--offset", "0:1", "s"}, "--offset: \"0:1\" is not an offset in the stream"},
		{[]string{"tail", "--rabbitmq-url", amqpURL, "--rabbitmq-tls-ca-file", "/nonexistent"}, "--rabbitmq-tls-ca-file: is set but --rabbitmq-url is not amqps://"},
		{[]string{"tail", "--rabbitmq-url", "amqps://r/", "--rabbitmq-tls-ca-file", "/nonexistent"}, "--rabbitmq-tls-ca-file: stat /nonexistent"},
		{[]string{"tail", "--rabbitmq-url", "amqps://r/", "--rabbitmq-tls-cert-file", "/"}, "--rabbitmq-tls-cert-file: a client certificate needs both"},
		{[]string{"dlq", "stats", "--rabbitmq-url", amqpURL, "--group", "g"}, "--group: is a Kafka setting of the dlq tools"},
		{[]string{"dlq", "retire", "--reason", "x", "--rabbitmq-url", amqpURL, "--dlq-retired-topic", "r"}, "--dlq-retired-topic: is a Kafka setting of the dlq tools"},
		{[]string{"dlq", "stats", "--kafka-brokers", "k:9092", "--rabbitmq-dlq-stream", "s"}, "--rabbitmq-dlq-stream: is a RabbitMQ setting"},
		{append([]string{"dlq", "redrive", "--group", "g"}, rab...), "--group: is a Kafka setting of the dlq tools"},
		{[]string{"status", "--pg-url", "postgres://u@h/db", "--kafka-brokers", "k:9092", "--rabbitmq-url", amqpURL}, "--rabbitmq-url: is set and so is --kafka-brokers"},
		{[]string{"status", "--pg-url", "postgres://u@h/db", "--kafka-brokers", "k:9092", "--rabbitmq-checkpoint-stream", "c"}, "--rabbitmq-checkpoint-stream: is a RabbitMQ setting"},
		{[]string{"status", "--pg-url", "postgres://u@h/db", "--rabbitmq-url", amqpURL, "--checkpoint-topic", "c"}, "--checkpoint-topic: is a Kafka setting"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args[:min(2, len(tt.args))], " "), func(t *testing.T) {
			code, out := runCommand(tt.args)
			if code != exitConfig || !strings.Contains(out, "cdc-relay: "+tt.want) {
				t.Fatalf("%q = %d, want %d with %q:\n%s", tt.args, code, exitConfig, tt.want, out)
			}
			if strings.Contains(out, "secret") {
				t.Fatalf("the password is in the message: %s", out)
			}
		})
	}
}

// linesWith are the lines of out that contain sub, joined.
func linesWith(out, sub string) string {
	var got []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, sub) {
			got = append(got, l)
		}
	}
	return strings.Join(got, "\n")
}

// namesRabbitMQ fails unless text, an operator's message under RabbitMQ,
// says RabbitMQ and neither Kafka nor a checkpoint topic.
func namesRabbitMQ(t *testing.T, what, text string) {
	t.Helper()
	if !strings.Contains(text, "missing from RabbitMQ") || strings.Contains(text, "Kafka") || strings.Contains(text, "checkpoint topic") {
		t.Fatalf("%s does not say the events may be missing from RabbitMQ, or names Kafka or a checkpoint topic:\n%s", what, text)
	}
}
