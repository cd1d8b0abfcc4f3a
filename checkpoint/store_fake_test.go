package checkpoint

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/cdc-relay/cdc-relay/internal/kafkasec"
	"github.com/cdc-relay/cdc-relay/internal/kfaketest"
)

// TestStoreRefusedCredentials (kfake; cmd/cdc-relay's TestKafkaSecurity
// keeps one refused password on a real broker, where the relay waits on
// its checkpoint): with a wrong password, or another user's, with PLAIN,
// SCRAM-SHA-256 or SCRAM-SHA-512, the store cannot read the checkpoint
// topic, and its error says SASL_AUTHENTICATION_FAILED, which the relay
// logs as it retries, without the password. The right PLAIN password
// reaches the topic through the same cluster.
func TestStoreRefusedCredentials(t *testing.T) {
	t.Parallel()
	users := map[string]string{"relay": "relay-pw-1", "reader": "reader-pw-2"}
	c := kfaketest.Start(t, users, kfake.NumBrokers(1))
	refused := kfaketest.RefuseCredentials(c, users)
	ensure := func(mechanism, password string) error {
		t.Helper()
		sec, err := kafkasec.Settings{Mechanism: mechanism, Username: "relay", Password: password}.Build()
		if err != nil {
			t.Fatal(err)
		}
		s := NewStore(c.ListenAddrs(), sec.Opts, "checkpoints")
		defer s.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err = s.Ensure(ctx, true)
		return err
	}
	for _, tc := range []struct{ mechanism, password string }{
		{kafkasec.Plain, "wrong-pw-3"},
		{kafkasec.ScramSHA256, "wrong-pw-3"},
		{kafkasec.ScramSHA512, users["reader"]},
	} {
		t.Run(tc.mechanism, func(t *testing.T) {
			err := ensure(tc.mechanism, tc.password)
			if err == nil || !strings.Contains(err.Error(), "SASL_AUTHENTICATION_FAILED") {
				t.Fatalf("Ensure = %v, want SASL_AUTHENTICATION_FAILED", err)
			}
			for _, pw := range []string{tc.password, users["relay"], users["reader"]} {
				if strings.Contains(err.Error(), pw) {
					t.Errorf("a SASL password appears in the error: %v", err)
				}
			}
		})
	}
	if refused.Hits() < 3 {
		t.Errorf("the broker refused %d authentications, want at least 3", refused.Hits())
	}
	if err := ensure(kafkasec.Plain, users["relay"]); err != nil {
		t.Errorf("with the right password: Ensure = %v", err)
	}
	if c.TopicInfo("checkpoints") == nil {
		t.Errorf("with the right password, the checkpoint topic was not created")
	}
}
