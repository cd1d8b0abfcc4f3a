package preflight

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cdc-relay/cdc-relay/checkpoint"
	"github.com/cdc-relay/cdc-relay/internal/backoff"
	"github.com/cdc-relay/cdc-relay/relay"
	"github.com/cdc-relay/cdc-relay/router"
)

// The Kafka checks of `cdc-relay check` beyond reachability: what the
// relay's principal may do on the topics it uses and, in exactly-once
// mode, on its transactional id (aclNeeds), how long the
// dead-letter topic keeps records, and how many copies the checkpoint topic
// has. They read metadata, configurations and a transaction's state, and
// change nothing.

// aclOperation is a Kafka ACL operation, numbered as Kafka numbers them
// (AclOperation): bit 1<<op of a metadata answer's authorized operations.
type aclOperation int

const (
	aclRead     aclOperation = 3
	aclWrite    aclOperation = 4
	aclDescribe aclOperation = 8
)

func (o aclOperation) String() string {
	switch o {
	case aclRead:
		return "READ"
	case aclWrite:
		return "WRITE"
	case aclDescribe:
		return "DESCRIBE"
	}
	return "operation " + strconv.Itoa(int(o))
}

// aclResource is the kind of Kafka resource an ACL is on.
type aclResource string

// The kinds of resource the relay needs rights on. Each is also the
// kafka-acls.sh option that names such a resource.
const (
	topicResource aclResource = "topic"
	// transactionalIDResource is a transactional id (Kafka's resource type
	// TransactionalId), which only --delivery exactly-once uses.
	transactionalIDResource aclResource = "transactional-id"
)

// aclNeed is one right the relay's principal needs.
type aclNeed struct {
	resource aclResource
	name     string
	op       aclOperation
	why      string
}

// aclVerdict is what a probe found out about a need: has is meaningful
// only when known.
type aclVerdict struct {
	need  aclNeed
	known bool
	has   bool
	note  string // why it is not known, or what was found
	// coordinator is set when a transaction coordinator was not
	// available to answer: worth asking again.
	coordinator bool
}

// aclProbe tells, for needs on one kind of resource, whether the principal
// has them.
type aclProbe func(ctx context.Context, k *kafkaView, needs []aclNeed) []aclVerdict

// aclProbes are the probes by resource kind.
var aclProbes = map[aclResource]aclProbe{topicResource: probeTopicACLs, transactionalIDResource: probeTransactionalIDACLs}

// kafkaView is what the metadata with the principal's authorized
// operations told about the cluster, and the clients to ask more.
type kafkaView struct {
	client  *kgo.Client
	adm     *kadm.Client
	brokers int
	topics  kadm.TopicDetails
}

// checkClient is a franz-go client with the relay's TLS and SASL settings,
// refusing at once a SCRAM username the mechanism cannot use, as run does.
func checkClient(cfg *relay.Config) (*kgo.Client, error) {
	sec, err := relay.CheckedKafkaSecurity(cfg)
	if err != nil {
		return nil, err
	}
	return kgo.NewClient(append(relay.ClientOptions(cfg, sec), kgo.RequestRetries(2), kgo.RetryTimeout(10*time.Second))...)
}

// newKafkaView holds md, the metadata of every topic the principal may
// describe, asked for with kadm.WithAuthorizedOps.
func newKafkaView(client *kgo.Client, md kadm.Metadata) *kafkaView {
	return &kafkaView{client: client, adm: kadm.NewClient(client), brokers: len(md.Brokers), topics: md.Topics}
}

// describe adds the metadata of names not in the view yet, which come back
// unknown or forbidden. No metadata request creates a topic: kadm leaves
// AllowAutoTopicCreation false, where Kafka's default is true.
func (k *kafkaView) describe(ctx context.Context, names ...string) error {
	for _, n := range names {
		if t, seen := k.topics[n]; seen && t.Err == nil {
			continue
		}
		// One topic a request: kadm fails a whole answer that refuses any
		// topic, and a refusal is what this topic's verdict needs.
		md, err := k.adm.Metadata(kadm.WithAuthorizedOps(ctx), n)
		var denied *kadm.AuthError
		switch {
		case errors.As(err, &denied):
			k.topics[n] = kadm.TopicDetail{Topic: n, Err: denied.Err}
		case err != nil:
			return fmt.Errorf("read metadata: %w", err)
		default:
			if t, ok := md.Topics[n]; ok {
				k.topics[n] = t
			}
		}
	}
	return nil
}

