package checkpoint_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/checkpoint"
	"github.com/cdc-relay/cdc-relay/internal/kafkatest"
	"github.com/cdc-relay/cdc-relay/internal/relaytest"
	"github.com/cdc-relay/cdc-relay/replication"
)

// TestLoadSeesPastAnOpenTransaction: an exactly-once relay killed inside a
// Kafka transaction leaves it open on the checkpoint topic (one partition)
// until its timeout. Checkpoints written after it by other relays, and
// transactions committed after it, must still be read at once: a restart
// that missed its own newest checkpoint would take a dropped slot for a
// first start (a silent gap). The open transaction's own record, and an
// aborted one's, stay unread, and its key is reported open. A slot ahead
// of relay a's checkpoint is a gap at once, the other relay's open
// transaction notwithstanding; relay b's answer waits for it.
func TestLoadSeesPastAnOpenTransaction(t *testing.T) {
	t.Parallel()
	b := relaytest.PrivateBroker(t, kafkatest.Options{})
	const topic = "ckpt-open-txn"
	s := checkpoint.NewStore([]string{b.Addr()}, nil, topic)
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := s.Ensure(ctx, true); err != nil {
		t.Fatal(err)
	}
	rec := func(relay, lsn string) *checkpoint.Record {
		return &checkpoint.Record{Kind: checkpoint.KindCheckpoint, Format: checkpoint.FormatFollows, RelayID: relay, LSN: lsn, SystemID: "1", Database: "app", Slot: relay, WrittenAt: time.Now()}
	}
	// txn writes rec in a transaction of its own producer, which it commits,
	// aborts, or leaves open (the client is closed without ending it).
	txn := func(id string, r *checkpoint.Record, end func(*kgo.Client) error) {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.TransactionalID(id), kgo.TransactionTimeout(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		v, err := r.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(r.Key()), Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := end(cl); err != nil {
			t.Fatal(err)
		}
	}
	commit := func(cl *kgo.Client) error { return cl.EndTransaction(ctx, kgo.TryCommit) }
	abort := func(cl *kgo.Client) error { return cl.EndTransaction(ctx, kgo.TryAbort) }
	leave := func(*kgo.Client) error { return nil }

	for _, w := range []*checkpoint.Record{rec("a", "0/100"), rec("b", "0/100")} {
		if err := s.Write(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	txn("eos-b", rec("b", "0/200"), commit)
	txn("eos-killed", rec("b", "0/900"), leave) // open for a minute
	if err := s.Write(ctx, rec("a", "0/300")); err != nil {
		t.Fatal(err)
	}
	txn("eos-c", rec("c", "0/400"), commit)
	txn("eos-d", rec("c", "0/999"), abort)
	txn("eos-e", rec("e", "0/500"), commit)
	if err := s.Write(ctx, rec("e", "0/450")); err != nil { // after e's commit: newer
		t.Fatal(err)
	}

	began := time.Now()
	st, err := s.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(began); d > 30*time.Second {
		t.Errorf("Load took %s: it waited for the open transaction", d)
	}
	for relay, want := range map[string]string{"a": "0/300", "b": "0/200", "c": "0/400", "e": "0/450"} {
		got := st.Checkpoints[relay]
		if got == nil {
			t.Errorf("relay %s: no checkpoint read, want %s", relay, want)
			continue
		}
		if got.LSN != want {
			t.Errorf("relay %s: read %s, want %s", relay, got.LSN, want)
		}
	}
	if rec, ok := st.Open["b"]; len(st.Open) != 1 || !ok || rec == nil || rec.LSN != "0/900" {
		t.Errorf("open transactions: %v, want b's alone, with its checkpoint 0/900", st.Open)
	}

	server := replication.Server{SystemID: "1", Timeline: 1, Database: "app"}
	ahead := func(relay string, confirmed replication.LSN, within time.Duration) error {
		g := checkpoint.NewGuard(checkpoint.Config{Store: s, RelayID: relay, Slot: relay, ReadOnly: true})
		actx, cancel := context.WithTimeout(ctx, within)
		defer cancel()
		return g.Ahead(actx, replication.GuardInput{Server: server, Slot: relay, Info: replication.SlotInfo{Confirmed: confirmed}})
	}
	began = time.Now()
	var gap *checkpoint.GapError
	if err := ahead("a", 0x400, 30*time.Second); !errors.As(err, &gap) || gap.Ahead != 0x400 {
		t.Errorf("relay a, slot at 0/400 past its checkpoint 0/300, beside b's open transaction: %v, want a gap", err)
	}
	if d := time.Since(began); d > 20*time.Second {
		t.Errorf("relay a's answer took %s: it waited for another relay's open transaction", d)
	}
	// The slot confirmed into b's open transaction: Kafka would have
	// acknowledged its commit, so aborting it would lose events.
	if err := ahead("b", 0x950, 2*time.Second); errors.As(err, &gap) || !errors.Is(err, replication.ErrCheckpointUnavailable) || !strings.Contains(err.Error(), "Do not abort it") {
		t.Errorf("relay b, slot at 0/950, its own transaction (0/900) still open: %v, want the checkpoint unknown, not a gap, and no abort advised", err)
	}
}
