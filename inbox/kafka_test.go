package inbox

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/internal/tcpproxy"
)

// TestReadCommitted: records of a Kafka transaction that was aborted (a
// franz-go transactional producer against the real broker, EndTransaction
// with TryAbort) never reach the handler of a default consumer
// (read_committed); those of a committed transaction and of a plain
// producer do. A consumer with ReadUncommitted sees the aborted ones too.
func TestReadCommitted(t *testing.T) {
	url := newDB(t)
	execSQL(t, url, "CREATE TABLE effects (consumer text, event_id text)")
	topic := "rc" + suffix()
	createTopic(t, topic, 1)
	recs := orderRecords(t, topic, 9, func(int) string { return "k" })
	kr := func(r record) *kgo.Record {
		out := &kgo.Record{Topic: topic, Key: []byte(r.key), Value: r.value, Partition: 0}
		for k, v := range r.headers {
			out.Headers = append(out.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
		}
		return out
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	txp := kafkaClient(t, kgo.TransactionalID("inbox-test-"+suffix()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	inTx := func(rs []record, end kgo.TransactionEndTry) {
		t.Helper()
		if err := txp.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if err := txp.ProduceSync(ctx, kr(r)).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := txp.EndTransaction(ctx, end); err != nil {
			t.Fatal(err)
		}
	}
	inTx(recs[0:4], kgo.TryAbort)  // id-0..3: aborted
	inTx(recs[4:7], kgo.TryCommit) // id-4..6: committed
	produce(t, topic, recs[7:8])   // id-7: no transaction
	inTx(recs[8:9], kgo.TryAbort)  // id-8: aborted
	handler := func(name string) Handler[map[string]any] {
		return func(ctx context.Context, tx pgx.Tx, ev *Event[map[string]any]) error {
			_, err := tx.Exec(ctx, "INSERT INTO effects VALUES ($1, $2)", name, ev.ID)
			return err
		}
	}
	committedCfg := baseConfig(t, url, topic, handler("committed"))
	uncommittedCfg := baseConfig(t, url, topic, handler("uncommitted"))
	uncommittedCfg.ReadUncommitted = true
	r := map[string]*running[map[string]any]{
		committedCfg.Consumer:   runConsumer(t, committedCfg),
		uncommittedCfg.Consumer: runConsumer(t, uncommittedCfg),
	}
	// The end offset counts the records and the three commit/abort
	// markers: 12. Both consumers get past all of them.
	end := endOffsets(t, topic, 1)
	waitFor(t, 90*time.Second, "both consumers at the end", func() bool {
		return committed(t, committedCfg.Consumer, topic)[0] >= end-1 && committed(t, uncommittedCfg.Consumer, topic)[0] >= end-1
	})
	ids := func(consumer string) string {
		conn, err := pgx.Connect(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		var s string
		if err := conn.QueryRow(context.Background(), "SELECT coalesce(string_agg(event_id, ',' ORDER BY event_id), '') FROM effects WHERE consumer = $1", consumer).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	waitFor(t, 60*time.Second, "the committed events applied", func() bool { return len(strings.Split(ids("committed"), ",")) >= 4 })
	// Past the end (with its markers) and the four committed events: had an
	// aborted record come through, it would be among them.
	if got := ids("committed"); got != "id-4,id-5,id-6,id-7" {
		t.Errorf("read_committed consumer applied %s, want id-4..id-7 (no aborted record)", got)
	}
	waitFor(t, 60*time.Second, "every record applied by the read_uncommitted consumer", func() bool {
		return ids("uncommitted") == "id-0,id-1,id-2,id-3,id-4,id-5,id-6,id-7,id-8"
	})
	// The three transaction markers come as records (their offsets must be
	// committed past); the consumer hides them from the handler in both
	// modes, so none is dead-lettered.
	for _, cfg := range []Config[map[string]any]{committedCfg, uncommittedCfg} {
		if n := r[cfg.Consumer].c.Stats().DeadLettered; n != 0 {
			t.Errorf("%s dead-lettered %d records: the markers must not reach the DLQ", cfg.Consumer, n)
		}
	}
}

// TestRegistryOutage: the registry becomes unreachable for 15 s while
// events flow (a proxy in front of it refuses every connection), and new
// records need a schema the consumer has not fetched yet. Nothing is
// dead-lettered or applied out of turn meanwhile; afterwards every event is
// applied exactly once.
func TestRegistryOutage(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	execSQL(t, db, "CREATE TABLE effects (event_id text)")
	topic := "ro" + suffix()
	createTopic(t, topic, 3)
	reg, err := url.Parse(registry.URL())
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := tcpproxy.New(reg.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	created := registerSchema(t, topic+"-value", "OrderCreated")
	cancelled := registerSchema(t, topic+"-cancel-value", "OrderCancelled")
	rec := func(i int, cancel bool) record {
		key := uuidN(i % 20)
		h := map[string]string{"id": fmt.Sprintf("id-%d", i), "event_type": "OrderCreated"}
		v := avroValue(t, created, orderCreated(key, "c-1", int64(i)))
		if cancel {
			h["event_type"] = "OrderCancelled"
			v = avroValue(t, cancelled, map[string]any{"order_id": key, "customer_id": "c-1", "reason": "CUSTOMER_REQUEST",
				"amount_cents": int64(i), "currency": "EUR", "cancelled_at": time.UnixMilli(1700000000000)})
		}
		return record{key: key, value: v, headers: h, partition: int32(i % 20 % 3)}
	}
	var first []record
	for i := range 100 {
		first = append(first, rec(i, false))
	}
	produce(t, topic, first)
	cfg := baseConfig(t, db, topic, func(ctx context.Context, tx pgx.Tx, ev *Event[map[string]any]) error {
		_, err := tx.Exec(ctx, "INSERT INTO effects VALUES ($1)", ev.ID)
		return err
	})
	cfg.RegistryURL = "http://" + proxy.Addr()
	r := runConsumer(t, cfg)
	waitFor(t, 90*time.Second, "the first 100 applied", func() bool { return r.c.Stats().Processed == 100 })

	proxy.SetTarget("127.0.0.1:1") // nothing listens there: every connection is refused
	proxy.CutAll()
	var second []record
	for i := 100; i < 300; i++ {
		second = append(second, rec(i, i%2 == 0)) // half need the schema not fetched yet
	}
	produce(t, topic, second)
	outage := time.Now().Add(15 * time.Second)
	for time.Now().Before(outage) { // for the whole outage: nothing lost, nothing dead-lettered
		if st := r.c.Stats(); st.DeadLettered != 0 {
			t.Fatalf("%d events dead-lettered during the registry outage", st.DeadLettered)
		}
		waitFor(t, 10*time.Second, "a poll", func() bool { return true })
		select {
		case err := <-r.done:
			t.Fatalf("the consumer stopped during the outage: %v", err)
		case <-time.After(250 * time.Millisecond):
		}
	}
	blocked := r.c.Stats().Processed
	proxy.SetTarget(reg.Host)
	waitFor(t, 120*time.Second, "every event applied", func() bool {
		n, _ := queryInt(db, "SELECT count(*) FROM effects")
		return n >= 300
	})
	waitFor(t, 60*time.Second, "every offset committed", func() bool {
		c := committed(t, cfg.Consumer, topic)
		return c[0]+c[1]+c[2] == 300
	})
	if n := mustInt(t, db, "SELECT count(*) FROM effects"); n != 300 {
		t.Errorf("%d effects, want 300", n)
	}
	if n := mustInt(t, db, "SELECT count(DISTINCT event_id) FROM effects"); n != 300 {
		t.Errorf("%d distinct events applied, want 300", n)
	}
	st := r.c.Stats()
	t.Logf("%d events applied during the outage (schema cached), stats %+v", blocked-100, st)
	if st.DeadLettered != 0 || st.Processed != 300 {
		t.Errorf("stats = %+v, want 300 processed and nothing dead-lettered", st)
	}
	if blocked >= 300 {
		t.Error("every event was applied during the outage; the registry was not needed")
	}
}

// TestRedrive: five events fail and go to the consumer's DLQ; the handler
// is fixed for four of them; Redrive applies each of the four once, and the
// fifth stays in the DLQ. A second Redrive applies nothing twice. Nothing
// is re-published to the source topic.
func TestRedrive(t *testing.T) {
	url := newDB(t)
	execSQL(t, url, "CREATE TABLE effects (event_id text)")
	topic := "rd" + suffix()
	createTopic(t, topic, 1)
	produce(t, topic, orderRecords(t, topic, 8, func(i int) string { return fmt.Sprintf("k%d", i) }))
	var fixed atomic.Bool
	cfg := baseConfig(t, url, topic, func(ctx context.Context, tx pgx.Tx, ev *Event[map[string]any]) error {
		if _, err := tx.Exec(ctx, "INSERT INTO effects VALUES ($1)", ev.ID); err != nil {
			return err
		}
		switch {
		case ev.ID == "id-7":
			return errors.New("still broken")
		case ev.ID >= "id-3" && !fixed.Load():
			return errors.New("broken")
		}
		return nil
	})
	cfg.MaxAttempts = 1
	r := runConsumer(t, cfg)
	waitFor(t, 90*time.Second, "every offset committed", func() bool { return committed(t, cfg.Consumer, topic)[0] == 8 })
	readAll(t, cfg.DLQTopic, 5, 30*time.Second)
	if n := mustInt(t, url, "SELECT count(*) FROM effects"); n != 3 {
		t.Fatalf("%d effects before the redrive, want 3", n)
	}
	fixed.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var skipped []string
	st, err := r.c.Redrive(ctx, func(l Letter) bool {
		if l.ID == "id-6" {
			skipped = append(skipped, l.ID)
			return false
		}
		if l.Topic != topic || !strings.HasPrefix(l.Error, ReasonHandler) {
			t.Errorf("letter %+v: want its source topic and the handler's error", l)
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.Read != 5 || st.Applied != 3 || st.Failed != 1 || st.Skipped != 1 || st.Duplicates != 0 {
		t.Errorf("first Redrive: %+v, want 5 read, 3 applied, 1 failed, 1 skipped", st)
	}
	st, err = r.c.Redrive(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Read != 5 || st.Applied != 1 || st.Duplicates != 3 || st.Failed != 1 {
		t.Errorf("second Redrive: %+v, want 5 read, 1 applied (the one skipped before), 3 duplicates, 1 failed", st)
	}
	if n := mustInt(t, url, "SELECT count(*) FROM effects"); n != 7 {
		t.Errorf("%d effects, want 7 (every event but id-7, once)", n)
	}
	if n := mustInt(t, url, "SELECT count(*) FROM (SELECT event_id FROM effects GROUP BY 1 HAVING count(*) > 1) d"); n != 0 {
		t.Errorf("%d events applied twice", n)
	}
	if n := endOffsets(t, topic, 1); n != 8 {
		t.Errorf("the source topic holds %d records, want the 8 produced: Redrive must not re-publish", n)
	}
	if n := endOffsets(t, cfg.DLQTopic, 3); n != 5 {
		t.Errorf("the DLQ holds %d records, want the 5 letters: a failed redrive stays, nothing is added", n)
	}
}
