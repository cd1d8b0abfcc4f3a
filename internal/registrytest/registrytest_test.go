package registrytest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"
)

const (
	v1 = `{"type":"record","name":"Order","namespace":"test","fields":[{"name":"id","type":"string"}]}`
	// v2 adds a field with a default: BACKWARD compatible with v1.
	v2 = `{"type":"record","name":"Order","namespace":"test","fields":[{"name":"id","type":"string"},{"name":"note","type":"string","default":""}]}`
	// v3 adds a field without a default: new readers can't read v2 data.
	v3 = `{"type":"record","name":"Order","namespace":"test","fields":[{"name":"id","type":"string"},{"name":"note","type":"string","default":""},{"name":"amount","type":"long"}]}`
)

func TestRegistry(t *testing.T) {
	began := time.Now()
	r, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("registry ready on %s in %s", r.URL(), time.Since(began).Round(time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("tail of %s:\n%s", r.LogPath(), tail(r.LogPath()))
		}
		if err := r.Close(); err != nil {
			t.Error(err)
		}
	})

	var cfg struct {
		CompatibilityLevel string `json:"compatibilityLevel"`
	}
	if code := call(t, http.MethodGet, r.URL()+"/config", "", &cfg); code != http.StatusOK {
		t.Fatalf("GET /config: HTTP %d", code)
	}
	if cfg.CompatibilityLevel != "BACKWARD" {
		t.Fatalf("default compatibility = %q, want BACKWARD", cfg.CompatibilityLevel)
	}

	id1 := register(t, r.URL(), "x-value", v1, http.StatusOK)
	if id1 <= 0 {
		t.Fatalf("id of v1 = %d, want > 0", id1)
	}
	if got := register(t, r.URL(), "x-value", v1, http.StatusOK); got != id1 {
		t.Fatalf("registering v1 again gave id %d, want %d", got, id1)
	}
	if id2 := register(t, r.URL(), "x-value", v2, http.StatusOK); id2 == id1 {
		t.Fatalf("v2 got the id of v1 (%d)", id1)
	}
	register(t, r.URL(), "x-value", v3, http.StatusConflict)

	if err := r.Restart(); err != nil {
		t.Fatal(err)
	}
	var subjects []string
	if code := call(t, http.MethodGet, r.URL()+"/subjects", "", &subjects); code != http.StatusOK {
		t.Fatalf("GET /subjects after restart: HTTP %d", code)
	}
	if len(subjects) != 0 {
		t.Fatalf("subjects after restart = %v, want none (memory storage)", subjects)
	}
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(r.URL() + "/subjects"); err == nil {
		t.Fatal("registry still answers after Stop")
	}
}

// register posts schema under subject, checks the status and returns the id
// (0 unless the status is 200).
func register(t *testing.T, url, subject, schema string, wantCode int) int {
	t.Helper()
	body, err := json.Marshal(map[string]string{"schema": schema})
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		ID int `json:"id"`
	}
	if code := call(t, http.MethodPost, url+"/subjects/"+subject+"/versions", string(body), &res); code != wantCode {
		t.Fatalf("register under %s: HTTP %d, want %d", subject, code, wantCode)
	}
	return res.ID
}

// call sends one request and decodes a 200 answer into out.
func call(t *testing.T, method, url, body string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	client := &http.Client{Timeout: 10 * time.Second}
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		t.Logf("%s %s: HTTP %d %s", method, url, res.StatusCode, b)
		return res.StatusCode
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s %s: decode %q: %v", method, url, b, err)
	}
	return res.StatusCode
}
