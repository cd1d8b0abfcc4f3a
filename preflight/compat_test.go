package preflight

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cdc-relay/cdc-relay/relay"
	"github.com/cdc-relay/cdc-relay/schemaregistry"
)

// TestCheckCompatibleOnlyWithoutFail: check's schema lines against a fake
// registry with two existing subjects of the local schemas. When one is
// incompatible, its FAIL line is not followed by "ok schemas: compatible";
// when both are compatible, that line counts them.
func TestCheckCompatibleOnlyWithoutFail(t *testing.T) {
	schemaDir, err := filepath.Abs("../testdata/schemas")
	if err != nil {
		t.Fatal(err)
	}
	const (
		created   = "t.Order-com.example.orders.OrderCreated"
		cancelled = "t.Order-com.example.orders.OrderCancelled"
	)
	for _, tc := range []struct {
		name         string
		incompatible map[string]bool
		wantFail     int
	}{
		{"one incompatible", map[string]bool{created: true}, 1},
		{"both incompatible", map[string]bool{created: true, cancelled: true}, 2},
		{"all compatible", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
				switch {
				case r.Method == http.MethodGet && r.URL.Path == "/subjects":
					json.NewEncoder(w).Encode([]string{created, cancelled})
				case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/compatibility/subjects/"):
					subject := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/compatibility/subjects/"), "/versions/latest")
					if tc.incompatible[subject] {
						json.NewEncoder(w).Encode(map[string]any{"is_compatible": false, "messages": []string{"READER_FIELD_MISSING_DEFAULT_VALUE: warehouse"}})
					} else {
						json.NewEncoder(w).Encode(map[string]any{"is_compatible": true})
					}
				case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/config"):
					json.NewEncoder(w).Encode(map[string]string{"compatibilityLevel": "BACKWARD"})
				default:
					t.Errorf("unexpected request %s %s", r.Method, r.URL)
					http.Error(w, `{"error_code":40401,"message":"no"}`, http.StatusNotFound)
				}
			}))
			defer srv.Close()
			var out bytes.Buffer
			c := &checker{out: &out}
			cfg := &relay.Config{SchemaRegistryURL: srv.URL, SchemasDir: schemaDir, TopicTemplate: "t.{aggregate_type}", SubjectStrategy: schemaregistry.TopicRecord}
			c.registry(context.Background(), cfg)
			t.Logf("check:\n%s", out.String())
			fails := lines(out.String(), "FAIL  schema ")
			oks := lines(out.String(), "ok    schemas: compatible")
			if len(fails) != tc.wantFail || c.failed != tc.wantFail {
				t.Errorf("%d FAIL lines (%d failed), want %d", len(fails), c.failed, tc.wantFail)
			}
			for _, l := range fails {
				if !strings.Contains(l, "is incompatible with subject t.Order-com.example.orders.") || !strings.Contains(l, "warehouse") {
					t.Errorf("FAIL line %q", l)
				}
			}
			switch {
			case tc.wantFail > 0 && len(oks) != 0:
				t.Errorf("%q printed after %d FAIL line(s) about the same schemas", oks[0], len(fails))
			case tc.wantFail == 0 && (len(oks) != 1 || oks[0] != "ok    schemas: compatible with 2 existing subject(s)"):
				t.Errorf("all compatible: %q, want one line \"ok    schemas: compatible with 2 existing subject(s)\"", oks)
			}
			if !strings.Contains(out.String(), "ok    schemas: 2 .avsc file(s) in "+schemaDir+" compile") || !strings.Contains(out.String(), "ok    schema registry "+srv.URL+" reachable") {
				t.Errorf("the lines before the compatibility check are missing")
			}
		})
	}
}

// lines are the lines of out that start with prefix, without their
// newline.
func lines(out, prefix string) []string {
	var ls []string
	for l := range strings.Lines(out) {
		if strings.HasPrefix(l, prefix) {
			ls = append(ls, strings.TrimSuffix(l, "\n"))
		}
	}
	return ls
}
