package schemaregistry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/relaytest"
)

// fakeRegistry answers registry requests with handler and counts them.
type fakeRegistry struct {
	*httptest.Server
	requests atomic.Int64
}

func newFake(t *testing.T, handler http.HandlerFunc) *fakeRegistry {
	t.Helper()
	f := &fakeRegistry{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.requests.Add(1)
		handler(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func demoSchemas(t testing.TB) map[string]*Schema {
	t.Helper()
	s, err := LoadDir(demoDir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newTestRegistry(t *testing.T, url string, logs io.Writer, client *http.Client) *Registry {
	t.Helper()
	if logs == nil {
		logs = io.Discard
	}
	r, err := New(Config{URL: url, Schemas: demoSchemas(t), Logger: slog.New(slog.NewTextHandler(logs, nil)),
		Timeout: 2 * time.Second, HTTPClient: client})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestNewValidates(t *testing.T) {
	schemas := demoSchemas(t)
	bad := *schemas["OrderCreated"]
	bad.root = nil
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no URL", Config{Schemas: schemas}, "URL is empty"},
		{"no scheme", Config{URL: "localhost:8081", Schemas: schemas}, "want http(s)://host:port"},
		{"password redacted", Config{URL: "ftp://u:secret@host", Schemas: schemas}, "u:xxxxx@host"},
		{"bad strategy", Config{URL: "http://h:1", Schemas: schemas, Strategy: 7}, "strategy"},
		{"hand-made schema", Config{URL: "http://h:1", Schemas: map[string]*Schema{"OrderCreated": &bad}}, "ParseSchema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "secret") {
				t.Fatalf("got %v, want an error saying %q", err, tt.want)
			}
		})
	}
}

func TestEncoderNoSchema(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, map[string]int{"id": 1}) })
	r := newTestRegistry(t, f.URL, nil, nil)
	_, err := r.Encoder(context.Background(), "orders", []byte("OrderShipped"))
	if !errors.Is(err, ErrNoSchema) || !strings.Contains(err.Error(), `"OrderShipped"`) {
		t.Fatalf("got %v, want ErrNoSchema naming the event type", err)
	}
	if n := f.requests.Load(); n != 0 {
		t.Fatalf("%d requests, want none", n)
	}
}

func TestEncoderRegistersOnceAndCaches(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct{ Schema string }
		if r.Method != http.MethodPost || json.Unmarshal(body, &req) != nil || req.Schema == "" {
			writeJSON(w, 400, map[string]any{"error_code": 400, "message": "bad request"})
			return
		}
		if ct := r.Header.Get("Content-Type"); ct != contentType {
			writeJSON(w, 415, map[string]any{"error_code": 415, "message": ct})
			return
		}
		time.Sleep(20 * time.Millisecond) // let concurrent callers pile up
		mu.Lock()
		paths = append(paths, r.URL.EscapedPath())
		mu.Unlock()
		writeJSON(w, 200, map[string]int{"id": 40 + len(paths)})
	})
	r := newTestRegistry(t, f.URL+"/", nil, nil)
	ctx := context.Background()

	var wg sync.WaitGroup
	encs := make([]*Encoder, 16)
	errs := make([]error, 16)
	for i := range encs {
		wg.Go(func() { encs[i], errs[i] = r.Encoder(ctx, "orders", []byte("OrderCreated")) })
	}
	wg.Wait()
	for i := range encs {
		if errs[i] != nil || encs[i] != encs[0] {
			t.Fatalf("caller %d: %v, %p; want %p", i, errs[i], encs[i], encs[0])
		}
	}
	if got := f.requests.Load(); got != 1 {
		t.Fatalf("%d requests for one new pair, want 1", got)
	}
	if want := "/subjects/orders-com.example.orders.OrderCreated/versions"; paths[0] != want {
		t.Fatalf("path %s, want %s", paths[0], want)
	}
	if encs[0].ID != 41 || encs[0].Schema.EventType != "OrderCreated" {
		t.Fatalf("encoder %+v", encs[0])
	}

	// Cached: no lock, no allocation, no request.
	et := []byte("OrderCreated")
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := r.Encoder(ctx, "orders", et); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 || f.requests.Load() != 1 {
		t.Fatalf("cached Encoder: %v allocs, %d requests; want 0 and 1", allocs, f.requests.Load())
	}

	// A new topic is a new subject; a new event type too.
	if _, err := r.Encoder(ctx, "orders.eu", et); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Encoder(ctx, "orders", []byte("OrderCancelled")); err != nil {
		t.Fatal(err)
	}
	if got := f.requests.Load(); got != 3 {
		t.Fatalf("%d requests, want 3", got)
	}
}

func TestEncoderRecordStrategySharesSubject(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, map[string]int{"id": 9}) })
	r, err := New(Config{URL: f.URL, Schemas: demoSchemas(t), Strategy: Record})
	if err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"a", "b", "c"} {
		if _, err := r.Encoder(context.Background(), topic, []byte("OrderCreated")); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.requests.Load(); got != 1 {
		t.Fatalf("%d requests for one record subject on three topics, want 1", got)
	}
}

