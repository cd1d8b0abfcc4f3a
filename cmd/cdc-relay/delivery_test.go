package main

// The delivery mode as a subtest parameter: a test of a feature (logical
// messages, several tables, the DLQ, the key and value formats, failover
// slots) runs at-least-once and under --delivery exactly-once, where what
// it reads comes from a read_committed consumer and every event must
// arrive exactly once, in order per aggregate.

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// delivery is one --delivery mode.
type delivery struct {
	name string   // the --delivery value, the subtest's name
	args []string // the relay flags of the mode
}

// deliveries are the two modes, at-least-once (the default) first.
var deliveries = []delivery{{"at-least-once", nil}, {"exactly-once", exactlyOnce}}

// once reports whether d is exactly-once.
func (d delivery) once() bool { return d.name == "exactly-once" }

// with returns args followed by the mode's flags.
func (d delivery) with(args []string) []string {
	return append(append([]string(nil), args...), d.args...)
}

// consume starts the harness's consumer for d: read_committed under
// exactly-once, which is what an exactly-once consumer reads, so that
// nothing of an open or aborted Kafka transaction counts.
func (d delivery) consume(t *testing.T, topicRegex string, opts ...kgo.Opt) *consumer {
	t.Helper()
	return consume(t, topicRegex, d.consumerOpts(opts)...)
}

// consumeFrom is consume from f's broker.
func (d delivery) consumeFrom(f *fixture, topicRegex string, opts ...kgo.Opt) *consumer {
	f.t.Helper()
	return f.consume(topicRegex, d.consumerOpts(opts)...)
}

// consumerOpts are opts and, under exactly-once, read_committed.
func (d delivery) consumerOpts(opts []kgo.Opt) []kgo.Opt {
	if d.once() {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	return opts
}

// eachDelivery runs fn as one subtest per delivery mode; in parallel when
// parallel is set (only for a test that changes nothing shared, such as
// the database's settings or the broker).
func eachDelivery(t *testing.T, parallel bool, fn func(t *testing.T, d delivery)) {
	t.Helper()
	for _, d := range deliveries {
		t.Run(d.name, func(t *testing.T) {
			if parallel {
				t.Parallel()
			}
			fn(t, d)
		})
	}
}

// checkOnce fails the test unless recs (what a read_committed consumer
// read) hold each id of want (by the id header) exactly once and no other
// id, and the records of each aggregate (key) on each topic came in want's
// order (want lists the ids in commit order). Records without a key (dead
// letters of logical messages) have no order to keep: Kafka spreads them
// over the partitions.
func checkOnce(t *testing.T, recs []record, want []string) {
	t.Helper()
	pos := make(map[string]int, len(want))
	for i, id := range want {
		pos[id] = i
	}
	recs = append([]record(nil), recs...)
	sortByLog(recs)
	seen := map[string]int{}
	last := map[string]int{} // topic and key → position in want of the newest record
	var problems []string
	for _, r := range recs {
		id := r.Headers["id"]
		seen[id]++
		p, ok := pos[id]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("record %s[%d]@%d with id %q, which is none of the events", r.Topic, r.Partition, r.Offset, id))
			continue
		case seen[id] > 1:
			problems = append(problems, fmt.Sprintf("event %s read %d times (%s[%d]@%d)", id, seen[id], r.Topic, r.Partition, r.Offset))
			continue
		}
		if r.Key == "" {
			continue
		}
		k := r.Topic + "\x00" + r.Key
		if q, ok := last[k]; ok && p < q {
			problems = append(problems, fmt.Sprintf("aggregate %q on %s: event %s after event %s", r.Key, r.Topic, id, want[q]))
		}
		last[k] = max(last[k], p)
	}
	for _, id := range want {
		if seen[id] == 0 {
			problems = append(problems, fmt.Sprintf("event %s lost", id))
		}
	}
	for i, p := range problems {
		if i == 10 {
			t.Errorf("... and %d more", len(problems)-i)
			break
		}
		t.Error(p)
	}
	if len(problems) > 0 {
		t.Fatalf("read_committed: %d records for %d events, not exactly once", len(recs), len(want))
	}
}

// idStrings are ids as the id header carries them.
func idStrings(ids []int64) []string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	return s
}
