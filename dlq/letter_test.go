package dlq

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	recordpkg "github.com/cdc-relay/cdc-relay/record"
	"github.com/cdc-relay/cdc-relay/relay"
)

// TestWithAttempts: a still-failing letter's redrive_attempts header is set
// in place, or added just before outbox_row, so that the letter's headers
// keep their order (error_kind and error last).
func TestWithAttempts(t *testing.T) {
	keys := func(hs []relay.Header) string {
		var ks []string
		for _, h := range hs {
			ks = append(ks, h.Key+"="+string(h.Value))
		}
		return strings.Join(ks, ",")
	}
	hs := []relay.Header{{Key: "id", Value: []byte("1")}, {Key: recordpkg.HeaderRow, Value: []byte("{}")},
		{Key: recordpkg.HeaderErrorKind, Value: []byte("no_schema")}, {Key: recordpkg.HeaderError, Value: []byte("e")}}
	hs = withAttempts(hs, 1)
	if got, want := keys(hs), "id=1,redrive_attempts=1,outbox_row={},error_kind=no_schema,error=e"; got != want {
		t.Errorf("added: %s, want %s", got, want)
	}
	hs = withAttempts(hs, 2)
	if got, want := keys(hs), "id=1,redrive_attempts=2,outbox_row={},error_kind=no_schema,error=e"; got != want {
		t.Errorf("raised: %s, want %s", got, want)
	}
	if got := keys(withAttempts([]relay.Header{{Key: "table", Value: []byte("t")}}, 1)); got != "table=t,redrive_attempts=1" {
		t.Errorf("without outbox_row: %s", got)
	}
}

// TestLetterKeyWithoutID: redrive --follow knows the letters it appended
// again by mineKey; a letter without an id header (unconfigured_table) is
// known by its table and value, so that --follow holds at its copy instead
// of taking it round again, and two such letters are told apart.
func TestLetterKeyWithoutID(t *testing.T) {
	src := func(value string) *kgo.Record {
		return &kgo.Record{Value: []byte(value), Headers: []kgo.RecordHeader{{Key: "table", Value: []byte("public.other")}, {Key: "error_kind", Value: []byte("unconfigured_table")}}}
	}
	a, b := src(`{"id":"1"}`), src(`{"id":"2"}`)
	it := &redriveItem{src: a, outcome: outSkipped, id: relay.Token(nil)}
	if it.key() != mineKey(letterOf(a)) {
		t.Errorf("key %q, mineKey %q", it.key(), mineKey(letterOf(a)))
	}
	if mineKey(letterOf(a)) == mineKey(letterOf(b)) {
		t.Errorf("two letters without an id share mineKey %q", mineKey(letterOf(a)))
	}
	withID := &kgo.Record{Headers: []kgo.RecordHeader{{Key: "id", Value: []byte("a b")}}}
	if k := (&redriveItem{src: withID, outcome: outFiltered, id: relay.Token([]byte("a b"))}).key(); k != mineKey(letterOf(withID)) {
		t.Errorf("an id with a space: key %q, mineKey %q", k, mineKey(letterOf(withID)))
	}
}
