package debeziumtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestWorkerResumes: a worker stopped with SIGTERM and started again on
// the same Dir resumes from its offsets file, writing the row committed
// while it was down and not the last row it had written before; a worker
// on a fresh Dir (no offsets) on the same slot writes that worker's last
// transaction again, as any successor on Debezium's slot does: Debezium
// confirms the commit LSN of the last transaction it wrote, which
// PostgreSQL sends again.
func TestWorkerResumes(t *testing.T) {
	pg, broker := services(t)
	ctx := context.Background()
	url, err := pg.CreateDatabase(ctx, "resume")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	if _, err := conn.Exec(ctx, `CREATE TABLE public.outbox (id bigserial PRIMARY KEY, aggregate_type text NOT NULL,
		aggregate_id text NOT NULL, event_type text NOT NULL, payload jsonb NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	insert := func(agg string) string {
		t.Helper()
		var id int64
		if err := conn.QueryRow(ctx, `INSERT INTO public.outbox (aggregate_type, aggregate_id, event_type, payload)
			VALUES ('Order', $1, 'Created', '{"n": 1}') RETURNING id`, agg).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(id)
	}
	reader, err := NewReader(broker.Addr(), `^resume\.`)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reader.Close)
	count := func(id string) int {
		n := 0
		for _, r := range reader.Records() {
			if v, _ := r.Header("id"); string(v) == id {
				n++
			}
		}
		return n
	}
	waitCount := func(w *Worker, id string, want int) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for count(id) < want {
			if err := w.Check(ctx, "resume"); err != nil {
				t.Fatal(err)
			}
			if time.Now().After(deadline) {
				t.Fatalf("row %s: %d records after 2m, want %d", id, count(id), want)
			}
			time.Sleep(100 * time.Millisecond) // polling interval
		}
	}
	c := Connector{Name: "resume", PGPort: pg.Port(), Database: "resume", KeyConverter: StringConverter,
		ValueConverter: JSONConverter, ExpandJSONPayload: true, TopicReplacement: "resume.${routedByValue}"}
	start := func(dir string) *Worker {
		t.Helper()
		w, err := Start(WorkerOptions{Broker: broker.Addr(), Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("Connect log (tail):\n%s", w.Output(40))
			}
			w.Close()
		})
		if err := w.AddConnector(ctx, c); err != nil {
			t.Fatal(err)
		}
		if err := w.WaitRunning(ctx, c.Name, 2*time.Minute); err != nil {
			t.Fatal(err)
		}
		return w
	}
	slotActive := func() bool {
		var active bool
		err := conn.QueryRow(ctx, "SELECT active FROM pg_replication_slots WHERE slot_name = 'debezium'").Scan(&active)
		return err == nil && active
	}
	waitSlot := func(active bool) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for slotActive() != active {
			if time.Now().After(deadline) {
				t.Fatalf("slot debezium active=%v after 1m, want %v", !active, active)
			}
			time.Sleep(50 * time.Millisecond) // polling interval
		}
	}

	dir := t.TempDir()
	w1 := start(dir)
	waitSlot(true) // the connector made slot debezium and dbz_publication
	a := insert("a")
	waitCount(w1, a, 1)
	if err := w1.Stop(time.Minute); err != nil {
		t.Fatal(err)
	}
	waitSlot(false)
	b := insert("b")

	w2 := start(dir)
	waitCount(w2, b, 1)
	last := insert("c")
	waitCount(w2, last, 1)
	if n := count(a); n != 1 {
		t.Errorf("row %s written %d times; the restarted worker should resume after it", a, n)
	}
	if err := w2.Stop(time.Minute); err != nil {
		t.Fatal(err)
	}
	waitSlot(false)

	w3 := start(t.TempDir())
	d := insert("d")
	waitCount(w3, d, 1)
	if n := count(last); n != 2 {
		t.Errorf("row %s (the last the previous worker wrote) written %d times, want 2: a worker without offsets starts from the slot's confirmed_flush_lsn, which Debezium leaves at that transaction's commit", last, n)
	}
	if n := count(b); n != 1 {
		t.Errorf("row %s written %d times, want 1", b, n)
	}
}
