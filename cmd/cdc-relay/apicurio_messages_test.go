package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCompatMessagesApicurio runs schemas check and check against a real
// Apicurio Registry 3.3.3, which reports its global level as NONE, refuses
// an incompatible schema in its compatibility check all the same, and
// never says why. With a required field added to OrderCreated:
//   - schemas check (subject level NONE, as reported) must not blame NONE
//     and must name the field;
//   - with the subject set to BACKWARD, check must print a reason after
//     "under BACKWARD", never an empty one.
func TestCompatMessagesApicurio(t *testing.T) {
	t.Parallel()
	ap := apicurio.Need(t)
	f := newFixture(t, "")
	subject := f.topic("Order") + "-com.example.orders.OrderCreated"
	b, err := os.ReadFile(filepath.Join(schemaDir, "OrderCreated.avsc"))
	if err != nil {
		t.Fatal(err)
	}
	post := func(method, path string, body any) {
		t.Helper()
		js, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, ap.URL()+path, bytes.NewReader(js))
		req.Header.Set("Content-Type", "application/vnd.schemaregistry.v1+json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: %s", method, path, res.Status)
		}
	}
	post(http.MethodPost, "/subjects/"+subject+"/versions", map[string]string{"schema": string(b)})
	dir := incompatibleSchemaDir(t) // adds the required field "warehouse"

	code, out := runCommand([]string{"schemas", "check", "--schema-registry-url", ap.URL(), "--schemas-dir", dir, "--topic-template", f.topicPrefix + ".{aggregate_type}"})
	if code != exitFailed || !strings.Contains(out, "FAIL  "+subject) {
		t.Fatalf("schemas check = %d, want %d and a FAIL for %s:\n%s", code, exitFailed, subject, out)
	}
	for _, bad := range []string{"incompatible under NONE", "gave no reason\n"} {
		if strings.Contains(out, bad) {
			t.Errorf("schemas check prints %q:\n%s", bad, out)
		}
	}
	for _, want := range []string{"the registry reports level NONE", "as a BACKWARD change: new field warehouse has no default"} {
		if !strings.Contains(out, want) {
			t.Errorf("schemas check lacks %q:\n%s", want, out)
		}
	}

	post(http.MethodPut, "/config/"+subject, map[string]string{"compatibility": "BACKWARD"})
	args := f.args()
	setFlag(args, "--schemas-dir", dir)
	setFlag(args, "--schema-registry-url", ap.URL())
	code, out = runCommand(commandArgs("check", args))
	want := "FAIL  schema OrderCreated (" + filepath.Join(dir, "OrderCreated.avsc") + ") is incompatible with subject " + subject +
		" under BACKWARD: the registry gave no reason; against the latest version (version 1), as a BACKWARD change: new field warehouse has no default"
	if code != exitFailed || !strings.Contains(out, want) {
		t.Errorf("check = %d, want %d and\n%s\n---\n%s", code, exitFailed, want, out)
	}
	if strings.Contains(out, "under BACKWARD: ;") {
		t.Errorf("check prints an empty reason:\n%s", out)
	}
}
