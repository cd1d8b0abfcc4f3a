package preflight

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestCheckpointReplicationVerdict: below 3 replicas on 3 or more brokers
// is a warning, naming the fix for an existing topic and for one the relay
// will create with the broker's default. (The integration tests run one
// broker, where check does not ask.)
func TestCheckpointReplicationVerdict(t *testing.T) {
	cases := []struct {
		rf, brokers int
		from        string
		warn        bool
		want        string
	}{
		{1, 3, "", true, "Kafka: checkpoint topic cp has replication factor 1 on a cluster of 3 brokers: losing a broker can lose the checkpoint"},
		{2, 5, "", true, "kafka-reassign-partitions.sh to 3 replicas"},
		{3, 3, "", false, "Kafka: checkpoint topic cp has replication factor 3 on 3 brokers"},
		{1, 4, "default.replication.factor", true, "the relay creates it with the broker's default.replication.factor=1 on a cluster of 4 brokers"},
		{3, 4, "default.replication.factor", false, "default.replication.factor=3 on 4 brokers"},
	}
	for _, tc := range cases {
		got, warn := checkpointRFVerdict("cp", tc.rf, tc.brokers, tc.from)
		if warn != tc.warn || !strings.Contains(got, tc.want) {
			t.Errorf("rf %d, %d brokers, %q: %v %q, want %v and %q", tc.rf, tc.brokers, tc.from, warn, got, tc.warn, tc.want)
		}
	}
	if got, _ := checkpointRFVerdict("cp", 1, 3, "default.replication.factor"); !strings.Contains(got, "kafka-topics.sh --bootstrap-server ... --create --topic cp --partitions 1 --replication-factor 3 --config cleanup.policy=compact") {
		t.Errorf("no create command for a missing topic: %q", got)
	}
}

// TestTxnVerdict: how the transactional-id probes read the broker's
// answers. A refused FindCoordinator (no DESCRIBE) or a refused request is
// a missing right; an answer past the id's authorization (the probe
// topic refused or unknown, no transaction for the id) is the right
// there; a coordinator not available yet is asked again; anything else is
// not known.
func TestTxnVerdict(t *testing.T) {
	write := aclVerdict{need: aclNeed{transactionalIDResource, "cdc-relay-x", aclWrite, ""}}
	describe := aclVerdict{need: aclNeed{transactionalIDResource, "cdc-relay-x", aclDescribe, ""}}
	writeGranted := []int16{kafkaInvalidTopic, kafkaTopicAuthorizationErr, kafkaUnknownTopic, kafkaOperationNotTried}
	cases := []struct {
		name                    string
		v                       aclVerdict
		err                     error
		code                    int16
		granted                 []int16
		known, has, coordinator bool
		note                    string
	}{
		{"write refused", write, nil, kafkaTxnAuthorizationErr, writeGranted, true, false, false, ""},
		{"write: FindCoordinator refused", write, kerr.TransactionalIDAuthorizationFailed, -1, writeGranted, true, false, false, "the principal may not even describe it"},
		{"write: probe topic refused", write, nil, kafkaTopicAuthorizationErr, writeGranted, true, true, false, ""},
		{"write: probe topic unknown", write, nil, kafkaUnknownTopic, writeGranted, true, true, false, ""},
		{"write: coordinator loading", write, nil, 14, writeGranted, false, false, true, "COORDINATOR_LOAD_IN_PROGRESS"},
		{"write: no coordinator yet", write, kerr.CoordinatorNotAvailable, -1, writeGranted, false, false, true, "COORDINATOR_NOT_AVAILABLE"},
		{"write: something else", write, nil, 47, writeGranted, false, false, false, "INVALID_PRODUCER_EPOCH"},
		{"write: no partition in the answer", write, nil, -1, writeGranted, false, false, false, "no answer for it"},
		{"describe refused", describe, kerr.TransactionalIDAuthorizationFailed, -1, []int16{0, kafkaTxnIDNotFound}, true, false, false, ""},
		{"describe: no transaction yet", describe, nil, kafkaTxnIDNotFound, []int16{0, kafkaTxnIDNotFound}, true, true, false, ""},
		{"describe: a state", describe, nil, 0, []int16{0, kafkaTxnIDNotFound}, true, true, false, ""},
	}
	for _, tc := range cases {
		got := txnVerdict(tc.v, tc.err, tc.code, tc.granted...)
		if got.known != tc.known || got.has != tc.has || got.coordinator != tc.coordinator || !strings.Contains(got.note, tc.note) || (tc.note == "" && got.note != "") {
			t.Errorf("%s: known %v, has %v, coordinator %v, note %q; want %v, %v, %v, %q", tc.name, got.known, got.has, got.coordinator, got.note, tc.known, tc.has, tc.coordinator, tc.note)
		}
	}
}
