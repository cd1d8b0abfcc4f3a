package dlq

import (
	"errors"
	"fmt"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/cdc-relay/cdc-relay/rabbitmq"
)

// TestRabbitRedriveLost: while the connection is open, redrive --follow
// reconnects for a consumer of the stream that ended or stalled, and after a
// reconnect for a read the broker refused; never for a stream that is
// missing or is not one, nor for sending that failed.
func TestRabbitRedriveLost(t *testing.T) {
	ended := &readError{errors.New("read stream s: the broker closed the consumer")}
	refused := &readError{fmt.Errorf("read stream s: %w", amqp.ErrClosed)}
	tests := []struct {
		name  string
		err   error
		again bool
		want  bool
	}{
		{"consumer ended", ended, false, true},
		{"consumer stalled", &readError{fmt.Errorf("read stream s: %w: it was given nothing", rabbitmq.ErrStalled)}, false, true},
		{"read refused on the first connection", refused, false, false},
		{"read refused after a reconnect", refused, true, true},
		{"stream gone", &readError{fmt.Errorf("stream s %w", rabbitmq.ErrNoQueue)}, true, false},
		{"not a stream", &readError{fmt.Errorf("queue s is %w", rabbitmq.ErrNotStream)}, true, false},
		{"sending failed", errors.New("publish 1 letters again: NOT_FOUND"), true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &rabbitRedriver{q: &rabbitDLQ{conn: &amqp.Connection{}}} // open: not closed
			if got := r.lost(tc.err, tc.again); got != tc.want {
				t.Errorf("lost(%v, again %v) = %v, want %v", tc.err, tc.again, got, tc.want)
			}
		})
	}
}
