package preflight

// check's Kafka checks against franz-go's kfake, an in-process cluster with
// SASL users and ACLs: the principal's rights on topics and transactional
// ids, a refused password and the checkpoint's replication on three
// brokers. No service is started. cmd/cdc-relay keeps one test of each
// refusal against a real broker with Kafka's StandardAuthorizer
// (TestCheckACLs, TestCheckTransactionalIDACLs, TestKafkaSecurity).

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cdc-relay/cdc-relay/internal/kafkatest"
	"github.com/cdc-relay/cdc-relay/internal/kfaketest"
	"github.com/cdc-relay/cdc-relay/relay"
)

// fakeCluster starts a kfake cluster (kfaketest.Start) and returns it with
// its admin's client. With users, it denies what no ACL allows.
func fakeCluster(t *testing.T, users map[string]string, opts ...kfake.Opt) (*kfake.Cluster, *kadm.Client) {
	t.Helper()
	if users != nil {
		opts = append(opts, kfake.EnableACLs())
	}
	c := kfaketest.Start(t, users, opts...)
	clientOpts := []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}
	if users != nil {
		clientOpts = kfaketest.AdminOpts(c)
	}
	cl, err := kgo.NewClient(clientOpts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return c, kadm.NewClient(cl)
}

// createFakeTopic creates a one-partition topic with rf replicas and configs.
func createFakeTopic(t *testing.T, adm *kadm.Client, name string, rf int16, configs map[string]string) {
	t.Helper()
	values := map[string]*string{}
	for k, v := range configs {
		values[k] = &v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 1, rf, values, name); err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
}

// allowFake grants principal ops on the literal resource name, from any host.
func allowFake(t *testing.T, adm *kadm.Client, principal string, resource kmsg.ACLResourceType, name string, ops ...kadm.ACLOperation) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := kafkatest.Allow(ctx, adm, principal, resource, name, ops...); err != nil {
		t.Fatal(err)
	}
}

// fakeConfig is the configuration check reads for a relay on c, with the
// topics of prefix, as SASL user user (none when user is "").
func fakeConfig(c *kfake.Cluster, prefix, user, password string) *relay.Config {
	cfg := &relay.Config{
		KafkaBrokers:    c.ListenAddrs(),
		TopicTemplate:   prefix + ".{aggregate_type}",
		DLQTopic:        prefix + ".dlq",
		CheckpointTopic: prefix + ".checkpoints",
		Slot:            "slot_" + prefix,
		KafkaSASL:       "none",
	}
	if user != "" {
		cfg.KafkaSASL, cfg.KafkaSASLUser, cfg.KafkaSASLPassword = "scram-sha-512", user, password
	}
	return cfg
}

// checkKafka runs check's Kafka checks alone and returns how many failed
// and what they printed.
func checkKafka(t *testing.T, cfg *relay.Config) (int, string) {
	t.Helper()
	var out strings.Builder
	c := &checker{out: &out}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c.kafka(ctx, cfg)
	return c.failed, out.String()
}

