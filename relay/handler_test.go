package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/cdc-relay/cdc-relay/decoder"
	"github.com/cdc-relay/cdc-relay/internal/registrytest"
	"github.com/cdc-relay/cdc-relay/publisher"
	recordpkg "github.com/cdc-relay/cdc-relay/record"
	"github.com/cdc-relay/cdc-relay/replication"
	"github.com/cdc-relay/cdc-relay/router"
	"github.com/cdc-relay/cdc-relay/schemaregistry"
)

// fakeSink is a recordSink that keeps what it is handed.
type fakeSink struct{ enqueued []*publisher.Record }

var _ recordSink = (*fakeSink)(nil)

func (f *fakeSink) Enqueue(r *publisher.Record) error  { f.enqueued = append(f.enqueued, r); return nil }
func (f *fakeSink) Boundary(uint64, uint64, time.Time) {}
func (f *fakeSink) SlotLost()                          {}
func (f *fakeSink) Stopping()                          {}
func (f *fakeSink) Drain(context.Context) error        { return nil }
func (f *fakeSink) Close()                             {}
func (f *fakeSink) Done() <-chan struct{}              { return nil }
func (f *fakeSink) Err() error                         { return nil }

// TestHandlerMarksRegistryRefusalFatal: the record step reports a registry
// that refuses a registration (4xx) as a *record.HaltError, and the handler
// turns it into a replication.FatalError, so that the stream halts instead
// of reconnecting forever; a registry that is down (5xx) stays an ordinary
// error, which reconnects. Nothing reaches the publisher either way.
func TestHandlerMarksRegistryRefusalFatal(t *testing.T) {
	for _, tc := range []struct {
		status    int
		wantFatal bool
	}{{422, true}, {503, false}} {
		t.Run(strconv.Itoa(tc.status), func(t *testing.T) {
			url := registrytest.Refusing(t, tc.status)
			schemas, err := schemaregistry.LoadDir("../testdata/schemas")
			if err != nil {
				t.Fatal(err)
			}
			reg, err := schemaregistry.New(schemaregistry.Config{URL: url, Schemas: schemas, Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			rt, err := router.New(router.DefaultTemplate)
			if err != nil {
				t.Fatal(err)
			}
			b, err := recordpkg.New(recordpkg.Config{Router: rt, Registry: reg, Builtin: router.AllBuiltin, MaxRecordBytes: 1000000, DLQTopic: "dlq"})
			if err != nil {
				t.Fatal(err)
			}
			sink := &fakeSink{}
			h := handler{dlq: "dlq"}.session(b, sink)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			agg := "00000000-0000-4000-8000-000000000317"
			row := &decoder.Row{ID: []byte("1"), AggregateType: []byte("Order"), AggregateID: []byte(agg), EventType: []byte("OrderCreated"),
				Payload: []byte(`{"order_id": "` + agg + `", "customer_id": "c-1", "status": "PENDING", "amount_cents": 1, "currency": "EUR", "items": [], "created_at": 1700000000000}`)}
			err = h.Row(ctx, 1, 100, &replication.Tx{CommitTime: time.Now()}, row)
			if err == nil {
				t.Fatal("Row returned no error; want the registry's refusal")
			}
			if got := replication.IsFatal(err); got != tc.wantFatal {
				t.Fatalf("replication.IsFatal = %v, want %v: %v", got, tc.wantFatal, err)
			}
			if tc.wantFatal && !strings.Contains(err.Error(), "refused by the test") {
				t.Fatalf("the halt does not say why: %v", err)
			}
			if len(sink.enqueued) != 0 {
				t.Fatalf("%d records reached the publisher, want none", len(sink.enqueued))
			}
		})
	}
}

// TestMarkFenced: the Kafka errors meaning another relay with the same
// transactional id took over are marked replication.ErrFenced (the
// reconnect cause "fenced"), wrapped or not, and keep their text; other
// errors, and nil, pass unchanged.
func TestMarkFenced(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("produce to t.Order: took over (fenced): %w", kerr.InvalidProducerEpoch), true},
		{fmt.Errorf("commit Kafka transaction: %w", kerr.ProducerFenced), true},
		{fmt.Errorf("produce to t.Order: %w", kerr.NotLeaderForPartition), false},
		{errors.New("connection refused"), false},
	} {
		got := markFenced(tc.err)
		if errors.Is(got, replication.ErrFenced) != tc.want {
			t.Errorf("markFenced(%v) = %v: fenced %v, want %v", tc.err, got, !tc.want, tc.want)
		}
		if !errors.Is(got, tc.err) || !strings.Contains(got.Error(), tc.err.Error()) {
			t.Errorf("markFenced(%v) = %v lost the error", tc.err, got)
		}
	}
	if markFenced(nil) != nil {
		t.Error("markFenced(nil) is not nil")
	}
}

// TestHandlerRowIDs: a record without an id of its own (here rows of a
// table that is not an outbox table) gets its transaction's commit LSN and
// its place in the transaction, and gets the same id when the transaction
// is read again by a new session; a record with an id keeps it.
func TestHandlerRowIDs(t *testing.T) {
	rt, err := router.New(router.DefaultTemplate)
	if err != nil {
		t.Fatal(err)
	}
	b, err := recordpkg.New(recordpkg.Config{Router: rt, ValueFormat: recordpkg.ValueJSON, Builtin: router.AllBuiltin, MaxRecordBytes: 1000000, DLQTopic: "dlq"})
	if err != nil {
		t.Fatal(err)
	}
	other := &decoder.Row{Other: &decoder.OtherRow{Table: "public.audit", Columns: []string{"id"}, Values: [][]byte{[]byte("7")}}}
	event := &decoder.Row{ID: []byte("42"), AggregateType: []byte("Order"), AggregateID: []byte("a-1"), EventType: []byte("OrderCreated"), Payload: []byte(`{}`)}
	read := func(txs ...replication.Tx) []string {
		sink := &fakeSink{}
		var stats replication.Stats
		h := handler{dlq: "dlq", log: slog.New(slog.DiscardHandler), metrics: NewMetrics(&stats, NewLagRate(stats.LagBytes)), unconfigured: &rateLog{}}.session(b, sink)
		seq := uint64(0)
		for i := range txs {
			for _, row := range []*decoder.Row{other, event, other} {
				seq++
				if err := h.Row(context.Background(), seq, 100, &txs[i], row); err != nil {
					t.Fatal(err)
				}
			}
		}
		var ids []string
		for _, r := range sink.enqueued {
			ids = append(ids, string(r.ID))
		}
		return ids
	}
	tx1 := replication.Tx{FinalLSN: 0x16B3748, CommitTime: time.Now()}
	tx2 := replication.Tx{FinalLSN: 0x1_0000_0010, CommitTime: time.Now()}
	want := []string{"0/16B3748-0", "42", "0/16B3748-2", "1/10-0", "42", "1/10-2"}
	if got := read(tx1, tx2); !slices.Equal(got, want) {
		t.Fatalf("ids %q, want %q", got, want)
	}
	if got := read(tx2); !slices.Equal(got, want[3:]) {
		t.Fatalf("read again by a new session: ids %q, want %q", got, want[3:])
	}
}
