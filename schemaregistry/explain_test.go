package schemaregistry

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

const (
	explainV1     = `{"type":"record","name":"A","namespace":"x","fields":[{"name":"a","type":"string"},{"name":"n","type":"int"}]}`
	explainNewReq = `{"type":"record","name":"A","namespace":"x","fields":[{"name":"a","type":"string"},{"name":"n","type":"int"},{"name":"b","type":"int"}]}`
	explainNewOpt = `{"type":"record","name":"A","namespace":"x","fields":[{"name":"a","type":"string"},{"name":"n","type":"int"},{"name":"b","type":"int","default":1}]}`
	explainDrop   = `{"type":"record","name":"A","namespace":"x","fields":[{"name":"a","type":"string"}]}`
	explainRename = `{"type":"record","name":"B","namespace":"y","fields":[{"name":"a","type":"string"},{"name":"n","type":"int"}]}`
	explainRetype = `{"type":"record","name":"A","namespace":"x","fields":[{"name":"a","type":"string"},{"name":"n","type":{"type":"string"}}]}`
)

// TestExplainIncompatibility: what the relay names when a registry
// refuses without a reason, per level's direction.
func TestExplainIncompatibility(t *testing.T) {
	cases := []struct {
		local, level, want, direction string
	}{
		{explainNewReq, "BACKWARD", "new field b has no default", "BACKWARD"},
		{explainNewReq, "NONE", "new field b has no default", "BACKWARD"},
		{explainNewReq, "FORWARD", "", "FORWARD"},
		{explainNewOpt, "BACKWARD_TRANSITIVE", "", "BACKWARD"},
		{explainDrop, "FORWARD", "field n is removed and has no default in the latest version", "FORWARD"},
		{explainDrop, "FULL", "field n is removed", "FULL"},
		{explainRename, "BACKWARD", "the local schema is named y.B, the latest version x.A", "BACKWARD"},
		{explainRetype, "BACKWARD", `field n changes type from "int" to "string"`, "BACKWARD"},
	}
	for _, tc := range cases {
		got, dir := explainIncompatibility(tc.local, explainV1, tc.level)
		if dir != tc.direction || (tc.want == "" && got != "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s under %s: %q (%s), want %q (%s)", tc.local, tc.level, got, dir, tc.want, tc.direction)
		}
	}
}

// TestCheckCompatibilityWithoutReason is CheckCompatibility against a
// registry that answers as Apicurio 3.3.3's Confluent-compatible API does
// (checked by hand against it): GET /config says NONE, the verbose check
// says is_compatible false with no messages. The result names the field,
// and the verdict does not blame NONE.
func TestCheckCompatibilityWithoutReason(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
		switch {
		case req.URL.Path == "/subjects":
			io.WriteString(w, `["t.A-x.A"]`)
		case strings.HasPrefix(req.URL.Path, "/compatibility/"):
			io.WriteString(w, `{"is_compatible":false}`)
		case strings.HasPrefix(req.URL.Path, "/config"):
			io.WriteString(w, `{"compatibilityLevel":"NONE"}`)
		case strings.HasSuffix(req.URL.Path, "/versions/latest"):
			json.NewEncoder(w).Encode(map[string]any{"subject": "t.A-x.A", "id": 1, "version": 1, "schema": explainV1})
		default:
			http.NotFound(w, req)
		}
	}))
	defer srv.Close()
	s, err := ParseSchema("A", "A.avsc", []byte(explainNewReq))
	if err != nil {
		t.Fatal(err)
	}
	reg, err := New(Config{URL: srv.URL, Strategy: TopicRecord, Schemas: map[string]*Schema{"A": s}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	res, err := reg.CheckCompatibility(context.Background(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Compatible {
		t.Fatalf("results %+v, want one incompatible", res)
	}
	r := res[0]
	if want := "the registry gave no reason; against the latest version (version 1), as a BACKWARD change: new field b has no default"; !strings.HasPrefix(r.Reason, want) {
		t.Errorf("reason %q, want it to start with %q", r.Reason, want)
	}
	if v := r.Verdict(); strings.Contains(v, "under NONE") || !strings.Contains(v, "reports level NONE") || !strings.Contains(v, "run would register this one") {
		t.Errorf("verdict %q blames NONE", v)
	}
}
