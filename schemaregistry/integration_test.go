package schemaregistry_test

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/linkedin/goavro/v2"

	"github.com/cdc-relay/cdc-relay/internal/relaytest"
	"github.com/cdc-relay/cdc-relay/schemaregistry"
)

// registry is the package's real schema registry (AxonOps), started by
// the first test that uses it (newRegistry and the REST helpers fail the
// test when it cannot start), so the encoder's unit tests start none. The
// registry-facing tests run against it and against Apicurio Registry
// (eachRegistry). Tests give every subject a random suffix.
var (
	services = relaytest.NewLazy(relaytest.LazyOptions{})
	registry = services.Registry
)

// eachRegistry runs test as a parallel subtest per registry the relay is
// tested against: "axonops" (registry) and "apicurio" (Apicurio Registry,
// started once for the package by its first subtest).
func eachRegistry(t *testing.T, test func(t *testing.T, reg relaytest.SchemaRegistry)) {
	t.Helper()
	relaytest.EachRegistry(t, services.Registries(), test)
}

// defaultBackward is relaytest.DefaultBackward.
var defaultBackward = relaytest.DefaultBackward

func TestMain(m *testing.M) {
	code := m.Run()
	if err := services.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "schemaregistry tests:", err)
	}
	os.Exit(code)
}

func suffix(t *testing.T) string {
	t.Helper()
	b := make([]byte, 4)
	rand.Read(b)
	return "x" + hex.EncodeToString(b) // also an Avro namespace part
}

// order returns the text of a record test.<ns>.Order with the given extra
// fields (JSON, each with a leading comma).
func order(ns, extra string) string {
	return `{"type":"record","name":"Order","namespace":"test.` + ns + `","fields":[` +
		`{"name":"id","type":"string"},{"name":"amount_cents","type":"long"}` + extra + `]}`
}

