package main

// docs/MIGRATING.md, "3. Avro values: what stays and what changes": Debezium's AvroConverter has
// registered its inferred value schema under <topic>-value; the relay's
// schema is the user's .avsc, whose record name differs.

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/relaytest"
)

// TestAvroSubjectAfterDebezium: with a Connect-inferred schema (another
// record name, the same fields) as the latest version of <topic>-value,
// schemas check --subject-strategy topic finds the user's schema
// incompatible (BACKWARD: the record name differs), and the relay under
// that strategy halts on the topic's first event, naming the subject, and
// exits 1 without confirming it.
// The two ways docs/MIGRATING.md gives then work, each checked by an
// independent decoder and the registry's REST API: the default
// topic_record strategy (a subject of its own, <topic>-value untouched),
// and --subject-strategy topic with the subject's compatibility set to
// NONE for the switch and back to BACKWARD after it, after which the relay
// starts on it again. Against each registry.
func TestAvroSubjectAfterDebezium(t *testing.T) { eachRegistry(t, testAvroSubjectAfterDebezium) }

func testAvroSubjectAfterDebezium(t *testing.T, reg relaytest.SchemaRegistry) {
	f := newFixtureFor(t, reg, "")
	topic := f.topic("Order")
	valueSubject := topic + "-value"
	b, err := os.ReadFile(filepath.Join(schemaDir, "OrderCreated.avsc"))
	if err != nil {
		t.Fatal(err)
	}
	// Debezium's Event Router names the expanded payload's Connect struct
	// "payload", and an Avro converter registers it under that name (seen
	// with Debezium 3.6.1 and Apicurio's converter, TestDebeziumApicurioParity).
	inferred := strings.Replace(strings.Replace(string(b), `"name": "OrderCreated"`, `"name": "payload"`, 1),
		`"namespace": "com.example.orders",`, ``, 1)
	if inferred == string(b) {
		t.Fatal("could not rename the record of OrderCreated.avsc")
	}
	debeziumID := reg.Register(t, valueSubject, inferred)
	defaultBackward(t, reg, valueSubject)
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	conn := connect(t)
	ctx := context.Background()
	insert := func(n int) int64 {
		t.Helper()
		agg := uuidFor(n)
		ids, err := f.insertTx(ctx, conn, []event{{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, n)}})
		if err != nil {
			t.Fatal(err)
		}
		return ids[0]
	}
	dec := f.avroDecoder()
	// arrived waits for id and returns its value's schema id, checking that
	// it decodes to the row's customer.
	arrived := func(id int64, n int) uint32 {
		t.Helper()
		for _, rec := range c.waitIDs(60*time.Second, []int64{id}) {
			if rec.Headers["id"] != strconv.FormatInt(id, 10) {
				continue
			}
			v, schemaID, err := dec.decode(rec.Value)
			if err != nil {
				t.Fatalf("decode id %d: %v", id, err)
			}
			if v["customer_id"] != "c-"+strconv.Itoa(n) {
				t.Errorf("id %d decodes to customer %v, want c-%d", id, v["customer_id"], n)
			}
			return schemaID
		}
		t.Fatalf("id %d not found", id)
		return 0
	}

	// schemas check finds it before any start.
	code, out := runCommand([]string{"schemas", "check", "--schema-registry-url", reg.URL(), "--schemas-dir", schemaDir,
		"--topic-template", f.topicPrefix + ".{aggregate_type}", "--subject-strategy", "topic", "--aggregate-types", "Order"})
	if want := "FAIL  " + valueSubject + ": OrderCreated (" + filepath.Join(schemaDir, "OrderCreated.avsc") + ") is incompatible under BACKWARD"; code != exitFailed || !strings.Contains(out, want) {
		t.Errorf("schemas check = %d, want %d and %q:\n%s", code, exitFailed, want, out)
	}

	// The failure: the relay registers under <topic>-value on the topic's
	// first event (its preflight cannot know which event type comes
	// first), and the registry refuses.
	r := startRelay(t, f.args("--subject-strategy", "topic"))
	r.waitStreaming(60 * time.Second)
	first := insert(1)
	if code := r.wait(120 * time.Second); code != exitFailed {
		t.Fatalf("relay with --subject-strategy topic exited %d, want %d:\n%s", code, exitFailed, tailString(r.Output(), 3000))
	}
	out = r.Output()
	// AxonOps, as Confluent, says "record name mismatch"; Apicurio gives no
	// verbose reason, and the relay adds its own.
	why := "record name mismatch"
	if reg.Name() == "apicurio" {
		why = "against the latest version (version 1), as a BACKWARD change: the local schema is named com.example.orders.OrderCreated, the latest version payload"
	}
	for _, want := range []string{"halted: schema registry subject " + strconv.Quote(valueSubject) + " rejects schema OrderCreated", "under BACKWARD", why} {
		if !strings.Contains(out, want) {
			t.Errorf("the relay's output lacks %s:\n%s", want, tailString(out, 3000))
		}
	}
	if v := reg.Versions(t, valueSubject); len(v) != 1 {
		t.Fatalf("%s has versions %v after the refusal, want Debezium's alone", valueSubject, v)
	}

	// Way 1: the default strategy, a subject of its own.
	r = startRelay(t, f.args())
	r.waitStreaming(60 * time.Second)
	recordSubject := topic + "-com.example.orders.OrderCreated"
	if got, want := arrived(first, 1), reg.LatestID(t, recordSubject); int(got) != want {
		t.Errorf("value framed with schema id %d, want %s's %d", got, recordSubject, want)
	}
	if got := reg.LatestID(t, valueSubject); got != debeziumID {
		t.Errorf("%s's latest id is %d, want Debezium's %d untouched", valueSubject, got, debeziumID)
	}
	if code := r.terminate(); code != 0 {
		t.Fatalf("relay exited %d", code)
	}

	// Way 2: keep <topic>-value, with NONE for the switch.
	reg.SetLevel(t, valueSubject, "NONE")
	r = startRelay(t, f.args("--subject-strategy", "topic"))
	r.waitStreaming(60 * time.Second)
	second := insert(2)
	if got, want := arrived(second, 2), reg.LatestID(t, valueSubject); int(got) != want || want == debeziumID {
		t.Errorf("value framed with schema id %d; %s's latest is %d (Debezium's %d)", got, valueSubject, want, debeziumID)
	}
	if code := r.terminate(); code != 0 {
		t.Fatalf("relay exited %d", code)
	}
	reg.SetLevel(t, valueSubject, "BACKWARD")
	var level struct {
		Level string `json:"compatibilityLevel"`
	}
	if reg.Do(t, http.MethodGet, "/config/"+valueSubject, nil, &level); level.Level != "BACKWARD" {
		t.Fatalf("%s's level is %q after setting BACKWARD", valueSubject, level.Level)
	}
	// From now on BACKWARD guards the user's schema under <topic>-value.
	r = startRelay(t, f.args("--subject-strategy", "topic"))
	r.waitStreaming(60 * time.Second)
	third := insert(3)
	arrived(third, 3)
	if v := reg.Versions(t, valueSubject); len(v) != 2 {
		t.Errorf("%s has versions %v, want Debezium's and the relay's", valueSubject, v)
	}
}
