package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDLQRedriveFilters: a letter that --id, --event-type, --kind or
// --since leaves out is appended to the DLQ again unchanged (same key,
// value and headers, redrive_attempts not raised) and counted as skipped,
// so that a later run without the filter still meets it; the letter the
// filters let through is redriven once.
func TestDLQRedriveFilters(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	r := startRelay(t, f.args())
	r.waitStreaming(60 * time.Second)
	conn := f.connect()
	agg1, agg2, agg3 := uuidFor(7401), uuidFor(7402), uuidFor(7403)
	ids, err := f.insertTx(context.Background(), conn, []event{
		{"Order", agg1, "OrderShipped", fmt.Sprintf(`{"order_id": %q, "carrier": "dhl"}`, agg1), ""},
		{"Order", agg2, "OrderShipped", fmt.Sprintf(`{"order_id": %q, "carrier": "ups"}`, agg2), ""},
		{"Order", agg3, "OrderCreated", strings.Replace(orderCreated(agg3, 2), `"amount_cents": 2`, `"amount_cents": "lots"`, 1), ""},
	})
	if err != nil {
		t.Fatal(err)
	}
	a, b, m := strconv.FormatInt(ids[0], 10), strconv.FormatInt(ids[1], 10), strconv.FormatInt(ids[2], 10)
	recs := c.waitIDs(90*time.Second, ids)
	if code := r.terminate(); code != 0 {
		t.Fatalf("run exited %d", code)
	}
	orig := map[string]record{}
	for _, id := range []string{a, b, m} {
		l := inTopic(recs, f.dlq, id)
		if len(l) != 1 {
			t.Fatalf("dead letters of %s: %+v", id, l)
		}
		orig[id] = l[0]
	}
	fixed := schemasPlus(t, map[string]string{"OrderShipped.avsc": orderShipped})

	// --event-type and --id let only a through.
	code, out, _ := runReplay(t, nil, f.dlqArgs("redrive", fixed, "--event-type", "OrderShipped", "--id", a))
	if code != 0 || len(lines(out, "redriven id="+a+" ")) != 1 ||
		len(lines(out, "skipped id="+b+" ")) != 1 || !strings.Contains(out, "left out by --id, re-appended unchanged") ||
		len(lines(out, "skipped id="+m+" ")) != 1 ||
		!strings.Contains(out, "redrive: redriven 1, still failing 0, skipped 2 (2 left out by the filters and re-appended, 0 that cannot be built again)") {
		t.Fatalf("redrive --event-type OrderShipped --id %s: exit %d, want 0 with %s redriven and the others skipped", a, code, a)
	}
	same := func(when string, n int) {
		t.Helper()
		waitFor(t, 60*time.Second, when, func() bool {
			recs = c.records()
			return len(inTopic(recs, f.dlq, b)) >= n && len(inTopic(recs, f.dlq, m)) >= n
		})
		for _, id := range []string{b, m} {
			l := inTopic(recs, f.dlq, id)
			if len(l) != n {
				t.Fatalf("%s: %d letters of %s in the DLQ, want %d", when, len(l), id, n)
			}
			got, want := l[n-1], orig[id]
			if got.Key != want.Key || string(got.Value) != string(want.Value) || fmt.Sprint(got.Headers) != fmt.Sprint(want.Headers) {
				t.Errorf("%s: the copy of %s differs from the letter:\n got  key %q headers %v\n want key %q headers %v", when, id, got.Key, got.Headers, want.Key, want.Headers)
			}
		}
	}
	same("the letters left out re-appended", 2)

	// --kind leaves b (no_schema) out; m (schema_mismatch) still fails.
	code, out, _ = runReplay(t, nil, f.dlqArgs("redrive", fixed, "--kind", "schema_mismatch"))
	if code != 1 || !strings.Contains(out, "left out by --kind, re-appended unchanged") ||
		len(lines(out, "still failing id="+m+" kind=schema_mismatch redrive_attempts=1")) != 1 ||
		!strings.Contains(out, "redrive: redriven 0, still failing 1, skipped 1 (1 left out by the filters") {
		t.Fatalf("redrive --kind schema_mismatch: exit %d, want 1 (a letter still fails) with %s left out", code, b)
	}
	waitFor(t, 60*time.Second, "the letters of the --kind run", func() bool {
		recs = c.records()
		return len(inTopic(recs, f.dlq, b)) >= 3 && len(inTopic(recs, f.dlq, m)) >= 3
	})
	if l := inTopic(recs, f.dlq, b); len(l) != 3 || l[2].Headers["redrive_attempts"] != orig[b].Headers["redrive_attempts"] {
		t.Errorf("the copy of %s left out by --kind: %+v", b, l)
	}

	// --since after every commit leaves both out.
	code, out, _ = runReplay(t, nil, f.dlqArgs("redrive", fixed, "--since", "2099-01-01T00:00:00Z"))
	if code != 0 || strings.Count(out, "left out by --since, re-appended unchanged") != 2 ||
		!strings.Contains(out, "redrive: redriven 0, still failing 0, skipped 2 (2 left out by the filters") {
		t.Fatalf("redrive --since 2099: exit %d, want 0 with both letters left out", code)
	}
	waitFor(t, 60*time.Second, "the letters of the --since run", func() bool {
		recs = c.records()
		return len(inTopic(recs, f.dlq, b)) >= 4 && len(inTopic(recs, f.dlq, m)) >= 4
	})
	// The Order topic was created by the first redrive: the consumer's
	// pattern subscription finds it on a later metadata refresh.
	waitFor(t, 60*time.Second, "the redriven event in its topic", func() bool {
		recs = c.records()
		return len(inTopic(recs, f.topic("Order"), a)) > 0
	})
	if n := len(inTopic(recs, f.topic("Order"), a)); n != 1 {
		t.Errorf("%s is in its topic %d times, want once", a, n)
	}
	for _, id := range []string{b, m} {
		if n := len(inTopic(recs, f.topic("Order"), id)); n != 0 {
			t.Errorf("%s, never let through, is in its topic %d times", id, n)
		}
	}
}