func parse(t *testing.T, eventType, text string) *schemaregistry.Schema {
	t.Helper()
	s, err := schemaregistry.ParseSchema(eventType, eventType+".avsc", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func schemas(list ...*schemaregistry.Schema) map[string]*schemaregistry.Schema {
	m := map[string]*schemaregistry.Schema{}
	for _, s := range list {
		m[s.EventType] = s
	}
	return m
}

// counter counts the HTTP requests a Registry sends, by method and path
// below the registry's base path (Apicurio's /apis/ccompat/v7).
type counter struct {
	base string
	mu   sync.Mutex
	n    map[string]int
	all  int
}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.n[r.Method+" "+strings.TrimPrefix(r.URL.Path, c.base)]++
	c.all++
	c.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

func (c *counter) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.all
}

func (c *counter) count(method, path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[method+" "+path]
}

func newRegistry(t *testing.T, reg relaytest.SchemaRegistry, strategy schemaregistry.Strategy, local map[string]*schemaregistry.Schema) (*schemaregistry.Registry, *counter) {
	t.Helper()
	relaytest.Need(t, reg)
	base, err := url.Parse(reg.URL())
	if err != nil {
		t.Fatal(err)
	}
	c := &counter{base: base.Path, n: map[string]int{}}
	r, err := schemaregistry.New(schemaregistry.Config{
		URL:        reg.URL(),
		Strategy:   strategy,
		Schemas:    local,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		HTTPClient: &http.Client{Transport: c},
	})
	if err != nil {
		t.Fatal(err)
	}
	return r, c
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestPreflightRecordStrategy(t *testing.T) { eachRegistry(t, testPreflightRecordStrategy) }

func testPreflightRecordStrategy(t *testing.T, reg relaytest.SchemaRegistry) {
	ns := suffix(t)
	a := parse(t, "OrderPlaced", order(ns, ""))
	b := parse(t, "Refund", `{"type":"record","name":"Refund","namespace":"test.`+ns+`","fields":[{"name":"id","type":"string"}]}`)
	r, c := newRegistry(t, reg, schemaregistry.Record, schemas(a, b))
	if err := r.Preflight(ctx(t), nil); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*schemaregistry.Schema{a, b} {
		if got := reg.Versions(t, s.FullName); !reflect.DeepEqual(got, []int{1}) {
			t.Fatalf("subject %s: versions %v, want [1]", s.FullName, got)
		}
	}
	// Encoders come from Preflight's registrations, for any topic.
	before := c.total()
	for _, topic := range []string{"t1-" + ns, "t2-" + ns} {
		enc, err := r.Encoder(ctx(t), topic, []byte("OrderPlaced"))
		if err != nil {
			t.Fatal(err)
		}
		if want := reg.LatestID(t, a.FullName); enc.ID != want {
			t.Fatalf("encoder id %d, registry id %d", enc.ID, want)
		}
	}
	if n := c.total() - before; n != 0 {
		t.Fatalf("Encoder sent %d requests after Preflight, want 0", n)
	}
}

func TestPreflightTopicRecordStrategy(t *testing.T) {
	eachRegistry(t, testPreflightTopicRecordStrategy)
}

func testPreflightTopicRecordStrategy(t *testing.T, reg relaytest.SchemaRegistry) {
	ns := suffix(t)
	v1 := order(ns, "")
	v2 := parse(t, "OrderPlaced", order(ns, `,{"name":"note","type":["null","string"],"default":null}`))
	ours, theirs := "orders-"+ns, "legacy-"+ns
	subOurs, subTheirs := ours+"-"+v2.FullName, theirs+"-"+v2.FullName
	reg.Register(t, subOurs, v1)
	reg.Register(t, subTheirs, v1)
	reg.Register(t, ours+"-test."+ns+".Unrelated", `{"type":"record","name":"Unrelated","namespace":"test.`+ns+`","fields":[]}`)

	r, c := newRegistry(t, reg, schemaregistry.TopicRecord, schemas(v2))
	match := func(topic string) bool { return strings.HasPrefix(topic, "orders-") }
	if err := r.Preflight(ctx(t), match); err != nil {
		t.Fatal(err)
	}
	if got := reg.Versions(t, subOurs); !reflect.DeepEqual(got, []int{1, 2}) {
		t.Fatalf("%s: versions %v, want [1 2]", subOurs, got)
	}
	if got := reg.Versions(t, subTheirs); !reflect.DeepEqual(got, []int{1}) {
		t.Fatalf("%s (topic not matched): versions %v, want [1]", subTheirs, got)
	}
	if c.count(http.MethodPost, "/subjects/"+subOurs+"/versions") != 1 || c.count(http.MethodPost, "/subjects/"+subTheirs+"/versions") != 0 {
		t.Fatalf("requests: %v", c.n)
	}
	before := c.total()
	enc, err := r.Encoder(ctx(t), ours, []byte("OrderPlaced"))
	if err != nil {
		t.Fatal(err)
	}
	if enc.ID != reg.LatestID(t, subOurs) || c.total() != before {
		t.Fatalf("encoder id %d (registry %d), %d requests", enc.ID, reg.LatestID(t, subOurs), c.total()-before)
	}
}

func TestPreflightTopicStrategy(t *testing.T) { eachRegistry(t, testPreflightTopicStrategy) }

func testPreflightTopicStrategy(t *testing.T, reg relaytest.SchemaRegistry) {
	ns := suffix(t)
	local := parse(t, "OrderPlaced", order(ns, `,{"name":"note","type":"string","default":""}`))
	topic, other := "orders-"+ns, "payments-"+ns
	reg.Register(t, topic+"-value", order(ns, ""))
	reg.Register(t, other+"-value", `{"type":"record","name":"Payment","namespace":"test.`+ns+`","fields":[]}`)

	r, c := newRegistry(t, reg, schemaregistry.Topic, schemas(local))
	if err := r.Preflight(ctx(t), nil); err != nil {
		t.Fatal(err)
	}
	if got := reg.Versions(t, topic+"-value"); !reflect.DeepEqual(got, []int{1, 2}) {
		t.Fatalf("%s-value: versions %v, want [1 2]", topic, got)
	}
	if got := reg.Versions(t, other+"-value"); !reflect.DeepEqual(got, []int{1}) {
		t.Fatalf("%s-value (another record): versions %v, want [1]", other, got)
	}
	before := c.total()
	enc, err := r.Encoder(ctx(t), topic, []byte("OrderPlaced"))
	if err != nil {
		t.Fatal(err)
	}
	if enc.ID != reg.LatestID(t, topic+"-value") || c.total() != before {
		t.Fatalf("encoder id %d, %d requests", enc.ID, c.total()-before)
	}
}

func TestPreflightIncompatibleBackward(t *testing.T) {
	eachRegistry(t, testPreflightIncompatibleBackward)
}

func testPreflightIncompatibleBackward(t *testing.T, reg relaytest.SchemaRegistry) {
	tests := []struct {
		name   string
		change string // the local schema's fields after id
		field  string // the registry's reason names it
	}{
		{"field added without default", `,{"name":"amount_cents","type":"long"},{"name":"tax_cents","type":"long"}`, "tax_cents"},
		{"field type changed", `,{"name":"amount_cents","type":"string"}`, "amount_cents"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := suffix(t)
			local := parse(t, "OrderPlaced", `{"type":"record","name":"Order","namespace":"test.`+ns+`","fields":[{"name":"id","type":"string"}`+tt.change+`]}`)
			topic := "orders-" + ns
			subject := topic + "-" + local.FullName
			reg.Register(t, subject, order(ns, ""))
			defaultBackward(t, reg, subject)

			r, _ := newRegistry(t, reg, schemaregistry.TopicRecord, schemas(local))
			err := r.Preflight(ctx(t), nil)
			var ie *schemaregistry.IncompatibleError
			if !errors.As(err, &ie) {
				t.Fatalf("Preflight = %v, want *IncompatibleError", err)
			}
			if ie.Subject != subject || ie.Level != "BACKWARD" || ie.EventType != "OrderPlaced" || ie.File != "OrderPlaced.avsc" {
				t.Fatalf("got %+v", ie)
			}
			t.Log(err)
			msg := err.Error()
			for _, want := range []string{subject, "BACKWARD", tt.field} {
				if !strings.Contains(msg, want) {
					t.Errorf("message lacks %q: %s", want, msg)
				}
			}
			if got := reg.Versions(t, subject); !reflect.DeepEqual(got, []int{1}) {
				t.Errorf("versions %v, want [1]", got)
			}
			// The encoder path reports it the same way.
			if _, err := r.Encoder(ctx(t), topic, []byte("OrderPlaced")); !errors.As(err, &ie) {
				t.Errorf("Encoder = %v, want *IncompatibleError", err)
			}
		})
	}
}

// TestCompatibilityLevels shows for each level a change it rejects (with
// the level in the message) and that the same change passes BACKWARD where
// BACKWARD allows it.
func TestCompatibilityLevels(t *testing.T) { eachRegistry(t, testCompatibilityLevels) }

func testCompatibilityLevels(t *testing.T, reg relaytest.SchemaRegistry) {
	tests := []struct {
		level        string
		change       string // the new schema's extra fields; v1 has id, amount_cents, note (default "")
		backwardOK   bool
		reasonSubstr string
	}{
		// Old readers (v1) cannot read new data without the required amount_cents.
		{"FORWARD", `{"name":"id","type":"string"},{"name":"note","type":"string","default":""}`, true, "amount_cents"},
		// New readers cannot read old data without tax_cents.
		{"FULL", `{"name":"id","type":"string"},{"name":"amount_cents","type":"long"},{"name":"note","type":"string","default":""},{"name":"tax_cents","type":"long"}`, false, "tax_cents"},
		// Old readers cannot read new data without amount_cents.
		{"FULL", `{"name":"id","type":"string"},{"name":"note","type":"string","default":""}`, true, "amount_cents"},
	}
	for _, tt := range tests {
		t.Run(tt.level+"/"+tt.reasonSubstr, func(t *testing.T) {
			ns := suffix(t)
			v1 := order(ns, `,{"name":"note","type":"string","default":""}`)
			local := parse(t, "OrderPlaced", `{"type":"record","name":"Order","namespace":"test.`+ns+`","fields":[`+tt.change+`]}`)
			topic := "orders-" + ns
			subject := topic + "-" + local.FullName
			reg.Register(t, subject, v1)
			reg.SetLevel(t, subject, tt.level)

			r, _ := newRegistry(t, reg, schemaregistry.TopicRecord, schemas(local))
			err := r.Preflight(ctx(t), nil)
			var ie *schemaregistry.IncompatibleError
			if !errors.As(err, &ie) || ie.Level != tt.level {
				t.Fatalf("Preflight under %s = %v, want *IncompatibleError with the level", tt.level, err)
			}
			t.Log(err)
			if !strings.Contains(err.Error(), tt.level+" compatibility") || !strings.Contains(err.Error(), subject) ||
				!strings.Contains(err.Error(), tt.reasonSubstr) {
				t.Fatalf("message: %s", err)
			}

			// Under BACKWARD the same change is accepted iff BACKWARD allows it.
			reg.SetLevel(t, subject, "BACKWARD")
			r2, _ := newRegistry(t, reg, schemaregistry.TopicRecord, schemas(local))
			err = r2.Preflight(ctx(t), nil)
			if tt.backwardOK != (err == nil) {
				t.Fatalf("under BACKWARD: %v (want accepted: %v)", err, tt.backwardOK)
			}
		})
	}
}

func TestCompatibleChangeRegistersNewVersion(t *testing.T) {
	eachRegistry(t, testCompatibleChangeRegistersNewVersion)
}

func testCompatibleChangeRegistersNewVersion(t *testing.T, reg relaytest.SchemaRegistry) {
	ns := suffix(t)
	topic := "orders-" + ns
	v1 := parse(t, "OrderPlaced", order(ns, ""))
	subject := topic + "-" + v1.FullName

	r1, _ := newRegistry(t, reg, schemaregistry.TopicRecord, schemas(v1))
	enc1, err := r1.Encoder(ctx(t), topic, []byte("OrderPlaced"))
	if err != nil {
		t.Fatal(err)
	}
	// A restarted relay with the same schema gets the same id, no new version.
	r1b, _ := newRegistry(t, reg, schemaregistry.TopicRecord, schemas(v1))
	if err := r1b.Preflight(ctx(t), nil); err != nil {
		t.Fatal(err)
	}
	if enc, err := r1b.Encoder(ctx(t), topic, []byte("OrderPlaced")); err != nil || enc.ID != enc1.ID {
		t.Fatalf("same schema again: %v, %v; want id %d", enc, err, enc1.ID)
	}

	v2 := parse(t, "OrderPlaced", order(ns, `,{"name":"currency","type":"string","default":"EUR"}`))
	r2, _ := newRegistry(t, reg, schemaregistry.TopicRecord, schemas(v2))
	if err := r2.Preflight(ctx(t), nil); err != nil {
		t.Fatal(err)
	}
	enc2, err := r2.Encoder(ctx(t), topic, []byte("OrderPlaced"))
	if err != nil {
		t.Fatal(err)
	}
	if got := reg.Versions(t, subject); !reflect.DeepEqual(got, []int{1, 2}) {
		t.Fatalf("versions %v, want [1 2]", got)
	}
	if enc2.ID == enc1.ID || enc2.ID != reg.LatestID(t, subject) {
		t.Fatalf("v2 id %d, v1 id %d, registry latest %d", enc2.ID, enc1.ID, reg.LatestID(t, subject))
	}
}

// TestEncoderWireFormat registers on first use, caches (request counts),
// and writes values that decode with the schema fetched by id over HTTP.
func TestEncoderWireFormat(t *testing.T) { eachRegistry(t, testEncoderWireFormat) }

func testEncoderWireFormat(t *testing.T, reg relaytest.SchemaRegistry) {
	ns := suffix(t)
	local, err := schemaregistry.LoadDir("../testdata/schemas")
	if err != nil {
		t.Fatal(err)
	}
	r, c := newRegistry(t, reg, schemaregistry.TopicRecord, local)
	if err := r.Preflight(ctx(t), func(topic string) bool { return strings.HasSuffix(topic, ns) }); err != nil {
		t.Fatal(err)
	}
	if c.total() != 1 || c.count(http.MethodGet, "/subjects") != 1 {
		t.Fatalf("Preflight with no matching subjects sent %v", c.n)
	}
	topic := "outbox.event.order-" + ns
	payload := []byte(`{"order_id":"1b4e28ba-2fa1-11d2-883f-0016cb4a5b81","customer_id":"c-42 Zoë 🚀","status":"SHIPPED",` +
		`"amount_cents":9223372036854775807,"items":[{"sku":"A-1","quantity":3,"unit_price_cents":-5}],` +
		`"created_at":"2024-05-01T12:30:15.123+02:00","coupon_code":"SPRING"}`)
	var values [][]byte
	for range 500 {
		enc, err := r.Encoder(ctx(t), topic, []byte("OrderCreated"))
		if err != nil {
			t.Fatal(err)
		}
		v, err := enc.Append(nil, payload)
		if err != nil {
			t.Fatal(err)
		}
		values = append(values, v)
	}
	subject := topic + "-com.example.orders.OrderCreated"
	if n := c.count(http.MethodPost, "/subjects/"+subject+"/versions"); n != 1 || c.total() != 2 {
		t.Fatalf("500 events sent %d registrations (%d requests), want 1 (2)", n, c.total())
	}
	if got := reg.Versions(t, subject); !reflect.DeepEqual(got, []int{1}) {
		t.Fatalf("versions %v", got)
	}
	id := reg.LatestID(t, subject)

	v := values[len(values)-1]
	if v[0] != 0 || int(binary.BigEndian.Uint32(v[1:5])) != id {
		t.Fatalf("header %x, want 00 and id %d", v[:5], id)
	}
	var byID struct{ Schema string }
	if code := reg.Do(t, http.MethodGet, fmt.Sprintf("/schemas/ids/%d", id), nil, &byID); code != 200 {
		t.Fatalf("GET /schemas/ids/%d: HTTP %d", id, code)
	}
	codec, err := goavro.NewCodec(byID.Schema)
	if err != nil {
		t.Fatal(err)
	}
	native, rest, err := codec.NativeFromBinary(v[5:])
	if err != nil || len(rest) != 0 {
		t.Fatalf("decode: %v (%d bytes left)", err, len(rest))
	}
	got := native.(map[string]any)
	want := map[string]any{
		"order_id":     "1b4e28ba-2fa1-11d2-883f-0016cb4a5b81",
		"customer_id":  "c-42 Zoë 🚀",
		"status":       "SHIPPED",
		"amount_cents": int64(9223372036854775807),
		"currency":     "EUR",
		"items":        []any{map[string]any{"sku": "A-1", "quantity": int32(3), "unit_price_cents": int64(-5)}},
		"coupon_code":  map[string]any{"string": "SPRING"},
	}
	for k, w := range want {
		if !reflect.DeepEqual(got[k], w) {
			t.Errorf("%s: got %#v, want %#v", k, got[k], w)
		}
	}
	if ts, _ := got["created_at"].(time.Time); !ts.Equal(time.Date(2024, 5, 1, 10, 30, 15, 123e6, time.UTC)) {
		t.Errorf("created_at: got %v", got["created_at"])
	}

	// A second event type and a second topic: one registration each.
	if _, err := r.Encoder(ctx(t), topic, []byte("OrderCancelled")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Encoder(ctx(t), topic+"-eu", []byte("OrderCreated")); err != nil {
		t.Fatal(err)
	}
	if c.total() != 4 {
		t.Fatalf("%d requests, want 4: %v", c.total(), c.n)
	}
	if _, err := r.Encoder(ctx(t), topic, []byte("OrderRefunded")); !errors.Is(err, schemaregistry.ErrNoSchema) {
		t.Fatalf("unknown event type: %v", err)
	}
}

// TestEncoderWaitsForRegistry stops the registry: a first registration
// retries until it is back. Restarting empties the shared registry, which is
// harmless because no test runs in parallel and each registers what it needs.
func TestEncoderWaitsForRegistry(t *testing.T) {
	ns := suffix(t)
	local := parse(t, "OrderPlaced", order(ns, ""))
	r, c := newRegistry(t, registry, schemaregistry.TopicRecord, schemas(local))
	if err := registry.Stop(); err != nil {
		t.Fatal(err)
	}
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			registry.Restart()
		}
	})
	type result struct {
		enc *schemaregistry.Encoder
		err error
	}
	done := make(chan result, 1)
	go func() {
		enc, err := r.Encoder(ctx(t), "orders-"+ns, []byte("OrderPlaced"))
		done <- result{enc, err}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for c.total() < 2 { // failed at least twice
		if time.Now().After(deadline) {
			t.Fatal("no retries seen")
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case res := <-done:
		t.Fatalf("Encoder returned while the registry is down: %v", res.err)
	default:
	}
	if err := registry.Restart(); err != nil {
		t.Fatal(err)
	}
	restarted = true
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	if res.enc.ID != registry.LatestID(t, "orders-"+ns+"-"+local.FullName) {
		t.Fatalf("id %d", res.enc.ID)
	}
}
