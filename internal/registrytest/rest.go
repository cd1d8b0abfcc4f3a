package registrytest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"
)

// The REST helpers below talk to the registry over plain HTTP, independently
// of the project's schemaregistry client, so tests can check what it did.
// Each fails the test on a transport error.

// restClient bounds every helper request; the registry answers in
// milliseconds.
var restClient = &http.Client{Timeout: 30 * time.Second}

// SubjectPath is the REST path of subject, escaped.
func SubjectPath(subject string) string { return "/subjects/" + url.PathEscape(subject) }

// Do sends one request to path (e.g. "/config") with in, when not nil, as
// its JSON body, decodes a 2xx answer into out, when not nil, and returns
// the status code.
func (r *Registry) Do(t testing.TB, method, path string, in, out any) int {
	t.Helper()
	return do(t, r.URL(), method, path, in, out)
}

// Register registers schema (Avro text) under subject and returns its id;
// any status but 200 fails the test.
func (r *Registry) Register(t testing.TB, subject, schema string) int {
	t.Helper()
	return register(t, r.URL(), subject, schema)
}

// Versions returns subject's version numbers, none for a subject the
// registry does not know (404).
func (r *Registry) Versions(t testing.TB, subject string) []int {
	t.Helper()
	return versions(t, r.URL(), subject)
}

// LatestID returns the schema id of subject's latest version.
func (r *Registry) LatestID(t testing.TB, subject string) int {
	t.Helper()
	return latestID(t, r.URL(), subject)
}

// SetLevel sets subject's compatibility level (e.g. "FULL_TRANSITIVE").
func (r *Registry) SetLevel(t testing.TB, subject, level string) {
	t.Helper()
	setLevel(t, r.URL(), subject, level)
}

// Do is Registry.Do against Apicurio's Confluent-compatible API.
func (a *Apicurio) Do(t testing.TB, method, path string, in, out any) int {
	t.Helper()
	return do(t, a.URL(), method, path, in, out)
}

// Register is Registry.Register against Apicurio.
func (a *Apicurio) Register(t testing.TB, subject, schema string) int {
	t.Helper()
	return register(t, a.URL(), subject, schema)
}

// Versions is Registry.Versions against Apicurio.
func (a *Apicurio) Versions(t testing.TB, subject string) []int {
	t.Helper()
	return versions(t, a.URL(), subject)
}

// LatestID is Registry.LatestID against Apicurio.
func (a *Apicurio) LatestID(t testing.TB, subject string) int {
	t.Helper()
	return latestID(t, a.URL(), subject)
}

// SetLevel is Registry.SetLevel against Apicurio.
func (a *Apicurio) SetLevel(t testing.TB, subject, level string) {
	t.Helper()
	setLevel(t, a.URL(), subject, level)
}

func do(t testing.TB, base, method, path string, in, out any) int {
	t.Helper()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	res, err := restClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: read the answer: %v", method, path, err)
	}
	if res.StatusCode/100 != 2 {
		t.Logf("%s %s: HTTP %d %s", method, path, res.StatusCode, data)
		return res.StatusCode
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: decode %q: %v", method, path, data, err)
		}
	}
	return res.StatusCode
}

func register(t testing.TB, base, subject, schema string) int {
	t.Helper()
	var out struct {
		ID int `json:"id"`
	}
	if code := do(t, base, http.MethodPost, SubjectPath(subject)+"/versions", map[string]string{"schema": schema}, &out); code != http.StatusOK {
		t.Fatalf("register under %s: HTTP %d", subject, code)
	}
	return out.ID
}

func versions(t testing.TB, base, subject string) []int {
	t.Helper()
	var out []int
	if code := do(t, base, http.MethodGet, SubjectPath(subject)+"/versions", nil, &out); code != http.StatusOK && code != http.StatusNotFound {
		t.Fatalf("versions of %s: HTTP %d", subject, code)
	}
	return out
}

func latestID(t testing.TB, base, subject string) int {
	t.Helper()
	var out struct {
		ID int `json:"id"`
	}
	if code := do(t, base, http.MethodGet, SubjectPath(subject)+"/versions/latest", nil, &out); code != http.StatusOK {
		t.Fatalf("latest version of %s: HTTP %d", subject, code)
	}
	return out.ID
}

func setLevel(t testing.TB, base, subject, level string) {
	t.Helper()
	if code := do(t, base, http.MethodPut, "/config/"+url.PathEscape(subject), map[string]string{"compatibility": level}, nil); code != http.StatusOK {
		t.Fatalf("set %s on %s: HTTP %d", level, subject, code)
	}
}

// Refusing is a registry that answers every request with status and a
// Confluent error body (error_code status*100+1), closed at the test's end:
// for tests of what the relay does with a refusal (4xx) or an outage (5xx).
func Refusing(t testing.TB, status int) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error_code": %d, "message": "refused by the test"}`, status*100+1)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}
