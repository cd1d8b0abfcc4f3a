package main

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/cdc-relay/cdc-relay/internal/kfaketest"
	"github.com/cdc-relay/cdc-relay/internal/testtier"
)

// TestKafkaSecurityRefusedFake: TestKafkaSecurity's refused passwords but
// one, against kfake (kfaketest.RefuseCredentials gives Kafka's answer):
// check names the refusal and fails, and the relay says
// SASL_AUTHENTICATION_FAILED, waits on its checkpoint, retrying, and
// creates no slot; no password shows in check's output.
func TestKafkaSecurityRefusedFake(t *testing.T) {
	testtier.Need(t) // the relay needs PostgreSQL and the registry
	t.Parallel()
	users := map[string]string{"relay": "relay-pw-" + randSuffix(), "reader": "reader-pw-" + randSuffix()}
	c := kfaketest.Start(t, users, kfake.NumBrokers(1))
	refused := kfaketest.RefuseCredentials(c, users)
	addr, wrongPassword := c.ListenAddrs()[0], "wrong-pw-"+randSuffix()
	for _, tc := range []struct{ name, mechanism, password string }{
		{"PLAIN wrong password", "plain", wrongPassword},
		{"SCRAM-SHA-512 another user's password", "scram-sha-512", users["reader"]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const wantLog = "SASL_AUTHENTICATION_FAILED"
			envs := map[string]string{"CDC_RELAY_KAFKA_SASL_PASSWORD": tc.password}
			f := newFixture(t, "")
			args := f.args("--kafka-sasl-mechanism", tc.mechanism, "--kafka-sasl-username", "relay")
			setFlag(args, "--kafka-brokers", addr)
			checkRefusal(t, args, envs, addr, wantLog, users["relay"], users["reader"], wrongPassword)
			// Nothing can be acknowledged: do not wait the default 30 s for
			// in-flight events at shutdown.
			r := startRelayEnv(t, append(args, "--shutdown-timeout", "2s"), []string{"CDC_RELAY_KAFKA_SASL_PASSWORD=" + tc.password})
			waitRefused(t, f, r, wantLog)
		})
	}
	t.Cleanup(func() {
		if refused.Hits() == 0 {
			t.Error("the broker refused no authentication")
		}
	})
}
