package schemaregistry

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// TestLookupOnly: a LookupOnly registry (dlq redrive --dry-run) sends no
// request that registers: Preflight, Encoder and KeyID look each schema up
// under its subject (POST /subjects/{subject}). A schema the subject holds
// gets its id; one it does not hold, or a subject that does not exist,
// gets id 0 when registering it would be accepted, and *IncompatibleError
// when the subject's level would refuse it.
func TestLookupOnly(t *testing.T) {
	const (
		created   = "t.Order-com.example.orders.OrderCreated"   // holds the local schema: id 21
		cancelled = "t.Order-com.example.orders.OrderCancelled" // holds another: the local one would be refused
		otherKey  = "u.Order-key"                               // holds the key schema: id 5
	)
	var mu sync.Mutex
	var requests []string
	fake := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		path, _ := url.PathUnescape(r.URL.Path)
		mu.Lock()
		requests = append(requests, r.Method+" "+path)
		mu.Unlock()
		var body struct {
			Schema string `json:"schema"`
		}
		if r.Body != nil {
			b, _ := io.ReadAll(r.Body)
			json.Unmarshal(b, &body)
		}
		switch {
		case r.Method == http.MethodGet && path == "/subjects":
			writeJSON(w, http.StatusOK, []string{cancelled, created, otherKey})
		case r.Method == http.MethodPost && path == "/subjects/"+created:
			writeJSON(w, http.StatusOK, map[string]any{"subject": created, "id": 21, "version": 1, "schema": body.Schema})
		case r.Method == http.MethodPost && path == "/subjects/"+otherKey:
			writeJSON(w, http.StatusOK, map[string]any{"subject": otherKey, "id": 5, "version": 1, "schema": body.Schema})
		case r.Method == http.MethodPost && path == "/subjects/"+cancelled:
			writeJSON(w, http.StatusNotFound, map[string]any{"error_code": 40403, "message": "Schema not found"})
		case r.Method == http.MethodPost && strings.HasPrefix(path, "/subjects/"):
			writeJSON(w, http.StatusNotFound, map[string]any{"error_code": 40401, "message": "Subject not found"})
		case r.Method == http.MethodPost && path == "/compatibility/subjects/"+cancelled+"/versions/latest":
			writeJSON(w, http.StatusOK, map[string]any{"is_compatible": false, "messages": []string{"READER_FIELD_MISSING_DEFAULT_VALUE: reason"}})
		case r.Method == http.MethodPost && strings.HasPrefix(path, "/compatibility/subjects/"):
			writeJSON(w, http.StatusNotFound, map[string]any{"error_code": 40401, "message": "Subject not found"})
		case r.Method == http.MethodGet && strings.HasPrefix(path, "/config"):
			writeJSON(w, http.StatusOK, map[string]string{"compatibilityLevel": "BACKWARD"})
		default:
			t.Errorf("unexpected request %s %s", r.Method, path)
			writeJSON(w, http.StatusInternalServerError, map[string]any{"message": "unexpected"})
		}
	})
	reg, err := New(Config{URL: fake.URL, Schemas: demoSchemas(t), LookupOnly: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	// Preflight: the existing subjects of the local schemas; the one that
	// would be refused is reported as a real Preflight reports it.
	err = reg.Preflight(ctx, nil)
	var ie *IncompatibleError
	if !errors.As(err, &ie) || ie.Subject != cancelled || ie.EventType != "OrderCancelled" || ie.Level != "BACKWARD" || !strings.Contains(ie.Reason, "READER_FIELD_MISSING_DEFAULT_VALUE") {
		t.Errorf("Preflight: %v, want the refusal of %s", err, cancelled)
	}
	// Encoder: a schema the subject holds gets its id; a new subject id 0.
	if enc, err := reg.Encoder(ctx, "t.Order", []byte("OrderCreated")); err != nil || enc.ID != 21 {
		t.Errorf("Encoder of a registered schema: %v, %v; want id 21", enc, err)
	}
	if enc, err := reg.Encoder(ctx, "v.Order", []byte("OrderCreated")); err != nil || enc.ID != 0 {
		t.Errorf("Encoder under a new subject: %v, %v; want id 0", enc, err)
	}
	if _, err := reg.Encoder(ctx, "t.Order", []byte("OrderCancelled")); !errors.As(err, &ie) || ie.Subject != cancelled {
		t.Errorf("Encoder of a schema the subject would refuse: %v", err)
	}
	// KeyID: the same.
	if id, err := reg.KeyID(ctx, "u.Order"); err != nil || id != 5 {
		t.Errorf("KeyID of a registered key schema: %d, %v; want 5", id, err)
	}
	if id, err := reg.KeyID(ctx, "v.Order"); err != nil || id != 0 {
		t.Errorf("KeyID under a new subject: %d, %v; want 0", id, err)
	}

	mu.Lock()
	defer mu.Unlock()
	for _, req := range requests {
		if strings.HasPrefix(req, "POST /subjects/") && strings.HasSuffix(req, "/versions") || strings.HasPrefix(req, "PUT ") || strings.HasPrefix(req, "DELETE ") {
			t.Errorf("a lookup-only registry sent %s", req)
		}
	}
	for _, want := range []string{"POST /subjects/" + created, "POST /subjects/v.Order-com.example.orders.OrderCreated", "POST /compatibility/subjects/v.Order-com.example.orders.OrderCreated/versions/latest",
		"POST /subjects/u.Order-key", "POST /subjects/v.Order-key"} {
		found := false
		for _, req := range requests {
			found = found || req == want
		}
		if !found {
			t.Errorf("no request %s in %v", want, requests)
		}
	}
}
