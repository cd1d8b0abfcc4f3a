package relaytest

import (
	"github.com/cdc-relay/cdc-relay/internal/kafkatest"
	"github.com/cdc-relay/cdc-relay/internal/testtier"
)

// PrivateBroker starts a Kafka broker of t's own with opts and closes it at
// cleanup, logging where its server log is when t failed. A test that stops
// Kafka (to hold WAL, to fill the in-flight window) stops this one, not the
// package's shared broker, and so can run in parallel with the others. It
// skips t while the service tier is off and fails t when the broker cannot
// start.
func PrivateBroker(t T, opts kafkatest.Options) *kafkatest.Broker {
	t.Helper()
	testtier.Need(t)
	b, err := kafkatest.Start(opts)
	if err != nil {
		t.Fatalf("start a private broker: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("private broker log: %s", b.LogPath())
		}
		b.Close()
	})
	return b
}