// aclNeeds lists the rights the relay's principal needs: WRITE on the
// dead-letter topic and on every existing topic the template can route to,
// READ and WRITE on the checkpoint topic (read at start, written as the
// relay confirms), and with --delivery exactly-once WRITE and DESCRIBE on
// its transactional id txnID (unknownTxnID when the relay id is not known).
//
// IDEMPOTENT_WRITE on the cluster is not among them: since Kafka 2.8
// (KIP-679) an idempotent producer's InitProducerID passes with WRITE on any
// topic instead, and a transactional one's needs only WRITE on its
// transactional id; Produce asks for neither.
func aclNeeds(cfg *relay.Config, k *kafkaView, txnID string) []aclNeed {
	needs := []aclNeed{
		{topicResource, cfg.CheckpointTopic, aclRead, "the relay reads its checkpoint at start"},
		{topicResource, cfg.CheckpointTopic, aclWrite, "the relay writes its checkpoint as it confirms"},
		{topicResource, cfg.DLQTopic, aclWrite, "invalid events go there"},
	}
	if rt, err := router.New(cfg.TopicTemplate); err == nil {
		match := rt.Matcher()
		var names []string
		for name, t := range k.topics {
			if t.Err == nil && !t.IsInternal && name != cfg.DLQTopic && name != cfg.CheckpointTopic && match(name) {
				names = append(names, name)
			}
		}
		sort.Strings(names)
		for _, name := range names {
			needs = append(needs, aclNeed{topicResource, name, aclWrite, "the template " + cfg.TopicTemplate + " routes events there"})
		}
	}
	if cfg.ExactlyOnce {
		needs = append(needs,
			aclNeed{transactionalIDResource, txnID, aclWrite, "exactly-once: the relay fences older instances and produces in Kafka transactions under it"},
			aclNeed{transactionalIDResource, txnID, aclDescribe, "exactly-once: the relay finds its transaction coordinator by it"})
	}
	return needs
}

// unknownTxnID stands for the default transactional id when check could
// not learn the relay id (PostgreSQL not reached, no --relay-id).
const unknownTxnID = "cdc-relay-<relay id>"

// txnProbeTopic is the topic the WRITE probe names. A space is not allowed
// in a topic name, so no topic of this name can exist.
const txnProbeTopic = "cdc-relay check: no such topic"

// Kafka error codes of the transactional-id probes.
const (
	kafkaUnknownTopic          = 3
	kafkaTopicAuthorizationErr = 29
	kafkaInvalidTopic          = 17
	kafkaTxnAuthorizationErr   = 53
	kafkaOperationNotTried     = 55
	kafkaTxnIDNotFound         = 105
)