func TestRetryOnServerErrors(t *testing.T) {
	var n atomic.Int64
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		switch n.Add(1) {
		case 1:
			writeJSON(w, 503, map[string]any{"error_code": 50301, "message": "storage unavailable"})
		case 2:
			// Drop the connection: a network error.
			hj, _ := w.(http.Hijacker)
			conn, _, _ := hj.Hijack()
			conn.Close()
		case 3:
			w.WriteHeader(502)
			io.WriteString(w, "<html>bad gateway</html>")
		default:
			writeJSON(w, 200, map[string]int{"id": 3})
		}
	})
	logs := &relaytest.LogBuffer{}
	r := newTestRegistry(t, f.URL, logs, nil)
	began := time.Now()
	enc, err := r.Encoder(context.Background(), "orders", []byte("OrderCreated"))
	if err != nil || enc.ID != 3 {
		t.Fatalf("got %v, %v", enc, err)
	}
	if n.Load() != 4 {
		t.Fatalf("%d requests, want 4", n.Load())
	}
	// Three waits of about 250, 500 and 1000 ms (±20 %).
	if d := time.Since(began); d < 1400*time.Millisecond {
		t.Fatalf("retried too fast: %v", d)
	}
	out := logs.String()
	for _, want := range []string{"consecutive_errors=1", "storage unavailable", "consecutive_errors=3"} {
		if !strings.Contains(out, want) {
			t.Errorf("logs lack %q:\n%s", want, out)
		}
	}
	// Rate-limited: the second failure, within 10 s of the first, is not logged.
	if strings.Contains(out, "consecutive_errors=2 ") {
		t.Errorf("second failure logged:\n%s", out)
	}
}

func TestRetryStopsWithContext(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 500, map[string]any{"message": "down"}) })
	r := newTestRegistry(t, f.URL, nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
	defer cancel()
	began := time.Now()
	_, err := r.Encoder(ctx, "orders", []byte("OrderCreated"))
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "down") {
		t.Fatalf("got %v, want the deadline and the last error", err)
	}
	if d := time.Since(began); d > 1500*time.Millisecond {
		t.Fatalf("returned %v after the deadline", d)
	}
}

func TestNoRetryOnClientErrors(t *testing.T) {
	for _, status := range []int{400, 401, 404, 422} {
		f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, status, map[string]any{"error_code": status*100 + 1, "message": "nope " + http.StatusText(status)})
		})
		r := newTestRegistry(t, f.URL, nil, nil)
		_, err := r.Encoder(context.Background(), "orders", []byte("OrderCreated"))
		var ie *IncompatibleError
		if err == nil || errors.As(err, &ie) || !strings.Contains(err.Error(), "nope") ||
			!strings.Contains(err.Error(), "orders-com.example.orders.OrderCreated") {
			t.Errorf("HTTP %d: got %v", status, err)
		}
		if n := f.requests.Load(); n != 1 {
			t.Errorf("HTTP %d: %d requests, want 1", status, n)
		}
		if !Permanent(err) {
			t.Errorf("HTTP %d: Permanent(%v) = false", status, err)
		}
	}
}

func TestPermanent(t *testing.T) {
	down := newFake(t, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 503, map[string]any{"message": "down"}) })
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err5xx := newTestRegistry(t, down.URL, nil, nil).Encoder(ctx, "orders", []byte("OrderCreated"))
	_, errNoSchema := newTestRegistry(t, down.URL, nil, nil).Encoder(context.Background(), "orders", []byte("Nope"))
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"5xx until the deadline", err5xx, false},
		{"network", &url.Error{Op: "Post", URL: "http://x", Err: errors.New("connection refused")}, false},
		{"no schema", errNoSchema, true},
		{"incompatible", fmt.Errorf("wrapped: %w", &IncompatibleError{Subject: "s"}), true},
	} {
		if got := Permanent(tc.err); got != tc.want {
			t.Errorf("%s: Permanent(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

func TestIncompatibleFromRegistry(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/versions"):
			writeJSON(w, 409, map[string]any{"error_code": 409, "message": "Schema being registered is incompatible"})
		case r.URL.Path == "/config/orders-com.example.orders.OrderCreated" && r.URL.Query().Get("defaultToGlobal") == "true":
			writeJSON(w, 200, map[string]string{"compatibilityLevel": "FULL_TRANSITIVE"})
		case r.URL.Path == "/compatibility/subjects/orders-com.example.orders.OrderCreated/versions/latest" && r.URL.Query().Get("verbose") == "true":
			writeJSON(w, 200, map[string]any{"is_compatible": false, "messages": []string{"reader field 'amount_cents' type mismatch", "second"}})
		default:
			writeJSON(w, 404, map[string]any{"message": "unexpected " + r.URL.String()})
		}
	})
	r := newTestRegistry(t, f.URL, nil, nil)
	_, err := r.Encoder(context.Background(), "orders", []byte("OrderCreated"))
	var ie *IncompatibleError
	if !errors.As(err, &ie) {
		t.Fatalf("got %v, want *IncompatibleError", err)
	}
	want := IncompatibleError{Subject: "orders-com.example.orders.OrderCreated", Level: "FULL_TRANSITIVE",
		EventType: "OrderCreated", File: "../testdata/schemas/OrderCreated.avsc",
		Reason: "reader field 'amount_cents' type mismatch; second"}
	if *ie != want {
		t.Fatalf("got %+v\nwant %+v", *ie, want)
	}
	const msg = `schema registry subject "orders-com.example.orders.OrderCreated" rejects schema OrderCreated (../testdata/schemas/OrderCreated.avsc) as incompatible under FULL_TRANSITIVE compatibility: reader field 'amount_cents' type mismatch; second`
	if err.Error() != msg {
		t.Fatalf("message\n%s\nwant\n%s", err, msg)
	}
}

