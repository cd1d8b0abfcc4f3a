package main

// check's transactional-id rights under --delivery exactly-once: asked of
// a broker with Kafka's StandardAuthorizer, and asked without fencing the
// relay that uses the id.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// defaultTxnID is the transactional id run uses for f without
// --transactional-id and --relay-id: cdc-relay-<system id>/<database>/<slot>,
// read here from the server's catalog, not from the relay's code.
func defaultTxnID(t *testing.T, f *fixture) string {
	t.Helper()
	var sysID, db string
	if err := f.connect().QueryRow(context.Background(), "SELECT system_identifier::text, current_database() FROM pg_control_system()").Scan(&sysID, &db); err != nil {
		t.Fatal(err)
	}
	return "cdc-relay-" + sysID + "/" + db + "/" + f.slot
}

// TestCheckTransactionalIDACLs runs check against a broker with Kafka's
// StandardAuthorizer as two SCRAM users with the same rights on the topics.
// User:relay may also WRITE and DESCRIBE the default transactional id
// (cdc-relay-<relay id>), User:other only DESCRIBE another id. With
// --delivery exactly-once check finds User:relay's rights, and names
// User:other's two missing ones (its FindCoordinator refused) with the
// kafka-acls.sh lines that grant them, and fails; with --transactional-id
// set to the id it may only DESCRIBE, check names WRITE (AddPartitionsToTxn
// refused). Neither user has IDEMPOTENT_WRITE on the cluster, and none is
// needed: User:relay commits a Kafka transaction under the id, and
// User:other produces idempotently, with franz-go. These are the
// transactional-id refusals on a real broker; preflight's
// TestTransactionalIDACLsFake (kfake) also has User:other pass with an id of
// its own, and check ask nothing of a transactional id at least once.
func TestCheckTransactionalIDACLs(t *testing.T) {
	t.Parallel()
	passwords := map[string]string{"relay": "relay-pw-" + randSuffix(), "other": "other-pw-" + randSuffix()}
	sb := startACLBroker(t, passwords)
	f := newFixture(t, "")
	checkpoints, orders := "cp."+f.name, f.topic("Order")
	createTopic(t, sb.Addr(), checkpoints, map[string]string{"cleanup.policy": "compact"})
	for _, name := range []string{f.dlq, orders} {
		createTopic(t, sb.Addr(), name, map[string]string{"retention.ms": "-1"})
	}
	txnID, describeOnly := defaultTxnID(t, f), "describe-only."+f.name
	for _, p := range []string{"User:relay", "User:other"} {
		sb.allow(p, kmsg.ACLResourceTypeCluster, "kafka-cluster", kmsg.ACLOperationDescribeConfigs)
		sb.allow(p, kmsg.ACLResourceTypeTopic, f.dlq, kmsg.ACLOperationWrite, kmsg.ACLOperationDescribe, kmsg.ACLOperationDescribeConfigs)
		sb.allow(p, kmsg.ACLResourceTypeTopic, checkpoints, kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationDescribe, kmsg.ACLOperationDescribeConfigs)
		sb.allow(p, kmsg.ACLResourceTypeTopic, orders, kmsg.ACLOperationWrite, kmsg.ACLOperationDescribe)
	}
	sb.allow("User:relay", kmsg.ACLResourceTypeTransactionalId, txnID, kmsg.ACLOperationWrite, kmsg.ACLOperationDescribe)
	sb.allow("User:other", kmsg.ACLResourceTypeTransactionalId, describeOnly, kmsg.ACLOperationDescribe)

	check := func(user string, extra ...string) (int, string) {
		args := f.args(append([]string{"--checkpoint-topic", checkpoints, "--kafka-sasl-mechanism", "scram-sha-512", "--kafka-sasl-username", user}, extra...)...)
		setFlag(args, "--kafka-brokers", sb.SASLAddr())
		var out strings.Builder
		code := run(commandArgs("check", args), env(map[string]string{"CDC_RELAY_KAFKA_SASL_PASSWORD": passwords[user]}), &out, &out)
		return code, out.String()
	}
	granted := func(id string) string {
		return "WRITE on transactional-id " + id + ", DESCRIBE on transactional-id " + id
	}

	// The ACLs reach the authorizer through the metadata log, and the
	// transaction coordinator may still be loading: poll until User:relay's
	// check passes, after which every ACL above is in force.
	var code int
	var out string
	defer func() {
		if t.Failed() {
			t.Logf("the last check's output:\n%s", out)
		}
	}()
	waitFor(t, 90*time.Second, "check as User:relay to find its rights on "+txnID, func() bool {
		code, out = check("relay", exactlyOnce...)
		return strings.Contains(out, granted(txnID)) && !strings.Contains(out, "lacks")
	})
	if code != exitOK || strings.Contains(out, "not checked yet") {
		t.Errorf("check as User:relay, which has every right, = %d (want %d) or leaves one unchecked:\n%s", code, exitOK, out)
	}

	code, out = check("other", exactlyOnce...)
	for _, want := range []string{
		"FAIL  Kafka: principal User:other lacks WRITE on transactional-id " + txnID + " (the principal may not even describe it), which it needs: exactly-once: the relay fences older instances and produces in Kafka transactions under it; grant it: kafka-acls.sh --bootstrap-server ... --add --allow-principal User:other --operation Write --transactional-id " + txnID + "\n",
		"FAIL  Kafka: principal User:other lacks DESCRIBE on transactional-id " + txnID + ", which it needs: exactly-once: the relay finds its transaction coordinator by it; grant it: kafka-acls.sh --bootstrap-server ... --add --allow-principal User:other --operation Describe --transactional-id " + txnID + "\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("check as User:other lacks\n%s---\n%s", want, out)
		}
	}
	if code != exitFailed {
		t.Errorf("check as User:other = %d, want %d:\n%s", code, exitFailed, out)
	}
	if strings.Contains(out, "lacks WRITE on topic") || strings.Contains(out, "lacks READ on topic") {
		t.Errorf("check as User:other names a topic right it has:\n%s", out)
	}

	// DESCRIBE without WRITE: the coordinator is found, and the WRITE probe
	// itself is refused.
	code, out = check("other", append([]string{"--transactional-id", describeOnly}, exactlyOnce...)...)
	want := "FAIL  Kafka: principal User:other lacks WRITE on transactional-id " + describeOnly + ", which it needs: exactly-once: the relay fences older instances and produces in Kafka transactions under it; grant it: kafka-acls.sh --bootstrap-server ... --add --allow-principal User:other --operation Write --transactional-id " + describeOnly + "\n"
	if code != exitFailed || !strings.Contains(out, want) || !strings.Contains(out, "DESCRIBE on transactional-id "+describeOnly+"\n") || strings.Contains(out, "lacks DESCRIBE") {
		t.Errorf("check as User:other with --transactional-id %s = %d, want %d and\n%swith DESCRIBE granted:\n%s", describeOnly, code, exitFailed, want, out)
	}

	// No IDEMPOTENT_WRITE on the cluster, and the producers work all the
	// same: a transactional one by WRITE on its id, an idempotent one by
	// WRITE on a topic (Kafka 2.8+, KIP-679).
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sasl := func(user string) kgo.Opt {
		return kgo.SASL(scram.Auth{User: user, Pass: passwords[user]}.AsSha512Mechanism())
	}
	txn, err := kgo.NewClient(kgo.SeedBrokers(sb.SASLAddr()), sasl("relay"), kgo.TransactionalID(txnID), kgo.DefaultProduceTopic(orders))
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Close()
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txn.ProduceSync(ctx, &kgo.Record{Key: []byte("k"), Headers: []kgo.RecordHeader{{Key: "id", Value: []byte("1")}}}).FirstErr(); err != nil {
		t.Fatalf("User:relay produces in a transaction under %s: %v", txnID, err)
	}
	if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("User:relay commits a transaction under %s: %v", txnID, err)
	}
	idem, err := kgo.NewClient(kgo.SeedBrokers(sb.SASLAddr()), sasl("other"), kgo.DefaultProduceTopic(orders))
	if err != nil {
		t.Fatal(err)
	}
	defer idem.Close()
	if err := idem.ProduceSync(ctx, &kgo.Record{Key: []byte("k"), Headers: []kgo.RecordHeader{{Key: "id", Value: []byte("2")}}}).FirstErr(); err != nil {
		t.Fatalf("User:other produces idempotently: %v", err)
	}
	c := consume(t, "^"+orders+"$", kgo.SeedBrokers(sb.Addr()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	c.waitIDs(60*time.Second, []int64{1, 2})
}

// TestCheckExactlyOnceNoFencing runs check --delivery exactly-once three
// times with the flags of a relay that streams in exactly-once mode under
// a steady load, so with the same (default) transactional id, while that
// relay has Kafka transactions open. check asks about the id's rights, and
// finds them (the shared broker has no authorizer), yet the relay is never
// fenced: it logs its fence line once, at its start, never says another
// instance took over, never reconnects, and a read_committed consumer gets
// every event exactly once, the events written after the checks included.
func TestCheckExactlyOnceNoFencing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	txnID := defaultTxnID(t, f)
	args := f.args(exactlyOnce...)
	c := consume(t, "^"+f.topicPrefix+`\..*`, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	r := startRelay(t, args)
	r.waitStreaming(60 * time.Second)
	waitFor(t, 60*time.Second, "the relay's fence line", func() bool { return outputCount(r, fenceLine) == 1 })
	if !strings.Contains(r.Output(), "transactional_id="+txnID) {
		t.Fatalf("the relay does not log transactional id %s:\n%s", txnID, tailString(r.Output(), 3000))
	}
	w := startPublishing(t, f, r)
	for i := range 3 {
		before := w.committed()
		code, out := runCommand(commandArgs("check", args))
		if code != exitOK || !strings.Contains(out, "WRITE on transactional-id "+txnID+", DESCRIBE on transactional-id "+txnID) {
			t.Fatalf("check %d = %d, want %d and the rights on %s:\n%s", i+1, code, exitOK, txnID, out)
		}
		// The relay goes on committing between the checks.
		w.waitCommitted(t, before+20, 60*time.Second)
	}
	w.waitCommitted(t, w.committed()+100, 60*time.Second)
	ids := w.finish(t)
	recs := c.waitIDs(2*time.Minute, ids)
	if dups := checkDelivery(t, recs, ids); dups != 0 || len(recs) != len(ids) {
		t.Errorf("read_committed: %d records for %d events, %d duplicates; want each exactly once", len(recs), len(ids), dups)
	}
	stillRunning(t, r)
	if l := fencedReports(r.Output()); len(l) > 0 {
		t.Errorf("the relay reports being fenced: %s", l[0])
	}
	if n := outputCount(r, fenceLine); n != 1 {
		t.Errorf("the relay fenced %d times, want once at its start", n)
	}
	if strings.Contains(r.Output(), "cause=kafka") {
		t.Errorf("the relay reconnected with cause kafka")
	}
	if v, err := r.metric("cdc_relay_reconnects_total"); err == nil && v != 0 {
		t.Errorf("the relay reconnected %v times", v)
	}
	t.Logf("%d events, each once, across 3 checks", len(ids))
}

// TestCheckTransactionalIDWithoutPostgres: with PostgreSQL unreachable the
// default transactional id cannot be known (the relay id needs the
// server's system identifier), so check lists its rights as not checked,
// with the two flags that make it known; --relay-id is one, and then the
// rights on cdc-relay-<relay id> are found (the shared broker has no
// authorizer).
func TestCheckTransactionalIDWithoutPostgres(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	args := f.args(exactlyOnce...)
	setFlag(args, "--pg-url", "postgres://postgres@127.0.0.1:1/relay_test?connect_timeout=5")
	code, out := runCommand(commandArgs("check", args))
	want := "WRITE on transactional-id cdc-relay-<relay id> (the relay id is not known without PostgreSQL: set --transactional-id or --relay-id), DESCRIBE on transactional-id cdc-relay-<relay id> (the relay id is not known without PostgreSQL: set --transactional-id or --relay-id)\n"
	if code != exitFailed || !strings.Contains(out, want) {
		t.Errorf("check without PostgreSQL = %d, want %d and\n%s---\n%s", code, exitFailed, want, out)
	}
	relayID := "r." + f.name
	_, out = runCommand(commandArgs("check", append(args, "--relay-id", relayID)))
	if want := "WRITE on transactional-id cdc-relay-" + relayID + ", DESCRIBE on transactional-id cdc-relay-" + relayID + "\n"; !strings.Contains(out, want) {
		t.Errorf("check without PostgreSQL, --relay-id %s: lacks\n%s---\n%s", relayID, want, out)
	}
}