// probeTransactionalIDACLs asks the broker's own authorizer, with one
// request per right that needs it and changes no transaction:
//
//   - DESCRIBE: DescribeTransactions (KIP-664) for the id, read only; kgo
//     first sends FindCoordinator with key type transaction, which needs
//     DESCRIBE as well. Both answer TRANSACTIONAL_ID_AUTHORIZATION_FAILED
//     without it.
//   - WRITE: AddPartitionsToTxn v3 (the client version) for producer id -1,
//     epoch -1 and partition 0 of txnProbeTopic. The broker checks WRITE on
//     the transactional id first (TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
//     then the topic (TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION),
//     and answers a refused or missing partition itself: the transaction
//     coordinator never sees the request. Were it to, producer id -1 matches
//     no producer, and the coordinator answers INVALID_PRODUCER_ID_MAPPING
//     without a change.
//
// Neither can fence a running relay: what fences a transactional id is an
// InitProducerID for it, which bumps its epoch and aborts its open
// transaction, and check never sends one (nor EndTxn, nor any request
// with a producer id of the relay's). DescribeAcls is not used: it needs
// DESCRIBE on the cluster, which a relay's principal seldom has, and would
// leave the evaluation of prefixed, wildcard and DENY entries, super.users
// and custom authorizers to check, where these requests get the
// authorizer's own answer.
//
// A cluster's first FindCoordinator for a transaction makes the broker
// create __transaction_state, and its coordinators answer
// COORDINATOR_NOT_AVAILABLE until it is loaded: the probes wait for them,
// txnCoordinatorWait at most for both.
func probeTransactionalIDACLs(ctx context.Context, k *kafkaView, needs []aclNeed) []aclVerdict {
	ctx, cancel := context.WithTimeout(ctx, txnCoordinatorWait)
	defer cancel()
	out := make([]aclVerdict, 0, len(needs))
	for _, n := range needs {
		var probe func(context.Context, *kgo.Client, aclNeed) aclVerdict
		switch n.op {
		case aclWrite:
			probe = probeTxnWrite
		case aclDescribe:
			probe = probeTxnDescribe
		}
		v := aclVerdict{need: n}
		switch {
		case n.name == unknownTxnID:
			v.note = "the relay id is not known without PostgreSQL: set --transactional-id or --relay-id"
		case probe == nil:
			v.note = "no probe for " + n.op.String()
		default:
			b := backoff.Backoff{Max: 2 * time.Second}
			for v = probe(ctx, k.client, n); v.coordinator; v = probe(ctx, k.client, n) {
				if b.Wait(ctx) != nil {
					v.note = "no transaction coordinator answered within " + txnCoordinatorWait.String() + ": run check again"
					break
				}
			}
		}
		out = append(out, v)
	}
	return out
}

// txnCoordinatorWait bounds the transactional-id probes' wait for a
// transaction coordinator.
const txnCoordinatorWait = 30 * time.Second

// probeTxnWrite is the WRITE probe of probeTransactionalIDACLs.
func probeTxnWrite(ctx context.Context, client *kgo.Client, n aclNeed) aclVerdict {
	v := aclVerdict{need: n}
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = n.name, -1, -1
	t := kmsg.NewAddPartitionsToTxnRequestTopic()
	t.Topic, t.Partitions = txnProbeTopic, []int32{0}
	req.Topics = append(req.Topics, t)
	// kmsg, not kadm: AddPartitionsToTxn is a transactional producer's
	// request, which kadm does not make. kgo sends it to the id's
	// coordinator, pinned to v3: v4+ is the brokers' own (CLUSTER_ACTION).
	resp, err := req.RequestWith(ctx, client)
	code := int16(-1)
	if err == nil {
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				code = rp.ErrorCode
			}
		}
	}
	return txnVerdict(v, err, code, kafkaInvalidTopic, kafkaTopicAuthorizationErr, kafkaUnknownTopic, kafkaOperationNotTried)
}

// probeTxnDescribe is the DESCRIBE probe of probeTransactionalIDACLs.
func probeTxnDescribe(ctx context.Context, client *kgo.Client, n aclNeed) aclVerdict {
	v := aclVerdict{need: n}
	described, err := kadm.NewClient(client).DescribeTransactions(ctx, n.name)
	code := int16(-1)
	if st, ok := described[n.name]; ok {
		code = 0
		var kafkaErr *kerr.Error
		if errors.As(st.Err, &kafkaErr) {
			code = kafkaErr.Code
		}
		err = nil // the state's own code says more than the request's error
	}
	// kadm returns a state refused for the id as *kadm.AuthError, which
	// errors.Is matches to TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
	return txnVerdict(v, err, code, 0, kafkaTxnIDNotFound)
}

