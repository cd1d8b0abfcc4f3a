package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cdc-relay/cdc-relay/publisher"
)

// DefaultTopic is the checkpoint topic unless --checkpoint-topic says
// otherwise.
const DefaultTopic = "cdc-relay.checkpoints"

// Store reads and writes the checkpoint topic.
type Store struct {
	client  *kafka.Client
	addr    net.Addr
	topic   string
	brokers []string
	kopts   []kgo.Opt
}

// NewStore returns a store for topic on the brokers, through transport
// (TLS, SASL; nil for plain text) for the topic's administration and
// writes, and a kgo client with kopts (the same TLS and SASL) for reading:
// kafka-go's read_committed fetches still return the records of aborted
// transactions, which the checkpoints of exactly-once delivery can be.
func NewStore(brokers []string, transport *kafka.Transport, kopts []kgo.Opt, topic string) *Store {
	addr := kafka.TCP(brokers...)
	var rt kafka.RoundTripper
	if transport != nil {
		rt = transport
	} else {
		rt = &kafka.Transport{DialTimeout: 10 * time.Second, ClientID: "cdc-relay"}
	}
	return &Store{client: &kafka.Client{Addr: addr, Transport: rt, Timeout: 15 * time.Second}, addr: addr, topic: topic, brokers: brokers, kopts: kopts}
}

// Topic is the checkpoint topic's name.
func (s *Store) Topic() string { return s.topic }

// PolicyError is a checkpoint topic whose cleanup.policy is not compact: its
// records would expire, and a lost slot would then look like a first start.
// It is a configuration error (exit 2).
type PolicyError struct {
	Topic  string
	Policy string
}

func (e *PolicyError) Error() string {
	return fmt.Sprintf("--checkpoint-topic %s has cleanup.policy=%s: its records expire, and a lost slot would then look like a first start; "+
		"run kafka-configs.sh --alter --entity-type topics --entity-name %s --add-config cleanup.policy=compact (or point --checkpoint-topic at a new topic, which the relay creates compacted)",
		e.Topic, e.Policy, e.Topic)
}

// Ensure creates the topic (one partition, compacted, the broker's
// replication factor) when it is missing and create is true, and checks
// that an existing one is compacted. It never relies on auto-creation.
// exists is false only when the topic is missing and create is false.
func (s *Store) Ensure(ctx context.Context, create bool) (exists bool, err error) {
	// Metadata first: it reports what keeps the relay from Kafka (a refused
	// password, a certificate) where CreateTopics says "broker not
	// available", and whether the topic exists.
	if _, err := s.partitions(ctx); err == nil {
		create = false
	} else if !errors.Is(err, kafka.UnknownTopicOrPartition) {
		return false, fmt.Errorf("read checkpoint topic %s metadata: %w", s.topic, err)
	}
	if create {
		res, err := s.client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{
			Topic: s.topic, NumPartitions: 1, ReplicationFactor: -1,
			ConfigEntries: []kafka.ConfigEntry{{ConfigName: "cleanup.policy", ConfigValue: "compact"}},
		}}})
		if err != nil {
			return false, fmt.Errorf("create checkpoint topic %s: %w", s.topic, err)
		}
		if err := res.Errors[s.topic]; err != nil && !errors.Is(err, kafka.TopicAlreadyExists) {
			return false, fmt.Errorf("create checkpoint topic %s: %w", s.topic, err)
		}
	}
	dres, err := s.client.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: s.topic, ConfigNames: []string{"cleanup.policy"},
	}}})
	if err != nil {
		return false, fmt.Errorf("describe checkpoint topic %s: %w", s.topic, err)
	}
	for _, r := range dres.Resources {
		if r.Error != nil {
			if !create && errors.Is(r.Error, kafka.UnknownTopicOrPartition) {
				return false, nil
			}
			return false, fmt.Errorf("describe checkpoint topic %s: %w", s.topic, r.Error)
		}
		for _, e := range r.ConfigEntries {
			if e.ConfigName == "cleanup.policy" {
				if strings.TrimSpace(e.ConfigValue) != "compact" {
					return true, &PolicyError{Topic: s.topic, Policy: e.ConfigValue}
				}
				return true, nil
			}
		}
	}
	return false, fmt.Errorf("describe checkpoint topic %s: the broker did not report cleanup.policy", s.topic)
}