// TestKafkaACLsFake (kfake; TestCheckACLs keeps the first refusal on a
// real broker): User:relay may write the dead-letter topic, but not read
// the checkpoint topic nor write an existing topic of the template. check
// names both missing rights with the kafka-acls.sh line that grants them
// and fails, and lists what the principal has; once they are granted, it
// names none.
func TestKafkaACLsFake(t *testing.T) {
	t.Parallel()
	const password = "relay-pw"
	c, adm := fakeCluster(t, map[string]string{"relay": password})
	cfg := fakeConfig(c, "acls", "relay", password)
	orders := "acls.Order"
	for _, name := range []string{cfg.DLQTopic, cfg.CheckpointTopic, orders} {
		createFakeTopic(t, adm, name, 1, map[string]string{"retention.ms": "-1"})
	}
	allow := func(resource kmsg.ACLResourceType, name string, ops ...kmsg.ACLOperation) {
		t.Helper()
		allowFake(t, adm, "User:relay", resource, name, ops...)
	}
	allow(kmsg.ACLResourceTypeCluster, "kafka-cluster", kmsg.ACLOperationDescribeConfigs)
	allow(kmsg.ACLResourceTypeTopic, cfg.DLQTopic, kmsg.ACLOperationWrite, kmsg.ACLOperationDescribe, kmsg.ACLOperationDescribeConfigs)
	allow(kmsg.ACLResourceTypeTopic, cfg.CheckpointTopic, kmsg.ACLOperationWrite, kmsg.ACLOperationDescribe)
	allow(kmsg.ACLResourceTypeTopic, orders, kmsg.ACLOperationDescribe)

	lacks := []string{
		"FAIL  Kafka: principal User:relay lacks READ on topic " + cfg.CheckpointTopic + ", which it needs: the relay reads its checkpoint at start; grant it: kafka-acls.sh --bootstrap-server ... --add --allow-principal User:relay --operation Read --topic " + cfg.CheckpointTopic,
		"FAIL  Kafka: principal User:relay lacks WRITE on topic " + orders + ", which it needs: the template " + cfg.TopicTemplate + " routes events there; grant it: kafka-acls.sh --bootstrap-server ... --add --allow-principal User:relay --operation Write --topic " + orders,
	}
	failed, out := checkKafka(t, cfg)
	for _, want := range lacks {
		if !strings.Contains(out, want) {
			t.Errorf("check output lacks\n%s\n---\n%s", want, out)
		}
	}
	if failed != len(lacks) {
		t.Errorf("%d checks failed, want %d:\n%s", failed, len(lacks), out)
	}
	if !strings.Contains(out, "ok    Kafka: principal User:relay may WRITE on topic "+cfg.CheckpointTopic+", WRITE on topic "+cfg.DLQTopic) {
		t.Errorf("check output does not list the rights User:relay has:\n%s", out)
	}
	if strings.Contains(out, "lacks WRITE on topic "+cfg.DLQTopic) {
		t.Errorf("check says User:relay lacks WRITE on %s, which it has:\n%s", cfg.DLQTopic, out)
	}

	allow(kmsg.ACLResourceTypeTopic, cfg.CheckpointTopic, kmsg.ACLOperationRead)
	allow(kmsg.ACLResourceTypeTopic, orders, kmsg.ACLOperationWrite)
	failed, out = checkKafka(t, cfg)
	if failed != 0 || strings.Contains(out, "lacks") {
		t.Errorf("after the grants, %d checks failed:\n%s", failed, out)
	}
	if !strings.Contains(out, "READ on topic "+cfg.CheckpointTopic) || !strings.Contains(out, "WRITE on topic "+orders) {
		t.Errorf("after the grants, check does not list READ on %s and WRITE on %s:\n%s", cfg.CheckpointTopic, orders, out)
	}
}