// txnVerdict reads a transactional-id probe's answer: err from the request
// (a FindCoordinator refused for the id comes back here), else the answer's
// code, which is one of granted when the right is there. A coordinator not
// available (yet) sets v.coordinator: ask again.
func txnVerdict(v aclVerdict, err error, code int16, granted ...int16) aclVerdict {
	answer := err
	if answer == nil && code > 0 {
		answer = kerr.ErrorForCode(code)
	}
	switch {
	case errors.Is(answer, kerr.CoordinatorNotAvailable) || errors.Is(answer, kerr.CoordinatorLoadInProgress) || errors.Is(answer, kerr.NotCoordinator):
		v.coordinator = true
		v.note = answer.Error()
	case errors.Is(err, kerr.TransactionalIDAuthorizationFailed) || (err == nil && code == kafkaTxnAuthorizationErr):
		v.known, v.has = true, false
		if err != nil && v.need.op != aclDescribe {
			v.note = "the principal may not even describe it" // FindCoordinator refused
		}
	case err != nil:
		v.note = err.Error()
	case slices.Contains(granted, code):
		v.known, v.has = true, true
	case code == -1:
		v.note = "no answer for it"
	default:
		v.note = "the broker answered " + kerr.ErrorForCode(code).Error()
	}
	return v
}

// probeTopicACLs reads the principal's rights on each topic from the
// metadata's authorized operations (KIP-430), which a principal gets for
// any topic it may describe without any right on the ACLs themselves.
func probeTopicACLs(_ context.Context, k *kafkaView, needs []aclNeed) []aclVerdict {
	out := make([]aclVerdict, 0, len(needs))
	for _, n := range needs {
		v := aclVerdict{need: n}
		t, ok := k.topics[n.name]
		var kafkaErr *kerr.Error
		switch {
		case !ok || errors.Is(t.Err, kerr.UnknownTopicOrPartition):
			v.note = "does not exist yet"
		case errors.Is(t.Err, kerr.TopicAuthorizationFailed):
			v.known, v.has = true, false
			v.note = "the principal may not even describe it"
		case errors.As(t.Err, &kafkaErr):
			v.note = "metadata error " + strconv.Itoa(int(kafkaErr.Code))
		case t.Err != nil:
			v.note = "metadata error " + t.Err.Error()
		case len(t.AuthorizedOperations) == 0:
			// Any right at all includes DESCRIBE, which the answer needs:
			// none is the broker's "omitted" (INT32_MIN).
			v.note = "the broker does not report authorized operations"
		default:
			v.known = true
			v.has = slices.Contains(t.AuthorizedOperations, kadm.ACLOperation(n.op))
		}
		out = append(out, v)
	}
	return out
}

// acls reports each right the principal lacks, and in one line what it has.
func (c *checker) acls(ctx context.Context, cfg *relay.Config, k *kafkaView) {
	byKind := map[aclResource][]aclNeed{}
	var kinds []aclResource
	for _, n := range aclNeeds(cfg, k, c.transactionalID(cfg)) {
		if _, ok := byKind[n.resource]; !ok {
			kinds = append(kinds, n.resource)
		}
		byKind[n.resource] = append(byKind[n.resource], n)
	}
	principal := "the relay's principal"
	if cfg.KafkaSASL != "none" && cfg.KafkaSASLUser != "" {
		principal = "principal User:" + cfg.KafkaSASLUser
	}
	var granted, unknown []string
	for _, kind := range kinds {
		probe, ok := aclProbes[kind]
		if !ok {
			for _, n := range byKind[kind] {
				unknown = append(unknown, fmt.Sprintf("%s on %s %s (not checked)", n.op, n.resource, n.name))
			}
			continue
		}
		for _, v := range probe(ctx, k, byKind[kind]) {
			n := v.need
			switch {
			case !v.known:
				unknown = append(unknown, fmt.Sprintf("%s on %s %s (%s)", n.op, n.resource, n.name, v.note))
			case v.has:
				granted = append(granted, fmt.Sprintf("%s on %s %s", n.op, n.resource, n.name))
			default:
				note := ""
				if v.note != "" {
					note = " (" + v.note + ")"
				}
				c.fail("Kafka: %s lacks %s on %s %s%s, which it needs: %s; grant it: kafka-acls.sh --bootstrap-server ... --add --allow-principal %s --operation %s --%s %s",
					principal, n.op, n.resource, n.name, note, n.why, aclPrincipalArg(principal), aclOpArg(n.op), n.resource, n.name)
			}
		}
	}
	if len(granted) > 0 {
		c.ok("Kafka: %s may %s", principal, strings.Join(granted, ", "))
	}
	if len(unknown) > 0 {
		c.ok("Kafka: not checked yet: %s", strings.Join(unknown, ", "))
	}
}