// partitions returns the topic's partition count.
func (s *Store) partitions(ctx context.Context) (int, error) {
	md, err := s.client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{s.topic}})
	if err != nil {
		return 0, err
	}
	for _, t := range md.Topics {
		if t.Name == s.topic {
			if t.Error != nil {
				return 0, t.Error
			}
			if len(t.Partitions) == 0 {
				return 0, fmt.Errorf("topic %s has no partitions", s.topic)
			}
			return len(t.Partitions), nil
		}
	}
	return 0, fmt.Errorf("topic %s not in metadata", s.topic)
}

// Load reads the whole topic, every partition from its first offset to its
// last stable offset (read_committed: records of aborted transactions are
// dropped), keeping the newest record of each key; a tombstone removes its
// key. Records that are not checkpoint JSON are skipped. Any failure is an
// error: a topic that cannot be read is unknown, never empty.
func (s *Store) Load(ctx context.Context) (*State, error) {
	n, err := s.partitions(ctx)
	if err != nil {
		return nil, fmt.Errorf("read checkpoint topic %s: %w", s.topic, err)
	}
	cl, err := kgo.NewClient(append(slices.Clip(s.kopts), kgo.SeedBrokers(s.brokers...), kgo.ClientID("cdc-relay"), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())...)
	if err != nil {
		return nil, fmt.Errorf("read checkpoint topic %s: %w", s.topic, err)
	}
	defer cl.Close()
	ends, err := s.offsets(ctx, cl, n)
	if err != nil {
		return nil, err
	}
	start := map[int32]kgo.Offset{}
	left := map[int32]int64{} // partition: the last stable offset still to reach
	for p, o := range ends {
		if o.end > o.start {
			start[p] = kgo.NewOffset().At(o.start)
			left[p] = o.end
		}
	}
	byKey := map[string]*Record{}
	if len(left) > 0 {
		cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{s.topic: start})
	}
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("read checkpoint topic %s: %w", s.topic, err)
		}
		var ferr error
		fs.EachError(func(_ string, p int32, err error) {
			ferr = fmt.Errorf("read checkpoint topic %s partition %d: %w", s.topic, p, err)
		})
		if ferr != nil {
			return nil, ferr
		}
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			end, ok := left[fp.Partition]
			if !ok {
				return
			}
			for _, r := range fp.Records {
				if r.Offset >= end {
					break
				}
				if r.Attrs.IsControl() {
					continue
				}
				if r.Value == nil {
					delete(byKey, string(r.Key))
					continue
				}
				if rec, err := parseRecord(r.Value); err == nil {
					byKey[string(r.Key)] = rec
				}
			}
			// The partition is read once the record before its last
			// stable offset was: that one is in the active segment,
			// which compaction leaves alone, and it is never a record of
			// an aborted transaction, whose abort marker comes after it
			// (control records are kept for this).
			if n := len(fp.Records); n > 0 && fp.Records[n-1].Offset >= end-1 {
				delete(left, fp.Partition)
			}
		})
	}
	st := &State{Checkpoints: map[string]*Record{}}
	for _, r := range byKey {
		switch r.Kind {
		case KindCheckpoint:
			st.Checkpoints[r.RelayID] = r
		case KindGap:
			st.Gaps = append(st.Gaps, r)
		}
	}
	return st, nil
}

// span is a partition's first offset and last stable offset.
type span struct{ start, end int64 }