// TestTransactionalIDACLsFake (kfake; TestCheckTransactionalIDACLs keeps
// User:other's refusal on a real broker): two SCRAM users with the same
// rights on the topics. User:relay may also WRITE and DESCRIBE the
// default transactional id, User:other only an id of its own, and DESCRIBE
// another. With --delivery exactly-once check finds User:relay's rights
// and names User:other's two missing ones with the kafka-acls.sh lines
// that grant them; with --transactional-id set to its own id User:other
// passes, and to the one it may only DESCRIBE, check names WRITE; in
// at-least-once mode check does not ask about a transactional id at all.
func TestTransactionalIDACLsFake(t *testing.T) {
	t.Parallel()
	passwords := map[string]string{"relay": "relay-pw", "other": "other-pw"}
	c, adm := fakeCluster(t, passwords)
	base := fakeConfig(c, "txnacls", "", "")
	orders := "txnacls.Order"
	createFakeTopic(t, adm, base.CheckpointTopic, 1, map[string]string{"cleanup.policy": "compact"})
	for _, name := range []string{base.DLQTopic, orders} {
		createFakeTopic(t, adm, name, 1, map[string]string{"retention.ms": "-1"})
	}
	base.RelayID = "r.txnacls"
	txnID, ownID, describeOnly := relay.TransactionalID(base, base.RelayID), "own.txnacls", "describe-only.txnacls"
	for _, p := range []string{"User:relay", "User:other"} {
		allowFake(t, adm, p, kmsg.ACLResourceTypeCluster, "kafka-cluster", kmsg.ACLOperationDescribeConfigs)
		allowFake(t, adm, p, kmsg.ACLResourceTypeTopic, base.DLQTopic, kmsg.ACLOperationWrite, kmsg.ACLOperationDescribe, kmsg.ACLOperationDescribeConfigs)
		allowFake(t, adm, p, kmsg.ACLResourceTypeTopic, base.CheckpointTopic, kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationDescribe, kmsg.ACLOperationDescribeConfigs)
		allowFake(t, adm, p, kmsg.ACLResourceTypeTopic, orders, kmsg.ACLOperationWrite, kmsg.ACLOperationDescribe)
	}
	allowFake(t, adm, "User:relay", kmsg.ACLResourceTypeTransactionalId, txnID, kmsg.ACLOperationWrite, kmsg.ACLOperationDescribe)
	allowFake(t, adm, "User:other", kmsg.ACLResourceTypeTransactionalId, ownID, kmsg.ACLOperationWrite, kmsg.ACLOperationDescribe)
	allowFake(t, adm, "User:other", kmsg.ACLResourceTypeTransactionalId, describeOnly, kmsg.ACLOperationDescribe)

	check := func(user string, exactlyOnce bool, transactionalID string) (int, string) {
		t.Helper()
		cfg := *base
		cfg.KafkaSASL, cfg.KafkaSASLUser, cfg.KafkaSASLPassword = "scram-sha-512", user, passwords[user]
		cfg.ExactlyOnce, cfg.TransactionalID = exactlyOnce, transactionalID
		return checkKafka(t, &cfg)
	}
	granted := func(id string) string {
		return "WRITE on transactional-id " + id + ", DESCRIBE on transactional-id " + id
	}

	failed, out := check("relay", true, "")
	if failed != 0 || !strings.Contains(out, granted(txnID)) || strings.Contains(out, "lacks") || strings.Contains(out, "not checked yet") {
		t.Errorf("check as User:relay, which has every right: %d failed, want 0, its rights on %s and none unchecked:\n%s", failed, txnID, out)
	}

	failed, out = check("other", true, "")
	for _, want := range []string{
		"FAIL  Kafka: principal User:other lacks WRITE on transactional-id " + txnID + " (the principal may not even describe it), which it needs: exactly-once: the relay fences older instances and produces in Kafka transactions under it; grant it: kafka-acls.sh --bootstrap-server ... --add --allow-principal User:other --operation Write --transactional-id " + txnID + "\n",
		"FAIL  Kafka: principal User:other lacks DESCRIBE on transactional-id " + txnID + ", which it needs: exactly-once: the relay finds its transaction coordinator by it; grant it: kafka-acls.sh --bootstrap-server ... --add --allow-principal User:other --operation Describe --transactional-id " + txnID + "\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("check as User:other lacks\n%s---\n%s", want, out)
		}
	}
	if failed != 2 {
		t.Errorf("check as User:other: %d failed, want 2:\n%s", failed, out)
	}
	if strings.Contains(out, "lacks WRITE on topic") || strings.Contains(out, "lacks READ on topic") {
		t.Errorf("check as User:other names a topic right it has:\n%s", out)
	}

	failed, out = check("other", true, ownID)
	if failed != 0 || !strings.Contains(out, granted(ownID)) || strings.Contains(out, txnID) {
		t.Errorf("check as User:other with --transactional-id %s: %d failed, want 0, its rights on %s and no word of %s:\n%s", ownID, failed, ownID, txnID, out)
	}

	// DESCRIBE without WRITE: the coordinator is found, and the WRITE probe
	// itself is refused.
	failed, out = check("other", true, describeOnly)
	want := "FAIL  Kafka: principal User:other lacks WRITE on transactional-id " + describeOnly + ", which it needs: exactly-once: the relay fences older instances and produces in Kafka transactions under it; grant it: kafka-acls.sh --bootstrap-server ... --add --allow-principal User:other --operation Write --transactional-id " + describeOnly + "\n"
	if failed != 1 || !strings.Contains(out, want) || !strings.Contains(out, "DESCRIBE on transactional-id "+describeOnly+"\n") || strings.Contains(out, "lacks DESCRIBE") {
		t.Errorf("check as User:other with --transactional-id %s: %d failed, want 1 and\n%swith DESCRIBE granted:\n%s", describeOnly, failed, want, out)
	}

	failed, out = check("other", false, "")
	if failed != 0 || strings.Contains(out, "transactional-id") {
		t.Errorf("check as User:other at least once: %d failed, want 0 and no transactional-id:\n%s", failed, out)
	}
}