// transactionalID is the transactional id run would use, from
// --transactional-id, else the relay id (--relay-id, else the one made of
// the server c identified and --slot); unknownTxnID without either.
func (c *checker) transactionalID(cfg *relay.Config) string {
	relayID := cfg.RelayID
	switch {
	case cfg.TransactionalID != "" || relayID != "":
	case c.server != nil:
		relayID = checkpoint.DefaultRelayID(*c.server, cfg.Slot)
	default:
		return unknownTxnID
	}
	return relay.TransactionalID(cfg, relayID)
}

// aclPrincipalArg is the --allow-principal argument for principal.
func aclPrincipalArg(principal string) string {
	if p, ok := strings.CutPrefix(principal, "principal "); ok {
		return p
	}
	return "User:<the relay's principal>"
}

// aclOpArg is kafka-acls.sh's name of op.
func aclOpArg(op aclOperation) string {
	s := op.String()
	return s[:1] + strings.ToLower(s[1:])
}

// topicConfigs reads the configuration of topic.
func (k *kafkaView) topicConfigs(ctx context.Context, topic string) (map[string]string, error) {
	rcs, err := k.adm.DescribeTopicConfigs(ctx, topic)
	return configValues(rcs, topic, err)
}

// brokerConfigs reads the configuration of broker id.
func (k *kafkaView) brokerConfigs(ctx context.Context, id int32) (map[string]string, error) {
	rcs, err := k.adm.DescribeBrokerConfigs(ctx, id)
	return configValues(rcs, strconv.Itoa(int(id)), err)
}

