// Package kfaketest starts franz-go's kfake, an in-process Kafka cluster,
// for the unit tier: it needs no service and no tier gate. A cluster with
// SASL users can answer refused credentials as Kafka does
// (RefuseCredentials).
//
// In: the users (name → password) and kfake options.
// Out: a cluster closed at the test's cleanup, and the superuser's client
// options.
package kfaketest

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// Admin and AdminPassword are the PLAIN superuser of a cluster with users:
// ACLs (kfake.EnableACLs) do not apply to it.
const Admin, AdminPassword = "admin", "admin-pw"

// AdminOpts are the client options of Admin.
func AdminOpts(c *kfake.Cluster) []kgo.Opt {
	return []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...), kgo.SASL(plain.Auth{User: Admin, Pass: AdminPassword}.AsMechanism())}
}

// Start starts a kfake cluster with opts, closed at cleanup. With users
// (name → password) it has SASL, each user with PLAIN, SCRAM-SHA-256 and
// SCRAM-SHA-512, and Admin, a superuser.
func Start(t testing.TB, users map[string]string, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	if users != nil {
		opts = append(opts, kfake.EnableSASL(), kfake.Superuser("PLAIN", Admin, AdminPassword))
		for name, pw := range users {
			for _, m := range []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} {
				opts = append(opts, kfake.User(m, name, pw))
			}
		}
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// RefuseCredentials makes c answer SaslAuthenticate with
// SASL_AUTHENTICATION_FAILED, as Kafka does where kfake closes the
// connection: to a PLAIN password that is not the user's in users (Admin
// included), and to every SCRAM proof. kfake checks a SCRAM proof past the
// request a fault sees, so with RefuseCredentials every SCRAM login fails,
// right password or not: a test that needs a user in uses PLAIN. The
// handle counts the refusals.
func RefuseCredentials(c *kfake.Cluster, users map[string]string) *kfake.FaultHandle {
	return c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.SASLAuthenticate}, TopLevel: true, Err: kerr.SaslAuthenticationFailed, Count: -1,
		When: func(req kmsg.Request) bool {
			auth := req.(*kmsg.SASLAuthenticateRequest).SASLAuthBytes
			if plain := bytes.Split(auth, []byte{0}); len(plain) == 3 { // authzid, user, password
				pw, ok := users[string(plain[1])]
				if string(plain[1]) == Admin {
					pw, ok = AdminPassword, true
				}
				return !ok || string(plain[2]) != pw
			}
			return bytes.HasPrefix(auth, []byte("c=")) // SCRAM's client-final message, with the proof
		}})
}
