package main

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/debeziumtest"
)

// TestRecordTimestampIsCommitTime: every record's Kafka timestamp is its
// transaction's commit time, the same on every delivery. The harness's
// PostgreSQL has no track_commit_timestamp, so each commit time is
// bracketed: at least clock_timestamp() read as the transaction's last
// statement, at most the client's clock once COMMIT returned (one
// machine, one clock). The relay starts only after the clock has moved
// well past the last commit, so an encode time falls outside every
// bracket; and each id is delivered twice, once more after a kill -9 (the
// same slot again, plus a second slot created with the first, which never
// confirms anything and so delivers every transaction a second time
// later), so a timestamp taken at delivery differs between the two.
func TestRecordTimestampIsCommitTime(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	f.exec(fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE public.%s WITH (publish = 'insert')", f.publication, f.table))
	second := f.slot + "_b"
	createSlots(t, f, f.slot, second)
	conn := connect(t)
	ctx := context.Background()

	// Five transactions of three rows, at least 20 ms apart, so that each
	// has its own commit time.
	type bracket struct{ lo, hi time.Time }
	txOf := map[string]bracket{}
	var ids []string
	var last time.Time
	for n := range 5 {
		waitFor(t, 10*time.Second, "the clock to move 20 ms", func() bool { return time.Since(last) >= 20*time.Millisecond })
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var txIDs []string
		for i := range 3 {
			var id int64
			if err := tx.QueryRow(ctx, fmt.Sprintf(`INSERT INTO public.%s (aggregate_type, aggregate_id, event_type, payload)
				VALUES ('Order', $1, 'OrderCreated', $2::jsonb) RETURNING id`, f.table), uuidFor(n*3+i), orderCreated(uuidFor(n*3+i), n)).Scan(&id); err != nil {
				t.Fatal(err)
			}
			txIDs = append(txIDs, strconv.FormatInt(id, 10))
		}
		var lo time.Time
		if err := tx.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&lo); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		last = time.Now()
		for _, id := range txIDs {
			txOf[id] = bracket{lo, last}
		}
		ids = append(ids, txIDs...)
	}
	const apart = 1500 * time.Millisecond
	waitFor(t, 10*time.Second, "the clock to move past the last commit", func() bool { return time.Since(last) > apart })

	reader := readTopics(t, "^"+f.topicPrefix+`\.`)
	r := startRelay(t, f.args())
	waitFor(t, 60*time.Second, "every id in Kafka", func() bool {
		failIfExited(t, r)
		return hasAll(recordsByID(reader.Records(), f.topicPrefix), ids)
	})
	r.kill()
	firstDone := time.Now()
	waitFor(t, 60*time.Second, "the slot to be released", func() bool { return !f.slotActive() })
	waitFor(t, 10*time.Second, "the clock to move past the first deliveries", func() bool { return time.Since(firstDone) > apart })

	// After the kill -9: the same slot again (it redelivers what it had
	// not confirmed) and the second slot (it redelivers everything).
	again := []*relay{startRelay(t, f.args()), startRelay(t, f.args("--slot", second))}
	var byIDs map[string][]debeziumtest.Record
	waitFor(t, 60*time.Second, "every id delivered twice", func() bool {
		failIfExited(t, again...)
		byIDs = recordsByID(reader.Records(), f.topicPrefix)
		for _, id := range ids {
			if len(byIDs[id]) < 2 {
				return false
			}
		}
		return true
	})
	for _, id := range ids {
		b := txOf[id]
		lo, hi := b.lo.Truncate(time.Millisecond), b.hi
		for i, rec := range byIDs[id] {
			ts := rec.Timestamp
			if ts.Before(lo) || ts.After(hi) {
				t.Errorf("id %s delivery %d: timestamp %s, outside its commit's bracket [%s, %s]",
					id, i+1, ts.Format(time.RFC3339Nano), lo.Format(time.RFC3339Nano), hi.Format(time.RFC3339Nano))
			}
			if !ts.Equal(byIDs[id][0].Timestamp) {
				t.Errorf("id %s: delivery %d has timestamp %s, delivery 1 %s", id, i+1, ts.Format(time.RFC3339Nano), byIDs[id][0].Timestamp.Format(time.RFC3339Nano))
			}
		}
	}
}
