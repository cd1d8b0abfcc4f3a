package tail

import (
	"errors"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/cdc-relay/cdc-relay/relay"
)

// TestRabbitTailLost: a following tail reconnects after its consumer
// ended, and after a reconnect also when a read cannot start yet; never
// for a setting to fix or for printing that failed.
func TestRabbitTailLost(t *testing.T) {
	other := errors.New("read stream s: 403 ACCESS_REFUSED")
	tests := []struct {
		name    string
		err     error
		again   bool
		emitErr error
		want    bool
	}{
		{"consumer ended", errConsumerEnded, false, nil, true},
		{"other error on the first connection", other, false, nil, false},
		{"other error after a reconnect", other, true, nil, true},
		{"a setting to fix", relay.ConfigErr("stream", "stream s does not exist"), true, nil, false},
		{"printing failed", other, true, errors.New("write: broken pipe"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rt := &rabbitTail{conn: &amqp.Connection{}, emitErr: tc.emitErr} // open: not closed
			if got := rt.lost(tc.err, tc.again); got != tc.want {
				t.Errorf("lost(%v, again %v) = %v, want %v", tc.err, tc.again, got, tc.want)
			}
		})
	}
}
