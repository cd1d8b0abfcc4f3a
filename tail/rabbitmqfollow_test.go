package tail

import (
	"errors"
	"fmt"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/cdc-relay/cdc-relay/rabbitmq"
	"github.com/cdc-relay/cdc-relay/relay"
)

// TestRabbitTailLost: a following tail reconnects after its consumer
// ended or stalled, and after a reconnect also when a read cannot start yet; never
// for a setting to fix or for printing that failed.
func TestRabbitTailLost(t *testing.T) {
	refused := fmt.Errorf("read stream s: %w", &amqp.Error{Code: amqp.AccessRefused, Reason: "ACCESS_REFUSED"})
	ended := errors.New("read stream s: the broker closed the consumer")
	tests := []struct {
		name    string
		stream  string
		err     error
		again   bool
		emitErr error
		want    bool
	}{
		{"exchange's consumer ended", "", errConsumerEnded, false, nil, true},
		{"stream's consumer ended", "s", ended, false, nil, true},
		{"stream's consumer stalled", "s", fmt.Errorf("read stream s: %w: it was given nothing", rabbitmq.ErrStalled), false, nil, true},
		{"refused on the first connection", "s", refused, false, nil, false},
		{"queue refused on the first connection", "", refused, false, nil, false},
		{"refused after a reconnect", "s", refused, true, nil, true},
		{"a setting to fix", "s", relay.ConfigErr("stream", "stream s does not exist"), true, nil, false},
		{"printing failed", "s", ended, true, errors.New("write: broken pipe"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rt := &rabbitTail{cfg: &RabbitMQConfig{Stream: tc.stream}, conn: &amqp.Connection{}, emitErr: tc.emitErr} // open: not closed
			if got := rt.lost(tc.err, tc.again); got != tc.want {
				t.Errorf("lost(%v, again %v) = %v, want %v", tc.err, tc.again, got, tc.want)
			}
		})
	}
}
