package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// registryVersions returns the subjects of the registry at base that start
// with prefix, each with its versions.
func registryVersions(t *testing.T, base, prefix string) map[string][]int {
	t.Helper()
	get := func(path string, out any) {
		t.Helper()
		resp, err := http.Get(strings.TrimSuffix(base, "/") + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s", path, resp.Status)
		}
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
	}
	var subjects []string
	get("/subjects", &subjects)
	out := map[string][]int{}
	for _, s := range subjects {
		if !strings.HasPrefix(s, prefix) {
			continue
		}
		var versions []int
		get("/subjects/"+url.PathEscape(s)+"/versions", &versions)
		slices.Sort(versions)
		out[s] = versions
	}
	return out
}

// TestDLQRedriveDryRunRegistersNothing: dlq redrive --dry-run, with a
// schema for a dead letter's event type that no subject holds yet and a
// compatible change of a schema whose subject exists, registers nothing:
// afterwards the registry has the same subjects with the same versions.
// The redrive that follows registers both (what the dry run only looked
// up).
func TestDLQRedriveDryRunRegistersNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	r := startRelay(t, f.args())
	r.waitStreaming(60 * time.Second)
	conn := f.connect()
	agg1, agg2 := uuidFor(7301), uuidFor(7302)
	ids, err := f.insertTx(context.Background(), conn, []event{
		{"Order", agg1, "OrderShipped", fmt.Sprintf(`{"order_id": %q, "carrier": "dhl"}`, agg1), ""},
		{"Order", agg2, "OrderCreated", orderCreated(agg2, 3), ""},
	})
	if err != nil {
		t.Fatal(err)
	}
	shipped := strconv.FormatInt(ids[0], 10)
	recs := c.waitIDs(90*time.Second, ids)
	if code := r.terminate(); code != 0 {
		t.Fatalf("run exited %d", code)
	}
	if l := inTopic(recs, f.dlq, shipped); len(l) != 1 || l[0].Headers["error_kind"] != "no_schema" {
		t.Fatalf("dead letter of %s: %+v", shipped, l)
	}

	createdSubject := f.topic("Order") + "-com.example.orders.OrderCreated"
	shippedSubject := f.topic("Order") + "-com.example.orders.OrderShipped"
	before := registryVersions(t, f.reg.URL(), f.topicPrefix)
	if len(before[createdSubject]) != 1 || before[shippedSubject] != nil {
		t.Fatalf("registry before the dry run: %v; want %s with one version and no %s", before, createdSubject, shippedSubject)
	}
	evolved, err := os.ReadFile(filepath.Join(schemaDir, "evolution", "compatible", "OrderCreated.avsc"))
	if err != nil {
		t.Fatal(err)
	}
	fixed := schemasPlus(t, map[string]string{"OrderShipped.avsc": orderShipped, "OrderCreated.avsc": string(evolved)})

	code, out, _ := runReplay(t, nil, f.dlqArgs("redrive", fixed, "--dry-run"))
	if code != 0 || len(lines(out, "would be redriven id="+shipped+" topic="+f.topic("Order")+" ")) != 1 ||
		!strings.Contains(out, "dry run: would have: redriven 1, still failing 0, skipped 0") {
		t.Fatalf("dry run: exit %d, want 0 with the letter of %s would be redriven", code, shipped)
	}
	after := registryVersions(t, f.reg.URL(), f.topicPrefix)
	for _, s := range slices.Sorted(maps.Keys(after)) {
		if _, existed := before[s]; !existed {
			t.Errorf("the dry run registered subject %s (versions %v)", s, after[s])
		} else if !slices.Equal(before[s], after[s]) {
			t.Errorf("the dry run added a version to subject %s: versions %v, before %v", s, after[s], before[s])
		}
	}

	// The redrive registers what the dry run looked up.
	code, out, _ = runReplay(t, nil, f.dlqArgs("redrive", fixed))
	if code != 0 || !strings.Contains(out, "redrive: redriven 1, still failing 0, skipped 0") {
		t.Fatalf("redrive: exit %d", code)
	}
	registered := registryVersions(t, f.reg.URL(), f.topicPrefix)
	if len(registered[shippedSubject]) != 1 || len(registered[createdSubject]) != 2 {
		t.Errorf("registry after the redrive: %v; want %s registered and a second version of %s", registered, shippedSubject, createdSubject)
	}
}
