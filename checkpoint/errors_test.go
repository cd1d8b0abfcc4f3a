package checkpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cdc-relay/cdc-relay/replication"
)

var update = flag.Bool("update", false, "rewrite testdata/texts/gap-*-rabbitmq.txt from the texts as they are now (the Kafka ones are the contract and are never rewritten)")

// TestGapErrorTexts: under Kafka (the zero Broker and Kafka alike) each
// exit-3 text is byte for byte the golden one, captured before the texts
// learned of RabbitMQ; under RabbitMQ each names RabbitMQ and its
// checkpoint streams, never Kafka or a topic.
func TestGapErrorTexts(t *testing.T) {
	for name, e := range gapCases() {
		t.Run(name, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join("..", "testdata", "texts", "gap-"+name+"-kafka.txt"))
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range []Broker{"", Kafka} {
				e.Broker = b
				if got := e.Error() + "\n"; got != string(want) {
					t.Errorf("Broker %q:\n got %s\nwant %s", b, got, want)
				}
			}

			e.Broker = RabbitMQ
			got := e.Error()
			if strings.Contains(got, "Kafka") || strings.Contains(got, "topic") {
				t.Errorf("under RabbitMQ the text names Kafka or a topic: %s", got)
			}
			if name != "no-checkpoint" && !strings.Contains(got, "RabbitMQ") {
				t.Errorf("under RabbitMQ the text does not name RabbitMQ: %s", got)
			}
			golden := filepath.Join("..", "testdata", "texts", "gap-"+name+"-rabbitmq.txt")
			if *update {
				if err := os.WriteFile(golden, []byte(got+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err = os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got+"\n" != string(want) {
				t.Errorf("under RabbitMQ:\n got %s\nwant %s", got, want)
			}
		})
	}
}

// TestBrokerWords: the zero Broker is Kafka.
func TestBrokerWords(t *testing.T) {
	for _, tc := range []struct {
		b                 Broker
		name, checkpoints string
	}{
		{"", "Kafka", "the checkpoint topic"},
		{Kafka, "Kafka", "the checkpoint topic"},
		{RabbitMQ, "RabbitMQ", "the checkpoint streams"},
	} {
		if got := tc.b.String(); got != tc.name {
			t.Errorf("Broker(%q).String() = %q, want %q", tc.b, got, tc.name)
		}
		if got := tc.b.Checkpoints(); got != tc.checkpoints {
			t.Errorf("Broker(%q).Checkpoints() = %q, want %q", tc.b, got, tc.checkpoints)
		}
	}
}

// fakeBackend is a Backend of the broker it names, whose Load fails with
// loadErr.
type fakeBackend struct {
	broker  Broker
	loadErr error
}

var _ Backend = (*fakeBackend)(nil)

func (f *fakeBackend) Topic() string                              { return "ckpt" }
func (f *fakeBackend) Ensure(context.Context, bool) (bool, error) { return true, nil }
func (f *fakeBackend) Load(context.Context) (*State, error)       { return nil, f.loadErr }
func (f *fakeBackend) Write(context.Context, *Record) error       { return nil }
func (f *fakeBackend) Close()                                     {}
func (f *fakeBackend) Broker() Broker                             { return f.broker }

// TestGuardNamesItsBroker: the guard's gap, its unknown checkpoint and the
// ERROR for a gap accepted under --recreate-lost-slot name the store's
// broker; under Kafka their texts are what they always were.
func TestGuardNamesItsBroker(t *testing.T) {
	server := replication.Server{SystemID: "sys1", Timeline: 1, Database: "app"}
	for _, b := range []Broker{Kafka, RabbitMQ} {
		t.Run(b.String(), func(t *testing.T) {
			g := loadedGuard(ckpt("sys1", "0/200", 1))
			g.cfg.Store = &fakeBackend{broker: b}
			_, _, err := g.Decide(context.Background(), replication.GuardInput{Server: server, First: true})
			var gap *GapError
			if !errors.As(err, &gap) || gap.Broker != b {
				t.Fatalf("Decide for a dropped slot = %v, want a *GapError of broker %s", err, b)
			}
			if !strings.Contains(err.Error(), "may be missing from "+b.String()) {
				t.Errorf("the gap does not name %s: %v", b, err)
			}

			g = NewGuard(Config{Slot: "cdc_relay", Store: &fakeBackend{broker: b, loadErr: errors.New("load failed")}})
			err = g.Load(context.Background(), server)
			want := "checkpoint unavailable: load failed (the checkpoint is unknown, not absent: the relay waits for " + b.String() + " and creates nothing meanwhile)"
			if !errors.Is(err, replication.ErrCheckpointUnavailable) || err.Error() != want {
				t.Errorf("Load with an unreadable store = %v, want %q", err, want)
			}

			// --recreate-lost-slot: the ERROR for the gap it accepted.
			var buf bytes.Buffer
			g = NewGuard(Config{Slot: "cdc_relay", Store: &fakeBackend{broker: b}, Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
			g.loaded, g.id = true, "sys1/app/cdc_relay"
			if err := g.SlotCreated(context.Background(), replication.GuardInput{Server: server, Slot: "cdc_relay"}, replication.SlotInfo{Confirmed: 0x300}, &replication.SlotInfo{Confirmed: 0x200}); err != nil {
				t.Fatal(err)
			}
			var line struct{ Msg string }
			if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
				t.Fatalf("%v: %s", err, buf.String())
			}
			want = map[Broker]string{
				Kafka: "gap accepted under --recreate-lost-slot and recorded in the checkpoint topic: events committed after the old slot's position may be missing from Kafka; " +
					"publish them with cdc-relay replay (docs/OPERATIONS.md). cdc-relay slot recreate --accept-gap is the recommended way: it asks each time",
				RabbitMQ: "gap accepted under --recreate-lost-slot and recorded in the checkpoint streams: events committed after the old slot's position may be missing from RabbitMQ; " +
					"publish them with cdc-relay replay (docs/OPERATIONS.md). cdc-relay slot recreate --accept-gap is the recommended way: it asks each time",
			}[b]
			if line.Msg != want {
				t.Errorf("the --recreate-lost-slot ERROR:\n got %s\nwant %s", line.Msg, want)
			}
		})
	}
}