// configValues is the set values of resource name in rcs, an answer to
// DescribeConfigs that returned err.
func configValues(rcs kadm.ResourceConfigs, name string, err error) (map[string]string, error) {
	if err != nil {
		return nil, err
	}
	rc, err := rcs.On(name, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, c := range rc.Configs {
		if c.Value != nil {
			out[c.Key] = *c.Value
		}
	}
	return out, nil
}

// dlqRetention warns when the dead-letter topic deletes records: with
// Kafka's default of 7 days, dead letters nobody redrove are gone.
func (c *checker) dlqRetention(ctx context.Context, cfg *relay.Config, k *kafkaView, brokerID int32) {
	t, exists := k.topics[cfg.DLQTopic]
	exists = exists && t.Err == nil
	var ms int64
	var from string
	if exists {
		conf, err := k.topicConfigs(ctx, cfg.DLQTopic)
		if err != nil {
			c.warn("Kafka: cannot read the retention of dead-letter topic %s (%v): the principal needs DESCRIBE_CONFIGS on it; keep dead letters until they are redriven (retention.ms=-1)", cfg.DLQTopic, err)
			return
		}
		v, err := strconv.ParseInt(conf["retention.ms"], 10, 64)
		if err != nil {
			c.warn("Kafka: dead-letter topic %s has retention.ms %q, not a number", cfg.DLQTopic, conf["retention.ms"])
			return
		}
		ms, from = v, fmt.Sprintf("retention.ms=%d", v)
	} else {
		conf, err := k.brokerConfigs(ctx, brokerID)
		if err != nil {
			c.warn("Kafka: dead-letter topic %s does not exist and the broker's log.retention.* cannot be read (%v): create it with retention.ms=-1, so dead letters stay until they are redriven", cfg.DLQTopic, err)
			return
		}
		var ok bool
		ms, from, ok = brokerRetention(conf)
		if !ok {
			c.warn("Kafka: dead-letter topic %s does not exist and the broker's retention is unknown: create it with retention.ms=-1, so dead letters stay until they are redriven", cfg.DLQTopic)
			return
		}
		from = "the broker's " + from + ", which a topic created on first use gets"
	}
	if ms < 0 {
		c.ok("Kafka: dead-letter topic %s keeps records until they are deleted (%s)", cfg.DLQTopic, from)
		return
	}
	c.warn("Kafka: dead-letter topic %s deletes records after %s (%s): dead letters nobody redrove are lost then; keep them: kafka-configs.sh --bootstrap-server ... --alter --entity-type topics --entity-name %s --add-config retention.ms=-1",
		cfg.DLQTopic, time.Duration(ms)*time.Millisecond, from, cfg.DLQTopic)
}

// brokerRetention is the broker's log retention in milliseconds from
// log.retention.ms, else .minutes, else .hours, as Kafka resolves it.
func brokerRetention(conf map[string]string) (ms int64, from string, ok bool) {
	for _, u := range []struct {
		key  string
		unit int64
	}{{"log.retention.ms", 1}, {"log.retention.minutes", 60_000}, {"log.retention.hours", 3_600_000}} {
		s := conf[u.key]
		if s == "" {
			continue
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			continue
		}
		if v < 0 {
			return -1, u.key + "=" + s, true
		}
		return v * u.unit, u.key + "=" + s, true
	}
	return 0, "", false
}

// minCheckpointReplicas is the replication factor below which the
// checkpoint topic is one broker loss from gone, on clusters that can
// hold more.
const minCheckpointReplicas = 3

// checkpointReplicas warns when the checkpoint topic has (or will be
// created with) fewer than 3 replicas on a cluster of 3 or more brokers.
func (c *checker) checkpointReplicas(ctx context.Context, cfg *relay.Config, k *kafkaView, brokerID int32) {
	if k.brokers < minCheckpointReplicas {
		return
	}
	t, exists := k.topics[cfg.CheckpointTopic]
	if exists && t.Err == nil {
		rf := 0
		for _, p := range t.Partitions {
			rf = max(rf, len(p.Replicas))
		}
		msg, warn := checkpointRFVerdict(cfg.CheckpointTopic, rf, k.brokers, "")
		if warn {
			c.warn("%s", msg)
		} else {
			c.ok("%s", msg)
		}
		return
	}
	conf, err := k.brokerConfigs(ctx, brokerID)
	rf, perr := strconv.Atoi(conf["default.replication.factor"])
	if err != nil || perr != nil {
		c.warn("Kafka: checkpoint topic %s does not exist and the broker's default.replication.factor cannot be read (%v): create it with %d replicas before the relay does",
			cfg.CheckpointTopic, errors.Join(err, perr), minCheckpointReplicas)
		return
	}
	msg, warn := checkpointRFVerdict(cfg.CheckpointTopic, rf, k.brokers, "default.replication.factor")
	if warn {
		c.warn("%s", msg)
	} else {
		c.ok("%s", msg)
	}
}

// checkpointRFVerdict words the replication-factor check: rf of the topic,
// or of the broker setting from when the topic does not exist yet.
func checkpointRFVerdict(topic string, rf, brokers int, from string) (msg string, warn bool) {
	what := fmt.Sprintf("checkpoint topic %s has replication factor %d", topic, rf)
	fix := fmt.Sprintf("kafka-reassign-partitions.sh to %d replicas", minCheckpointReplicas)
	if from != "" {
		what = fmt.Sprintf("checkpoint topic %s does not exist: the relay creates it with the broker's %s=%d", topic, from, rf)
		fix = fmt.Sprintf("create it first: kafka-topics.sh --bootstrap-server ... --create --topic %s --partitions 1 --replication-factor %d --config cleanup.policy=compact", topic, minCheckpointReplicas)
	}
	if rf >= minCheckpointReplicas {
		return fmt.Sprintf("Kafka: %s on %d brokers", what, brokers), false
	}
	return fmt.Sprintf("Kafka: %s on a cluster of %d brokers: losing a broker can lose the checkpoint, and without it a lost slot can no longer be told from a first start; %s", what, brokers, fix), true
}