// TestKafkaAuthenticationFailedFake (kfake; TestKafkaSecurity keeps one
// refused password on a real broker): a wrong password, or another user's,
// with PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, is "authentication failed",
// one failed check, and the password never shows. The refusal is
// kfaketest.RefuseCredentials': Kafka's answer, which kfake does not give.
func TestKafkaAuthenticationFailedFake(t *testing.T) {
	t.Parallel()
	users := map[string]string{"relay": "relay-pw-1", "reader": "reader-pw-2"}
	c, _ := fakeCluster(t, users, kfake.NumBrokers(1))
	refused := kfaketest.RefuseCredentials(c, users)
	for _, tc := range []struct{ mechanism, password string }{
		{"plain", "wrong-pw-3"},
		{"scram-sha-256", "wrong-pw-3"},
		{"scram-sha-512", users["reader"]},
	} {
		t.Run(tc.mechanism, func(t *testing.T) {
			cfg := fakeConfig(c, "auth", "relay", tc.password)
			cfg.KafkaSASL = tc.mechanism
			failed, out := checkKafka(t, cfg)
			if want := "FAIL  Kafka: authentication failed ("; failed != 1 || !strings.Contains(out, want) {
				t.Errorf("%d failed, want 1 and %q:\n%s", failed, want, out)
			}
			for _, pw := range []string{tc.password, users["relay"], users["reader"]} {
				if strings.Contains(out, pw) {
					t.Errorf("a SASL password appears in check's output:\n%s", out)
				}
			}
		})
	}
	if refused.Hits() < 3 {
		t.Errorf("the broker refused %d authentications, want at least 3", refused.Hits())
	}
	// The right password passes the same broker.
	cfg := fakeConfig(c, "auth", "relay", users["relay"])
	cfg.KafkaSASL = "plain"
	_, out := checkKafka(t, cfg)
	if want := "ok    Kafka: 1 broker(s) reachable via " + c.ListenAddrs()[0] + "\n"; !strings.Contains(out, want) || strings.Contains(out, "authentication failed") {
		t.Errorf("with the right password: lacks %q:\n%s", want, out)
	}
}

// TestCheckpointReplicasFake (kfake, three brokers; the test Kafka is a
// single node): check warns that a checkpoint topic with one replica can
// lose the checkpoint with a broker, and says nothing against one with
// three.
func TestCheckpointReplicasFake(t *testing.T) {
	t.Parallel()
	c, adm := fakeCluster(t, nil, kfake.NumBrokers(3))
	for _, tc := range []struct {
		rf   int16
		want string
		warn bool
	}{
		{1, "WARN  Kafka: checkpoint topic %s has replication factor 1 on a cluster of 3 brokers: losing a broker can lose the checkpoint", true},
		{3, "ok    Kafka: checkpoint topic %s has replication factor 3 on 3 brokers", false},
	} {
		t.Run(strings.Repeat("r", int(tc.rf)), func(t *testing.T) {
			cfg := fakeConfig(c, "rf"+strings.Repeat("r", int(tc.rf)), "", "")
			createFakeTopic(t, adm, cfg.CheckpointTopic, tc.rf, map[string]string{"cleanup.policy": "compact"})
			_, out := checkKafka(t, cfg)
			want := strings.ReplaceAll(tc.want, "%s", cfg.CheckpointTopic)
			if !strings.Contains(out, want) {
				t.Errorf("check output lacks\n%s\n---\n%s", want, out)
			}
			if !tc.warn && strings.Contains(out, "WARN  Kafka: checkpoint topic") {
				t.Errorf("check warns of a checkpoint topic with %d replicas:\n%s", tc.rf, out)
			}
		})
	}
}
