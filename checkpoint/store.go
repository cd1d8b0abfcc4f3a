package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/cdc-relay/cdc-relay/publisher"
)

// DefaultTopic is the checkpoint topic unless --checkpoint-topic says
// otherwise.
const DefaultTopic = "cdc-relay.checkpoints"

// Store reads and writes the checkpoint topic.
type Store struct {
	client *kafka.Client
	addr   net.Addr
	topic  string
}

// NewStore returns a store for topic on the brokers, through transport
// (TLS, SASL; nil for plain text).
func NewStore(brokers []string, transport *kafka.Transport, topic string) *Store {
	addr := kafka.TCP(brokers...)
	var rt kafka.RoundTripper
	if transport != nil {
		rt = transport
	} else {
		rt = &kafka.Transport{DialTimeout: 10 * time.Second, ClientID: "cdc-relay"}
	}
	return &Store{client: &kafka.Client{Addr: addr, Transport: rt, Timeout: 15 * time.Second}, addr: addr, topic: topic}
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
// last stable offset (read_committed), keeping the newest record of each
// key; a tombstone removes its key. Records that are not checkpoint JSON are
// skipped. Any failure is an error: a topic that cannot be read is unknown,
// never empty.
func (s *Store) Load(ctx context.Context) (*State, error) {
	n, err := s.partitions(ctx)
	if err != nil {
		return nil, fmt.Errorf("read checkpoint topic %s: %w", s.topic, err)
	}
	reqs := make([]kafka.OffsetRequest, 0, 2*n)
	for p := range n {
		reqs = append(reqs, kafka.FirstOffsetOf(p), kafka.LastOffsetOf(p))
	}
	offs, err := s.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{s.topic: reqs}, IsolationLevel: kafka.ReadCommitted})
	if err != nil {
		return nil, fmt.Errorf("read checkpoint topic %s offsets: %w", s.topic, err)
	}
	byKey := map[string]*Record{}
	for _, po := range offs.Topics[s.topic] {
		if po.Error != nil {
			return nil, fmt.Errorf("read checkpoint topic %s partition %d offsets: %w", s.topic, po.Partition, po.Error)
		}
		if err := s.readPartition(ctx, po.Partition, po.FirstOffset, po.LastOffset, byKey); err != nil {
			return nil, err
		}
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

func (s *Store) readPartition(ctx context.Context, partition int, first, last int64, byKey map[string]*Record) error {
	for off := first; off < last; {
		res, err := s.client.Fetch(ctx, &kafka.FetchRequest{Topic: s.topic, Partition: partition, Offset: off,
			MinBytes: 1, MaxBytes: 4 << 20, MaxWait: 500 * time.Millisecond, IsolationLevel: kafka.ReadCommitted})
		if err != nil {
			return fmt.Errorf("read checkpoint topic %s partition %d: %w", s.topic, partition, err)
		}
		if res.Error != nil {
			return fmt.Errorf("read checkpoint topic %s partition %d: %w", s.topic, partition, res.Error)
		}
		next := off
		for {
			rec, err := res.Records.ReadRecord()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return fmt.Errorf("read checkpoint topic %s partition %d: %w", s.topic, partition, err)
			}
			if rec.Offset < off {
				continue
			}
			next = rec.Offset + 1
			key, _ := readAll(rec.Key)
			if rec.Value == nil {
				delete(byKey, string(key))
				continue
			}
			value, err := readAll(rec.Value)
			if err != nil {
				return fmt.Errorf("read checkpoint topic %s partition %d offset %d: %w", s.topic, partition, rec.Offset, err)
			}
			if r, err := parseRecord(value); err == nil {
				byKey[string(key)] = r
			}
		}
		if next == off {
			// Nothing at or after off below last: control records or a
			// compacted hole; the high watermark tells where to go.
			if res.HighWatermark <= off {
				return fmt.Errorf("read checkpoint topic %s partition %d: no records at offset %d below %d", s.topic, partition, off, last)
			}
			next = min(res.HighWatermark, last)
		}
		off = next
	}
	return nil
}

func readAll(b kafka.Bytes) ([]byte, error) {
	if b == nil {
		return nil, nil
	}
	return io.ReadAll(b)
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