func TestIncompatibleFallbacks(t *testing.T) {
	// No subject config, no verbose messages: the global level and the 409
	// message are used.
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/versions"):
			writeJSON(w, 409, map[string]any{"error_code": 409, "message": "field amount_cents changed type"})
		case r.URL.Path == "/config":
			writeJSON(w, 200, map[string]string{"compatibilityLevel": "BACKWARD"})
		default:
			writeJSON(w, 404, map[string]any{"error_code": 40401, "message": "Subject not found"})
		}
	})
	r := newTestRegistry(t, f.URL, nil, nil)
	_, err := r.Encoder(context.Background(), "orders", []byte("OrderCreated"))
	var ie *IncompatibleError
	if !errors.As(err, &ie) || ie.Level != "BACKWARD" || ie.Reason != "field amount_cents changed type" {
		t.Fatalf("got %#v", err)
	}
}

// TestIncompatibleWithoutVerboseReason: a registry that refuses with a 409
// and gives no reason in its verbose check (Apicurio Registry 3.x) gets
// the relay's own reason against the latest version after its 409 message.
func TestIncompatibleWithoutVerboseReason(t *testing.T) {
	const subject = "orders-com.example.orders.OrderCreated"
	const refusal = "io.apicurio.registry.rules.violation.RuleViolationException: Incompatible artifact: " + subject + " [AVRO], num of incompatible diffs: {1}, list of diff types: [customer_id at /fields/1]"
	local, err := os.ReadFile("../testdata/schemas/OrderCreated.avsc")
	if err != nil {
		t.Fatal(err)
	}
	// The latest version lacks customer_id, which the local schema adds
	// without a default.
	latest := strings.Replace(string(local), `{"name": "customer_id", "type": "string"},`, "", 1)
	if latest == string(local) {
		t.Fatal("the test schema has no customer_id line to remove")
	}
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/subjects/"+subject+"/versions":
			writeJSON(w, 409, map[string]any{"error_code": 409, "message": refusal})
		case r.URL.Path == "/config/"+subject:
			writeJSON(w, 200, map[string]string{"compatibilityLevel": "BACKWARD"})
		case r.URL.Path == "/compatibility/subjects/"+subject+"/versions/latest":
			writeJSON(w, 200, map[string]any{"is_compatible": false})
		case r.Method == http.MethodGet && r.URL.Path == "/subjects/"+subject+"/versions/latest":
			writeJSON(w, 200, map[string]any{"subject": subject, "id": 7, "version": 3, "schema": latest})
		default:
			writeJSON(w, 404, map[string]any{"error_code": 40401, "message": "unexpected " + r.URL.String()})
		}
	})
	r := newTestRegistry(t, f.URL, nil, nil)
	_, err = r.Encoder(context.Background(), "orders", []byte("OrderCreated"))
	var ie *IncompatibleError
	if !errors.As(err, &ie) {
		t.Fatalf("got %v, want *IncompatibleError", err)
	}
	want := refusal + "; against the latest version (version 3), as a BACKWARD change: new field customer_id has no default, so data written with the latest version cannot be read"
	if ie.Level != "BACKWARD" || ie.Reason != want {
		t.Fatalf("level %q, reason\n%s\nwant\n%s", ie.Level, ie.Reason, want)
	}
}

// failingTransport fails the first n round trips with a network error.
type failingTransport struct {
	n     atomic.Int64
	fails int64
}

func (f *failingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if f.n.Add(1) <= f.fails {
		return nil, errors.New("dial tcp: connection refused")
	}
	return http.DefaultTransport.RoundTrip(r)
}

func TestCredentialsFromURL(t *testing.T) {
	var gotUser, gotPass string
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		gotUser, gotPass, _ = r.BasicAuth()
		io.WriteString(w, "null") // AxonOps: GET /subjects on an empty registry
	})
	logs := &relaytest.LogBuffer{}
	tr := &failingTransport{fails: 1}
	u := strings.Replace(f.URL, "http://", "http://relay:s3cr3t@", 1)
	r := newTestRegistry(t, u, logs, &http.Client{Transport: tr})
	if err := r.Preflight(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if gotUser != "relay" || gotPass != "s3cr3t" {
		t.Fatalf("basic auth %q %q", gotUser, gotPass)
	}
	if out := logs.String(); strings.Contains(out, "s3cr3t") || !strings.Contains(out, "connection refused") {
		t.Fatalf("logs leak the password or miss the failure:\n%s", out)
	}
}
