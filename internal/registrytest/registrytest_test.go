package registrytest

import (
	"net/http"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/testtier"
)

const (
	v1 = `{"type":"record","name":"Order","namespace":"test","fields":[{"name":"id","type":"string"}]}`
	// v2 adds a field with a default: BACKWARD compatible with v1.
	v2 = `{"type":"record","name":"Order","namespace":"test","fields":[{"name":"id","type":"string"},{"name":"note","type":"string","default":""}]}`
	// v3 adds a field without a default: new readers can't read v2 data.
	v3 = `{"type":"record","name":"Order","namespace":"test","fields":[{"name":"id","type":"string"},{"name":"note","type":"string","default":""},{"name":"amount","type":"long"}]}`
)

func TestRegistry(t *testing.T) {
	testtier.Need(t)
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
	if code := r.Do(t, http.MethodGet, "/config", nil, &cfg); code != http.StatusOK {
		t.Fatalf("GET /config: HTTP %d", code)
	}
	if cfg.CompatibilityLevel != "BACKWARD" {
		t.Fatalf("default compatibility = %q, want BACKWARD", cfg.CompatibilityLevel)
	}

	id1 := r.Register(t, "x-value", v1)
	if id1 <= 0 {
		t.Fatalf("id of v1 = %d, want > 0", id1)
	}
	if got := r.Register(t, "x-value", v1); got != id1 {
		t.Fatalf("registering v1 again gave id %d, want %d", got, id1)
	}
	if id2 := r.Register(t, "x-value", v2); id2 == id1 {
		t.Fatalf("v2 got the id of v1 (%d)", id1)
	}
	if code := r.Do(t, http.MethodPost, SubjectPath("x-value")+"/versions", map[string]string{"schema": v3}, nil); code != http.StatusConflict {
		t.Fatalf("registering v3 (not BACKWARD compatible): HTTP %d, want %d", code, http.StatusConflict)
	}
	if got := r.Versions(t, "x-value"); len(got) != 2 {
		t.Fatalf("versions of x-value = %v, want 2", got)
	}
	if got := r.LatestID(t, "x-value"); got == id1 {
		t.Fatalf("latest id = %d, the id of v1", got)
	}
	r.SetLevel(t, "x-value", "NONE")
	if id3 := r.Register(t, "x-value", v3); id3 <= 0 {
		t.Fatalf("v3 under NONE: id %d", id3)
	}

	if err := r.Restart(); err != nil {
		t.Fatal(err)
	}
	var subjects []string
	if code := r.Do(t, http.MethodGet, "/subjects", nil, &subjects); code != http.StatusOK {
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
