package inbox

import (
	"context"
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/outbox"
)

// TestDecodeKey: the key bytes each of the relay's --key-format values
// writes decode to the aggregate id; a key that does not fit its format is
// an error, never a guess.
func TestDecodeKey(t *testing.T) {
	avroKey := func(s string) []byte {
		b := []byte{0, 0, 0, 0, 7}
		b = binary.AppendVarint(b, int64(len(s)))
		return append(b, s...)
	}
	for _, c := range []struct {
		format, key, want string
		bad               bool
	}{
		{KeyString, `"42"`, `"42"`, false},
		{KeyJSON, `"o-1"`, "o-1", false},
		{KeyJSON, `"a\"b\u00e9"`, `a"bé`, false},
		{KeyJSON, `42`, "42", false},
		{KeyJSON, `o-1`, "", true},
		{KeyJSON, `{"x":1}`, "", true},
		{KeyJSONSchema, `{"schema":{"type":"string","optional":false},"payload":"o-1"}`, "o-1", false},
		{KeyJSONSchema, `{"schema":{"type":"int64","optional":false},"payload":42}`, "42", false},
		{KeyJSONSchema, `"o-1"`, "", true},
		{KeyAvro, string(avroKey("o-1")), "o-1", false},
		{KeyAvro, string(avroKey("")), "", false},
		{KeyAvro, string(avroKey("o-1")[:7]), "", true},
		{KeyAvro, "o-1", "", true},
	} {
		got, err := decodeKey(c.format, []byte(c.key))
		if c.bad != (err != nil) || got != c.want {
			t.Errorf("decodeKey(%s, %q) = %q, %v; want %q (error %v)", c.format, c.key, got, err, c.want, c.bad)
		}
	}
}

// TestKeyFormats: relays with --key-format json and avro feed consumers
// with the matching Config.KeyFormat; Event.AggregateID is the plain id the
// writer gave, and Event.Key the relay's bytes.
func TestKeyFormats(t *testing.T) {
	url := newDB(t)
	execDoc(t, url, "outbox.sql")
	formats := []string{KeyJSON, KeyAvro}
	type seen struct{ aggID, key string }
	var mu sync.Mutex
	got := map[string]map[string]seen{} // format → event id → seen
	var consumers []*running[map[string]any]
	topics := map[string]string{}
	for _, f := range formats {
		s := suffix()
		prefix := "k" + s
		topic := prefix + ".Order"
		topics[f] = topic
		createTopic(t, topic, 3)
		startRelay(t, url, s, append(relayArgs(url, s, prefix, prefix+".relay-dlq"), "--key-format", f))
		got[f] = map[string]seen{}
		cfg := baseConfig(t, url, topic, func(ctx context.Context, tx pgx.Tx, ev *Event[map[string]any]) error {
			mu.Lock()
			got[f][ev.ID] = seen{ev.AggregateID, string(ev.Key)}
			mu.Unlock()
			return nil
		})
		cfg.KeyFormat = f
		consumers = append(consumers, runConsumer(t, cfg))
	}
	pool := newPool(t, url)
	want := map[string]string{} // event id → aggregate id
	for i := range 30 {
		agg := uuidN(i % 5) // order_id is a uuid in the schema
		err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
			id, err := outbox.Write(context.Background(), tx, outbox.Event{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated",
				Payload: map[string]any{"order_id": agg, "customer_id": "c-1", "status": "PENDING", "amount_cents": i, "items": []any{}, "created_at": time.Now().UnixMilli()}})
			want[id] = agg
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 120*time.Second, "every event applied by both consumers", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got[KeyJSON]) == len(want) && len(got[KeyAvro]) == len(want)
	})
	mu.Lock()
	defer mu.Unlock()
	for _, f := range formats {
		for id, agg := range want {
			s := got[f][id]
			if s.aggID != agg {
				t.Errorf("%s: event %s has AggregateID %q, want %q", f, id, s.aggID, agg)
			}
			if s.key == agg {
				t.Errorf("%s: event %s has the raw key %q: the relay did not encode it", f, id, s.key)
			}
		}
	}
	if k := got[KeyJSON]; len(k) > 0 {
		for _, s := range k {
			if s.key != `"`+s.aggID+`"` {
				t.Errorf("json key %q, want the JSON string of %q", s.key, s.aggID)
			}
			break
		}
	}
	for _, c := range consumers {
		if st := c.c.Stats(); st.DeadLettered != 0 {
			t.Errorf("stats %+v: nothing should be dead-lettered", st)
		}
	}
}
