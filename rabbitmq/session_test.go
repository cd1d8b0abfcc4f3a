package rabbitmq

import (
	"testing"

	"github.com/cdc-relay/cdc-relay/publisher"
)

// returnSpy is a publisher.ReturnHook that records what it hears.
type returnSpy struct{ returned []string }

func (s *returnSpy) Acked(int32, int64) {}
func (s *returnSpy) Returned(kind, routingKey string) {
	s.returned = append(s.returned, kind+" "+routingKey)
}

var _ publisher.ReturnHook = (*returnSpy)(nil)

// TestReturnedTellsTheRecordsHook: a basic.return of the message of seq
// reaches that record's publisher.ReturnHook, and no other record's, and
// a hook that is only an AckHook, or a seq no longer waiting, is passed
// over.
func TestReturnedTellsTheRecordsHook(t *testing.T) {
	spies := []*returnSpy{{}, {}, {}}
	ss := &Session{waiting: []waiting{{seq: 3, onAck: spies[0]}, {seq: 5, onAck: spies[1]}, {seq: 8, onAck: spies[2]}, {seq: 9, onAck: ackOnly{}}, {seq: 10}}}
	ss.returned(5, "outbox.dlq")
	ss.returned(9, "outbox.dlq")
	ss.returned(10, "outbox.dlq")
	ss.returned(4, "outbox.dlq")
	for i, want := range [][]string{nil, {"unroutable outbox.dlq"}, nil} {
		if got := spies[i].returned; len(got) != len(want) || (len(want) > 0 && got[0] != want[0]) {
			t.Errorf("record %d's hook heard %q, want %q", ss.waiting[i].seq, got, want)
		}
	}
}

// ackOnly is a publisher.AckHook without Returned.
type ackOnly struct{}

func (ackOnly) Acked(int32, int64) {}