// Settle waits until no Kafka transaction that was open on the topic when
// it was called still holds back read_committed reads: until each
// partition's last stable offset reaches the high watermark it had then. A
// transaction lasts at most its timeout, and ctx bounds the wait.
func (s *Store) Settle(ctx context.Context) error {
	n, err := s.partitions(ctx)
	if err != nil {
		return fmt.Errorf("read checkpoint topic %s: %w", s.topic, err)
	}
	cl, err := kgo.NewClient(append(slices.Clip(s.kopts), kgo.SeedBrokers(s.brokers...), kgo.ClientID("cdc-relay"))...)
	if err != nil {
		return fmt.Errorf("read checkpoint topic %s: %w", s.topic, err)
	}
	defer cl.Close()
	high, err := s.offsetsAt(ctx, cl, n, 0)
	if err != nil {
		return err
	}
	for {
		stable, err := s.offsetsAt(ctx, cl, n, 1)
		if err != nil {
			return err
		}
		behind := false
		for p, h := range high {
			if stable[p].end < h.end {
				behind = true
			}
		}
		if !behind {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("checkpoint topic %s: a Kafka transaction on it is still open: %w", s.topic, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// offsets lists each partition's first offset and last stable offset.
func (s *Store) offsets(ctx context.Context, cl *kgo.Client, n int) (map[int32]span, error) {
	return s.offsetsAt(ctx, cl, n, 1)
}

// offsetsAt lists each partition's first offset and its last offset under
// isolation (0 read_uncommitted: the high watermark; 1 read_committed: the
// last stable offset).
func (s *Store) offsetsAt(ctx context.Context, cl *kgo.Client, n int, isolation int8) (map[int32]span, error) {
	out := make(map[int32]span, n)
	for _, ts := range []int64{-2, -1} { // earliest, then latest
		req := kmsg.NewPtrListOffsetsRequest()
		req.IsolationLevel = isolation
		t := kmsg.NewListOffsetsRequestTopic()
		t.Topic = s.topic
		for p := range n {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp = int32(p), ts
			t.Partitions = append(t.Partitions, rp)
		}
		req.Topics = append(req.Topics, t)
		shards := cl.RequestSharded(ctx, req)
		for _, sh := range shards {
			if sh.Err != nil {
				return nil, fmt.Errorf("read checkpoint topic %s offsets: %w", s.topic, sh.Err)
			}
			for _, rt := range sh.Resp.(*kmsg.ListOffsetsResponse).Topics {
				for _, rp := range rt.Partitions {
					if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
						return nil, fmt.Errorf("read checkpoint topic %s partition %d offsets: %w", s.topic, rp.Partition, err)
					}
					o := out[rp.Partition]
					if ts == -2 {
						o.start = rp.Offset
					} else {
						o.end = rp.Offset
					}
					out[rp.Partition] = o
				}
			}
		}
	}
	return out, nil
}

// Write appends rec under its key and waits for the broker's
// acknowledgement from all in-sync replicas.
func (s *Store) Write(ctx context.Context, rec *Record) error {
	value, err := rec.marshal()
	if err != nil {
		return err
	}
	n, err := s.partitions(ctx)
	if err != nil {
		return fmt.Errorf("write checkpoint to %s: %w", s.topic, err)
	}
	key := []byte(rec.Key())
	res, err := s.client.Produce(ctx, &kafka.ProduceRequest{Topic: s.topic, Partition: publisher.Partition(key, n), RequiredAcks: kafka.RequireAll,
		Records: kafka.NewRecordReader(kafka.Record{Key: kafka.NewBytes(key), Value: kafka.NewBytes(value), Time: rec.WrittenAt})})
	if err != nil {
		return fmt.Errorf("write checkpoint to %s: %w", s.topic, err)
	}
	if res.Error != nil {
		return fmt.Errorf("write checkpoint to %s: %w", s.topic, res.Error)
	}
	return nil
}
