package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cdc-relay/cdc-relay/internal/kafkatest"
	"github.com/cdc-relay/cdc-relay/internal/testtier"
)

// createTopic creates a one-partition topic with configs through an
// independent client (kadm) on the broker at addr.
func createTopic(t *testing.T, addr, name string, configs map[string]string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	values := map[string]*string{}
	for k, v := range configs {
		values[k] = &v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, values, name); err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
}

// TestCheckDLQRetention: check warns when the dead-letter topic deletes
// records, whether it exists with a finite retention.ms or does not exist
// yet and would get the broker's 7 days, and says ok for retention.ms=-1.
// On the single broker it says nothing of the checkpoint's replication
// factor, and without an authorizer every right is there.
func TestCheckDLQRetention(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		retention string // "" creates no topic
		want      string
	}{
		{"missing", "", "WARN  Kafka: dead-letter topic %s deletes records after 168h0m0s (the broker's log.retention.hours=168, which a topic created on first use gets)"},
		{"finite", "3600000", "WARN  Kafka: dead-letter topic %s deletes records after 1h0m0s (retention.ms=3600000): dead letters nobody redrove are lost then; keep them: kafka-configs.sh --bootstrap-server ... --alter --entity-type topics --entity-name %s --add-config retention.ms=-1"},
		{"forever", "-1", "ok    Kafka: dead-letter topic %s keeps records until they are deleted (retention.ms=-1)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, "")
			args := f.args()
			if tc.retention != "" {
				createTopic(t, broker.Addr(), f.dlq, map[string]string{"retention.ms": tc.retention})
			}
			code, out := runCommand(commandArgs("check", args))
			want := strings.ReplaceAll(tc.want, "%s", f.dlq)
			if !strings.Contains(out, want) {
				t.Errorf("check output lacks\n%s\n---\n%s", want, out)
			}
			if code != 0 {
				t.Errorf("check = %d, want 0 (a warning fails nothing):\n%s", code, out)
			}
			if tc.retention == "" {
				// check creates nothing: the topic is still missing.
				if _, again := runCommand(commandArgs("check", args)); !strings.Contains(again, want) {
					t.Errorf("a second check lacks\n%s\n---\n%s", want, again)
				}
			}
			if strings.Contains(out, "replication factor") {
				t.Errorf("check speaks of the checkpoint's replication factor on one broker:\n%s", out)
			}
			if tc.retention != "" && !strings.Contains(out, "WRITE on topic "+f.dlq) {
				t.Errorf("check output does not say the principal may write %s:\n%s", f.dlq, out)
			}
		})
	}
}

// TestCheckACLs runs check as SASL user relay against a broker of its own
// with Kafka's StandardAuthorizer: User:relay may write the dead-letter
// topic, but not read the checkpoint topic nor write an existing topic of
// the template. check names both missing rights with the kafka-acls.sh
// line that grants them and fails. It is the topic-ACL refusal on a real
// broker; preflight's TestKafkaACLsFake (kfake) also grants the rights and
// finds check naming none.
func TestCheckACLs(t *testing.T) {
	t.Parallel()
	password := "relay-pw-" + randSuffix()
	sb := startACLBroker(t, map[string]string{"relay": password})
	f := newFixture(t, "")
	checkpoints, orders := "cp."+f.name, f.topic("Order")
	for _, name := range []string{f.dlq, checkpoints, orders} {
		createTopic(t, sb.Addr(), name, map[string]string{"retention.ms": "-1"})
	}
	allow := func(resource kmsg.ACLResourceType, name string, ops ...kmsg.ACLOperation) {
		t.Helper()
		sb.allow("User:relay", resource, name, ops...)
	}
	allow(kmsg.ACLResourceTypeCluster, "kafka-cluster", kmsg.ACLOperationDescribeConfigs)
	allow(kmsg.ACLResourceTypeTopic, f.dlq, kmsg.ACLOperationWrite, kmsg.ACLOperationDescribe, kmsg.ACLOperationDescribeConfigs)
	allow(kmsg.ACLResourceTypeTopic, checkpoints, kmsg.ACLOperationWrite, kmsg.ACLOperationDescribe)
	allow(kmsg.ACLResourceTypeTopic, orders, kmsg.ACLOperationDescribe)

	args := f.args("--checkpoint-topic", checkpoints, "--kafka-sasl-mechanism", "scram-sha-512", "--kafka-sasl-username", "relay")
	setFlag(args, "--kafka-brokers", sb.SASLAddr())
	check := func() (int, string) {
		var out strings.Builder
		code := run(commandArgs("check", args), env(map[string]string{"CDC_RELAY_KAFKA_SASL_PASSWORD": password}), &out, &out)
		return code, out.String()
	}
	lacks := []string{
		"FAIL  Kafka: principal User:relay lacks READ on topic " + checkpoints + ", which it needs: the relay reads its checkpoint at start; grant it: kafka-acls.sh --bootstrap-server ... --add --allow-principal User:relay --operation Read --topic " + checkpoints,
		"FAIL  Kafka: principal User:relay lacks WRITE on topic " + orders + ", which it needs: the template " + f.topicPrefix + ".{aggregate_type} routes events there; grant it: kafka-acls.sh --bootstrap-server ... --add --allow-principal User:relay --operation Write --topic " + orders,
	}
	code, out := check()
	for _, want := range lacks {
		if !strings.Contains(out, want) {
			t.Errorf("check output lacks\n%s\n---\n%s", want, out)
		}
	}
	if code != exitFailed {
		t.Errorf("check = %d, want %d:\n%s", code, exitFailed, out)
	}
	if !strings.Contains(out, "ok    Kafka: principal User:relay may WRITE on topic "+checkpoints+", WRITE on topic "+f.dlq) {
		t.Errorf("check output does not list the rights User:relay has:\n%s", out)
	}
	if strings.Contains(out, "lacks WRITE on topic "+f.dlq) {
		t.Errorf("check says User:relay lacks WRITE on %s, which it has:\n%s", f.dlq, out)
	}
}

// aclBroker is a Kafka broker of a test's own with SCRAM users and Kafka's
// StandardAuthorizer, denying what no ACL allows. Its PLAINTEXT listener
// is User:ANONYMOUS, a super user: the test creates topics and ACLs there
// through admin, a franz-go client.
type aclBroker struct {
	*kafkatest.Broker
	t     *testing.T
	admin *kadm.Client
}

// startACLBroker starts an aclBroker with users (name → password), closed
// at cleanup; a failed test logs the tail of its log.
func startACLBroker(t *testing.T, users map[string]string) *aclBroker {
	t.Helper()
	testtier.Need(t)
	sb, err := kafkatest.Start(kafkatest.Options{
		SASLUsers: users,
		ExtraConfig: map[string]string{
			"authorizer.class.name":          "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
			"super.users":                    "User:ANONYMOUS", // PLAINTEXT: inter-broker, controller and the test
			"allow.everyone.if.no.acl.found": "false",
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			if b, err := os.ReadFile(sb.LogPath()); err == nil {
				t.Logf("tail of the ACL broker's log:\n%s", tailString(string(b), 4000))
			}
		}
		sb.Close()
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(sb.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &aclBroker{Broker: sb, t: t, admin: kadm.NewClient(cl)}
}

// allow grants principal ops on the literal resource name, from any host.
// The broker's authorizer learns them through the metadata log, a moment
// later: poll for their effect.
func (b *aclBroker) allow(principal string, resource kmsg.ACLResourceType, name string, ops ...kadm.ACLOperation) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := kafkatest.Allow(ctx, b.admin, principal, resource, name, ops...); err != nil {
		b.t.Fatal(err)
	}
}
