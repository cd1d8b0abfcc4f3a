package router

import (
	"errors"
	"strings"
	"testing"

	"github.com/segmentio/kafka-go"
)

func TestTopic(t *testing.T) {
	tests := []struct {
		template, aggType, eventType string
		want                         string
		wantErr                      error
	}{
		{DefaultTemplate, "Order", "OrderCreated", "outbox.event.Order", nil},
		{"{aggregate_type}.{event_type}", "order", "created", "order.created", nil},
		{"events", "x", "y", "events", nil},
		{DefaultTemplate, "", "OrderCreated", "", ErrInvalidTopic},
		{DefaultTemplate, "has space", "e", "", ErrInvalidTopic},
		{DefaultTemplate, "a/b", "e", "", ErrInvalidTopic},
		{DefaultTemplate, strings.Repeat("x", 240), "e", "", ErrInvalidTopic},
	}
	for _, tc := range tests {
		t.Run(tc.template+"/"+tc.aggType, func(t *testing.T) {
			r, err := New(tc.template)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 2; i++ { // second time from the cache
				got, err := r.Topic([]byte(tc.aggType), []byte(tc.eventType))
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				if got != tc.want {
					t.Fatalf("topic = %q, want %q", got, tc.want)
				}
			}
		})
	}
}

func TestNewRejectsBadTemplates(t *testing.T) {
	for _, tpl := range []string{"", "outbox.{aggregate", "outbox.{id}"} {
		if _, err := New(tpl); err == nil || !strings.Contains(err.Error(), "--topic-template") {
			t.Errorf("New(%q) = %v, want an error naming --topic-template", tpl, err)
		}
	}
}

func TestMatcher(t *testing.T) {
	r, _ := New(DefaultTemplate)
	m := r.Matcher()
	for topic, want := range map[string]bool{"outbox.event.Order": true, "outbox.event.": false, "other.Order": false} {
		if got := m(topic); got != want {
			t.Errorf("match(%q) = %v, want %v", topic, got, want)
		}
	}
}

func TestTopicNoAllocWhenCached(t *testing.T) {
	r, _ := New(DefaultTemplate)
	agg, ev := []byte("Order"), []byte("OrderCreated")
	r.Topic(agg, ev)
	if n := testing.AllocsPerRun(100, func() { r.Topic(agg, ev) }); n != 0 {
		t.Fatalf("allocs = %v, want 0", n)
	}
}

func TestAppendHeaders(t *testing.T) {
	tests := []struct {
		name    string
		json    string
		want    map[string]string
		wantErr error
	}{
		{"none", "", map[string]string{}, nil},
		{"null", "null", map[string]string{}, nil},
		{"empty", "{}", map[string]string{}, nil},
		{"strings", `{"traceparent": "00-abc-01", "tenant": "t1"}`, map[string]string{"traceparent": "00-abc-01", "tenant": "t1"}, nil},
		{"escapes", `{"k\"q": "a\u00e9\n"}`, map[string]string{`k"q`: "aé\n"}, nil},
		{"scalars", `{"n": 42, "f": -1.5e3, "b": true, "z": null}`, map[string]string{"n": "42", "f": "-1.5e3", "b": "true", "z": "<nil>"}, nil},
		{"nested", `{"o": {"a": [1, "}"]}, "arr": [1, 2]}`, map[string]string{"o": `{"a": [1, "}"]}`, "arr": "[1, 2]"}, nil},
		{"array", `[1, 2]`, nil, ErrHeadersNotObject},
		{"string", `"x"`, nil, ErrHeadersNotObject},
		{"garbage", `{"a": }`, nil, ErrBadJSON},
		{"trailing", `{"a": 1} x`, nil, ErrBadJSON},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var hj []byte
			if tc.json != "" {
				hj = []byte(tc.json)
			}
			hs, err := AppendHeaders(nil, []byte("7"), []byte("OrderCreated"), []byte("Order"), hj)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			got := map[string]string{}
			for _, h := range hs[3:] {
				if h.Value == nil {
					got[h.Key] = "<nil>"
				} else {
					got[h.Key] = string(h.Value)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("headers = %v, want %v", got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Fatalf("header %q = %q, want %q (all: %v)", k, got[k], v, got)
				}
			}
			wantFixed := []kafka.Header{{Key: "id", Value: []byte("7")}, {Key: "event_type", Value: []byte("OrderCreated")}, {Key: "aggregate_type", Value: []byte("Order")}}
			for i, h := range wantFixed {
				if hs[i].Key != h.Key || string(hs[i].Value) != string(h.Value) {
					t.Fatalf("fixed header %d = %s=%s, want %s=%s", i, hs[i].Key, hs[i].Value, h.Key, h.Value)
				}
			}
		})
	}
}

func FuzzAppendHeaders(f *testing.F) {
	for _, s := range []string{`{"a": "b"}`, `{"o": {"x": [1, {"y": "}"}]}}`, `[1]`, `"\u00e9"`, `{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		AppendHeaders(nil, nil, nil, nil, b)
	})
}
