package inbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/relaytest"
	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib"
)

// orderRecords returns n OrderCreated records with ids id-0.. and keys
// key(i), registering the schema under topic's subject.
func orderRecords(t *testing.T, topic string, n int, key func(i int) string) []record {
	t.Helper()
	s := registerSchema(t, topic+"-value", "OrderCreated")
	recs := make([]record, n)
	for i := range recs {
		recs[i] = record{key: key(i), value: avroValue(t, s, orderCreated(uuidN(i), "c-1", int64(i))),
			headers: map[string]string{"id": fmt.Sprintf("id-%d", i), "event_type": "OrderCreated", "aggregate_type": "Order"}}
	}
	return recs
}

// TestTransientErrorsRetried: a handler that hits a real serialization
// failure (40001, raised by PostgreSQL) three times and then succeeds is
// applied once and nothing goes to the DLQ, though MaxAttempts is 2: the
// failures did not count. An error marked with Transient is retried the
// same way. One that stays "transient" is retried only for
// TransientTimeout; after it its failures count and it is dead-lettered.
func TestTransientErrorsRetried(t *testing.T) {
	url := newDB(t)
	execSQL(t, url, "CREATE TABLE effects (event_id text, attempt int)")
	topic := "tr" + suffix()
	createTopic(t, topic, 1)
	produce(t, topic, orderRecords(t, topic, 3, func(int) string { return "k" }))
	var calls sync.Map // id → *atomic.Int64
	cfg := baseConfig(t, url, topic, func(ctx context.Context, tx pgx.Tx, ev *Event[map[string]any]) error {
		n, _ := calls.LoadOrStore(ev.ID, new(atomic.Int64))
		call := n.(*atomic.Int64).Add(1)
		if _, err := tx.Exec(ctx, "INSERT INTO effects VALUES ($1, $2)", ev.ID, ev.Attempt); err != nil {
			return err
		}
		switch {
		case ev.ID == "id-0" && call <= 3:
			_, err := tx.Exec(ctx, "DO $$ BEGIN RAISE EXCEPTION 'could not serialize' USING ERRCODE = 'serialization_failure'; END $$")
			return err
		case ev.ID == "id-1" && call <= 2:
			return Transient(errors.New("downstream answered 503"))
		case ev.ID == "id-2":
			return Transient(errors.New("always 503"))
		}
		return nil
	})
	cfg.MaxAttempts = 2
	cfg.TransientTimeout = 500 * time.Millisecond
	r := runConsumer(t, cfg)
	waitFor(t, 90*time.Second, "every offset committed", func() bool { return committed(t, cfg.Consumer, topic)[0] == 3 })

	for id, want := range map[string]int64{"id-0": 1, "id-1": 1, "id-2": 0} {
		if n := mustInt(t, url, "SELECT count(*) FROM effects WHERE event_id = $1", id); n != want {
			t.Errorf("%s has %d effects, want %d", id, n, want)
		}
	}
	if n := mustInt(t, url, "SELECT attempt FROM effects WHERE event_id = 'id-0'"); n != 1 {
		t.Errorf("id-0 applied at attempt %d, want 1: serialization failures must not count", n)
	}
	dl := readAll(t, cfg.DLQTopic, 1, 30*time.Second)
	if len(dl) != 1 || header(dl[0], "id") != "id-2" || header(dl[0], HeaderError) != "handler_failed: always 503" {
		t.Fatalf("dead letters %d, first id %q error %q; want only id-2", len(dl), header(dl[0], "id"), header(dl[0], HeaderError))
	}
	st := r.c.Stats()
	if st.Processed != 2 || st.DeadLettered != 1 || st.TransientRetries < 5 {
		t.Errorf("stats = %+v, want 2 processed, 1 dead-lettered, at least 5 transient retries", st)
	}
}

