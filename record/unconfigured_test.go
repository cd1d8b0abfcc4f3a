package record

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/decoder"
	"github.com/cdc-relay/cdc-relay/publisher"
	"github.com/cdc-relay/cdc-relay/router"
)

// TestUnconfiguredDeadLetter: a row of a table that is not an outbox table
// becomes a dead letter naming the table, whose value gives back every
// column's text (NULL as null, quotes and non-ASCII intact).
func TestUnconfiguredDeadLetter(t *testing.T) {
	for _, tt := range []struct {
		name      string
		maxBytes  int
		wantValue bool
	}{{"fits", 1 << 20, true}, {"too large", 200, false}} {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			b, err := New(Config{Router: testRouter(t), Registry: fakeRegistry(t, &calls), Builtin: router.AllBuiltin, MaxRecordBytes: tt.maxBytes, DLQTopic: "dlq"})
			if err != nil {
				t.Fatal(err)
			}
			src := &decoder.OtherRow{Table: "public.orders", Columns: []string{"id", "note", "body", "gone"},
				Values: [][]byte{[]byte("7"), []byte(`say "hi" <é>` + strings.Repeat("x", 100)), []byte(`{"a": 1}`), nil}}
			rec := publisher.NewRecord()
			commit := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
			inv, err := b.Build(context.Background(), rec, commit, &decoder.Row{Other: src, RelationID: 16500})
			if err != nil {
				t.Fatal(err)
			}
			if inv == nil || inv.Kind != ReasonUnconfigured || inv.Table != "public.orders" {
				t.Fatalf("invalid = %+v, want unconfigured_table of public.orders", inv)
			}
			if rec.Topic != "dlq" || rec.Key != nil || !rec.Time.Equal(commit) {
				t.Errorf("topic %q key %q time %v", rec.Topic, rec.Key, rec.Time)
			}
			h := map[string]string{}
			for _, x := range rec.Headers {
				h[x.Key] = string(x.Value)
			}
			if len(rec.Headers) != 3 || h[HeaderTable] != "public.orders" || h[HeaderErrorKind] != ReasonUnconfigured || !strings.Contains(h[HeaderError], "public.orders is not a configured outbox table") {
				t.Errorf("headers = %q", h)
			}
			if calls.Load() != 0 {
				t.Errorf("%d registry calls, want none", calls.Load())
			}
			if !tt.wantValue {
				if rec.Value != nil || !strings.Contains(h[HeaderError], "omitted") {
					t.Errorf("value %q error %q, want no value and the omission said", rec.Value, h[HeaderError])
				}
				return
			}
			var got map[string]*string
			if err := json.Unmarshal(rec.Value, &got); err != nil {
				t.Fatalf("value %s: %v", rec.Value, err)
			}
			for i, col := range src.Columns {
				switch v := got[col]; {
				case src.Values[i] == nil && v != nil, src.Values[i] != nil && (v == nil || *v != string(src.Values[i])):
					t.Errorf("column %s = %v, want %q", col, v, src.Values[i])
				}
			}
			if !strings.HasPrefix(string(rec.Value), `{"id":"7","note":`) {
				t.Errorf("value %s: want the table's column order", rec.Value)
			}
		})
	}
}
