package rabbitmq

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/cdc-relay/cdc-relay/checkpoint"
	"github.com/cdc-relay/cdc-relay/internal/rabbittest"
)

// TestCheckpointWriteToMissingStreamTwice: each write to a stream that is
// gone says so, the second as the first: a return reaches only the write
// that caused it, and never blocks the connection.
func TestCheckpointWriteToMissingStreamTwice(t *testing.T) {
	sfx := fresh()
	n := startNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := NewCheckpointStore(CheckpointConfig{URL: n.URL(), Name: "ckpt-missing" + sfx})
	defer s.Close()
	if _, err := s.Ensure(ctx, true); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := s.Write(ctx, ckpt("r", uint64(0x100+i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := channel(t, n).QueueDelete("ckpt-missing"+sfx+".gaps", false, false, false); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		gap := ckpt("r", 0x200)
		gap.Kind, gap.Gap = checkpoint.KindGap, &checkpoint.Gap{FromLSN: "0/100", ToLSN: "0/200", Reason: "test", Via: "slot recreate"}
		wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
		err := s.Write(wctx, gap)
		wcancel()
		if err == nil || !strings.Contains(err.Error(), "is missing") {
			t.Fatalf("write %d of a gap to a deleted stream: %v, want the stream is missing", i, err)
		}
	}
}

// confirmer opens a connection to n and a Confirmer on it; both close at
// t's end.
func confirmer(t *testing.T, n *rabbittest.Node) *Confirmer {
	t.Helper()
	conn, err := Dial(n.URL(), nil, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c, err := NewConfirmer(conn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestConfirmerFates: a batch's messages are told apart: routed, returned
// (matched by message id), and the channel's own error when the broker
// closes it.
func TestConfirmerFates(t *testing.T) {
	sfx := fresh()
	n := startNode(t)
	ex, q := "conf-ex"+sfx, "conf-q"+sfx
	ch := topology(t, n, ex, q, "bound", nil)
	c := confirmer(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	msgs := []Outgoing{
		{ex, "bound", amqp.Publishing{MessageId: "a"}},
		{ex, "nobody", amqp.Publishing{MessageId: "b"}},
		{ex, "bound", amqp.Publishing{MessageId: "a"}}, // the same id: a batch of its own
		{ex, "nobody", amqp.Publishing{MessageId: "c"}},
	}
	fates, err := c.Publish(ctx, msgs)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []error{nil, ErrReturned, nil, ErrReturned} {
		if !errors.Is(fates[i], want) && !(want == nil && fates[i] == nil) {
			t.Errorf("message %d: %v, want %v", i, fates[i], want)
		}
	}
	if got, err := ch.QueueDeclarePassive(q, true, false, false, false, nil); err != nil || got.Messages != 2 {
		t.Errorf("bound queue: %+v, %v; want 2 messages", got, err)
	}
	if _, err := c.Publish(ctx, []Outgoing{{ex + "-missing", "k", amqp.Publishing{MessageId: "d"}}}); err == nil || AMQPCode(err) != amqp.NotFound {
		t.Errorf("publish to a missing exchange: %v, want the channel's 404", err)
	}
}

// TestTextHeaders: AMQP header values as text, in name order.
func TestTextHeaders(t *testing.T) {
	ts := time.Date(2026, 12, 1, 10, 0, 0, 0, time.FixedZone("x", 3600))
	got := TextHeaders(amqp.Table{"s": "text", "b": []byte{0xff}, "i": int32(-7), "l": int64(1 << 40), "f": 1.5, "t": true,
		"ts": ts, "void": nil, "tab": amqp.Table{"k": "v"}, "arr": []any{"a", int32(1)}, "dec": amqp.Decimal{Scale: 2, Value: 1234}, "dec2": amqp.Decimal{Scale: 3, Value: -5}})
	want := []TextHeader{{"arr", []byte(`["a",1]`)}, {"b", []byte{0xff}}, {"dec", []byte("12.34")}, {"dec2", []byte("-0.005")}, {"f", []byte("1.5")}, {"i", []byte("-7")},
		{"l", []byte("1099511627776")}, {"s", []byte("text")}, {"t", []byte("true")}, {"tab", []byte(`{"k":"v"}`)},
		{"ts", []byte("2026-12-01T09:00:00Z")}, {"void", nil}}
	if len(got) != len(want) {
		t.Fatalf("got %d headers, want %d: %q", len(got), len(want), got)
	}
	for i := range want {
		if got[i].Key != want[i].Key || string(got[i].Value) != string(want[i].Value) || (want[i].Value == nil) != (got[i].Value == nil) {
			t.Errorf("header %d: got %s=%q, want %s=%q", i, got[i].Key, got[i].Value, want[i].Key, want[i].Value)
		}
	}
}