// TestDeadlockRetried: two workers each lock one row and then wait for the
// other's: PostgreSQL breaks the deadlock (40P01) by failing one of them.
// With MaxAttempts 1 the victim is retried, not dead-lettered, and each
// event is applied once.
func TestDeadlockRetried(t *testing.T) {
	url := newDB(t)
	execSQL(t, url, "CREATE TABLE counters (id text PRIMARY KEY, n int NOT NULL); INSERT INTO counters VALUES ('a', 0), ('b', 0); CREATE TABLE effects (event_id text)")
	topic := "dl" + suffix()
	createTopic(t, topic, 1)
	// Two keys on different workers of 2.
	worker := func(key string) uint32 { h := fnv.New32a(); h.Write([]byte(key)); return h.Sum32() % 2 }
	keys := []string{"k0"}
	for i := 1; len(keys) < 2; i++ {
		if k := fmt.Sprintf("k%d", i); worker(k) != worker(keys[0]) {
			keys = append(keys, k)
		}
	}
	produce(t, topic, orderRecords(t, topic, 2, func(i int) string { return keys[i] }))
	locked := map[string]chan struct{}{"id-0": make(chan struct{}), "id-1": make(chan struct{})}
	var once [2]sync.Once
	cfg := baseConfig(t, url, topic, func(ctx context.Context, tx pgx.Tx, ev *Event[map[string]any]) error {
		first, second, other, i := "a", "b", "id-1", 0
		if ev.ID == "id-1" {
			first, second, other, i = "b", "a", "id-0", 1
		}
		if _, err := tx.Exec(ctx, "UPDATE counters SET n = n + 1 WHERE id = $1", first); err != nil {
			return err
		}
		waited := false
		once[i].Do(func() {
			close(locked[ev.ID])
			waited = true
		})
		if waited { // first attempt: wait until the other holds its row
			select {
			case <-locked[other]:
			case <-time.After(30 * time.Second):
				return errors.New("the other worker never took its lock")
			}
		}
		if _, err := tx.Exec(ctx, "UPDATE counters SET n = n + 1 WHERE id = $1", second); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "INSERT INTO effects VALUES ($1)", ev.ID)
		return err
	})
	cfg.MaxAttempts, cfg.Workers = 1, 2
	r := runConsumer(t, cfg)
	waitFor(t, 90*time.Second, "every offset committed", func() bool { return committed(t, cfg.Consumer, topic)[0] == 2 })
	if n := mustInt(t, url, "SELECT count(*) FROM effects"); n != 2 {
		t.Errorf("%d effects, want 2", n)
	}
	if n := mustInt(t, url, "SELECT count(DISTINCT event_id) FROM effects"); n != 2 {
		t.Errorf("%d distinct events applied, want 2", n)
	}
	if n := mustInt(t, url, "SELECT sum(n) FROM counters WHERE n = 2"); n != 4 {
		t.Errorf("counters sum to %d over rows at 2, want both rows at 2", n)
	}
	st := r.c.Stats()
	if st.DeadLettered != 0 || st.TransientRetries < 1 || st.Processed != 2 {
		t.Errorf("stats = %+v, want 2 processed, a transient retry (the deadlock), nothing dead-lettered", st)
	}
}

// TestBatchPoison: with BatchSize 100 a poison event in the middle of 300
// rolls its batch back; the batch's events are then retried one by one:
// every other event is applied once, and the poison event alone goes to the
// DLQ. Batches did commit.
func TestBatchPoison(t *testing.T) {
	url := newDB(t)
	execSQL(t, url, "CREATE TABLE effects (event_id text)")
	topic := "bp" + suffix()
	createTopic(t, topic, 1)
	const n = 300
	produce(t, topic, orderRecords(t, topic, n, func(i int) string { return fmt.Sprintf("k%d", i%7) }))
	cfg := baseConfig(t, url, topic, func(ctx context.Context, tx pgx.Tx, ev *Event[map[string]any]) error {
		if _, err := tx.Exec(ctx, "INSERT INTO effects VALUES ($1)", ev.ID); err != nil {
			return err
		}
		if ev.ID == "id-150" {
			return errors.New("cannot apply this event")
		}
		return nil
	})
	cfg.BatchSize, cfg.Workers, cfg.MaxAttempts = 100, 1, 2
	logs := &relaytest.LogBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil)) // INFO and up
	r := runConsumer(t, cfg)
	waitFor(t, 120*time.Second, "every offset committed", func() bool { return committed(t, cfg.Consumer, topic)[0] == n })
	if got := mustInt(t, url, "SELECT count(*) FROM effects"); got != n-1 {
		t.Errorf("%d effects, want %d", got, n-1)
	}
	if got := mustInt(t, url, "SELECT count(DISTINCT event_id) FROM effects WHERE event_id <> 'id-150'"); got != n-1 {
		t.Errorf("%d distinct events applied, want %d", got, n-1)
	}
	if got := mustInt(t, url, "SELECT count(*) FROM processed_messages WHERE consumer = $1", cfg.Consumer); got != n-1 {
		t.Errorf("%d marks, want %d", got, n-1)
	}
	dl := readAll(t, cfg.DLQTopic, 1, 30*time.Second)
	if len(dl) != 1 || header(dl[0], "id") != "id-150" {
		t.Errorf("%d dead letters, first %q; want id-150 alone", len(dl), header(dl[0], "id"))
	}
	if e := endOffsets(t, cfg.DLQTopic, 3); e != 1 { // auto-created with 3 partitions
		t.Errorf("the DLQ holds %d records, want 1", e)
	}
	st := r.c.Stats()
	if st.Batches < 1 || st.Processed != n-1 || st.DeadLettered != 1 {
		t.Errorf("stats = %+v, want batches, %d processed, 1 dead-lettered", st, n-1)
	}
	// The group join and the partitions assigned are logged at INFO.
	out := logs.String()
	for _, want := range []string{`level=INFO msg="kafka reader: Joined group`, `level=INFO msg="kafka reader: subscribed to topics and partitions`} {
		if !strings.Contains(out, want) {
			t.Errorf("the consumer's log lacks %s", want)
		}
	}
}

// TestTxOptions: Config.TxOptions sets every event's transaction, with pgx
// and with database/sql (SQLDB, SQLHandler), in batches too: the handler
// sees the isolation level it asked for, and the mark INSERT ran first.
func TestTxOptions(t *testing.T) {
	url := newDB(t)
	execSQL(t, url, "CREATE TABLE effects (consumer text, event_id text, isolation text)")
	topic := "tx" + suffix()
	createTopic(t, topic, 1)
	produce(t, topic, orderRecords(t, topic, 20, func(i int) string { return fmt.Sprintf("k%d", i%3) }))
	const q = "INSERT INTO effects SELECT $1, $2, current_setting('transaction_isolation')"
	pgxCfg := baseConfig(t, url, topic, func(ctx context.Context, tx pgx.Tx, ev *Event[map[string]any]) error {
		_, err := tx.Exec(ctx, q, "pgx", ev.ID)
		return err
	})
	pgxCfg.TxOptions = pgx.TxOptions{IsoLevel: pgx.Serializable}
	pgxCfg.BatchSize = 10
	sqlCfg := baseConfig[map[string]any](t, url, topic, nil)
	sqlCfg.DB, sqlCfg.Handler = nil, nil
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	sqlCfg.SQLDB = db
	sqlCfg.SQLHandler = func(ctx context.Context, tx *sql.Tx, ev *Event[map[string]any]) error {
		_, err := tx.ExecContext(ctx, q, "sql", ev.ID)
		return err
	}
	sqlCfg.TxOptions = pgx.TxOptions{IsoLevel: pgx.RepeatableRead}
	runConsumer(t, pgxCfg)
	runConsumer(t, sqlCfg)
	waitFor(t, 90*time.Second, "both consumers done", func() bool {
		return committed(t, pgxCfg.Consumer, topic)[0] == 20 && committed(t, sqlCfg.Consumer, topic)[0] == 20
	})
	for consumer, want := range map[string]string{"pgx": "serializable", "sql": "repeatable read"} {
		if n := mustInt(t, url, "SELECT count(*) FROM effects WHERE consumer = $1 AND isolation = $2", consumer, want); n != 20 {
			t.Errorf("%s: %d effects ran at %s, want 20", consumer, n, want)
		}
		if n := mustInt(t, url, "SELECT count(DISTINCT event_id) FROM effects WHERE consumer = $1", consumer); n != 20 {
			t.Errorf("%s: %d distinct events applied, want 20", consumer, n)
		}
	}
	if n := mustInt(t, url, "SELECT count(*) FROM processed_messages WHERE consumer = $1", sqlCfg.Consumer); n != 20 {
		t.Errorf("database/sql consumer: %d marks, want 20", n)
	}
}
