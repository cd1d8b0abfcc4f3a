package dlq

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cdc-relay/cdc-relay/internal/backoff"
	recordpkg "github.com/cdc-relay/cdc-relay/record"
	"github.com/cdc-relay/cdc-relay/relay"
)

// kafkaOptions are the franz-go client options for cfg's brokers, TLS and
// SASL: the connection settings of run.
func kafkaOptions(cfg *relay.Config) ([]kgo.Opt, error) {
	opts, err := relay.KafkaOptions(cfg)
	if err != nil {
		return nil, relay.ConfigErr("kafka-tls", "%v", err)
	}
	return opts, nil
}

// errNoTopic is the dead-letter topic missing: nothing was ever dead-lettered.
var errNoTopic = errors.New("topic does not exist")

// partitionOffsets are one topic's offsets by partition.
type partitionOffsets map[int32]int64

// listOffsets returns the topic's start (timestamp -2) or end (-1)
// offsets, read_committed: the end is the last stable offset, so a letter
// of an open transaction is not waited for.
func listOffsets(ctx context.Context, cl *kgo.Client, topic string, which int64) (partitionOffsets, error) {
	return retriable(ctx, func() (partitionOffsets, error) { return listOnce(ctx, cl, topic, which) })
}

// topicMetadata reads one topic's metadata.
func topicMetadata(ctx context.Context, cl *kgo.Client, topic string) (*kmsg.MetadataResponseTopic, error) {
	meta := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	meta.Topics = append(meta.Topics, mt)
	mresp, err := meta.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("read the metadata of %s: %w", topic, err)
	}
	if len(mresp.Topics) != 1 {
		return nil, fmt.Errorf("read the metadata of %s: %d topics in the answer", topic, len(mresp.Topics))
	}
	if err := kerr.ErrorForCode(mresp.Topics[0].ErrorCode); err != nil {
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			return nil, fmt.Errorf("%s: %w", topic, errNoTopic)
		}
		return nil, fmt.Errorf("read the metadata of %s: %w", topic, err)
	}
	return &mresp.Topics[0], nil
}

// topicID is the topic's id; the zero id when the topic does not exist.
func topicID(ctx context.Context, cl *kgo.Client, topic string) ([16]byte, error) {
	t, err := topicMetadata(ctx, cl, topic)
	if errors.Is(err, errNoTopic) {
		return [16]byte{}, nil
	}
	if err != nil {
		return [16]byte{}, err
	}
	return t.TopicID, nil
}

func listOnce(ctx context.Context, cl *kgo.Client, topic string, which int64) (partitionOffsets, error) {
	mt, err := topicMetadata(ctx, cl, topic)
	if err != nil {
		return nil, err
	}
	req := kmsg.NewPtrListOffsetsRequest()
	req.IsolationLevel = 1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for _, p := range mt.Partitions {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p.Partition, which, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("list the offsets of %s: %w", topic, err)
	}
	out := partitionOffsets{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("list the offsets of %s partition %d: %w", topic, p.Partition, err)
			}
			out[p.Partition] = p.Offset
		}
	}
	return out, nil
}

// committedOffsets returns the group's committed offsets on topic
// (partitions without one are absent; none at all for a group the broker
// answers GROUP_ID_NOT_FOUND for: nothing was committed yet). A retriable
// answer (the coordinator not available yet, as on a cluster's first
// group) is asked again, with backoff, until ctx ends.
func committedOffsets(ctx context.Context, cl *kgo.Client, group, topic string) (partitionOffsets, error) {
	return retriable(ctx, func() (partitionOffsets, error) { return fetchCommitted(ctx, cl, group, topic) })
}

// retriable calls f until it succeeds, fails with an error Kafka does not
// call retriable, or ctx ends (then it returns f's last error).
func retriable(ctx context.Context, f func() (partitionOffsets, error)) (partitionOffsets, error) {
	var b backoff.Backoff
	for {
		out, err := f()
		if err == nil || !kerr.IsRetriable(err) {
			return out, err
		}
		if werr := b.Wait(ctx); werr != nil {
			return nil, err
		}
	}
}

func fetchCommitted(ctx context.Context, cl *kgo.Client, group, topic string) (partitionOffsets, error) {
	// OffsetFetch v8+ names groups in a list (kgo sends it to the group's
	// coordinator, and splits it for older brokers); no topics asks for
	// all of them, and v10+ answers with topic ids.
	id, err := topicID(ctx, cl, topic)
	if err != nil {
		return nil, err
	}
	req := kmsg.NewPtrOffsetFetchRequest()
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	req.Groups = append(req.Groups, rg)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("read the offsets of group %s: %w", group, err)
	}
	out := partitionOffsets{}
	for _, g := range resp.Groups {
		if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
			if errors.Is(err, kerr.GroupIDNotFound) {
				// Some brokers (kfake) answer so for a group that never
				// committed; others answer with no offsets. Either way:
				// nothing committed yet.
				continue
			}
			return nil, fmt.Errorf("read the offsets of group %s: %w", group, err)
		}
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return nil, fmt.Errorf("read the offsets of group %s: %w", group, err)
				}
				if (t.Topic == topic || t.TopicID == id) && p.Offset >= 0 {
					out[p.Partition] = p.Offset
				}
			}
		}
	}
	return out, nil
}

// letterOf is a record of the dead-letter topic as the record package
// reads a dead letter.
func letterOf(r *kgo.Record) *recordpkg.Letter {
	l := &recordpkg.Letter{Key: r.Key, Value: r.Value, Time: r.Timestamp}
	for _, h := range r.Headers {
		l.Headers = append(l.Headers, recordpkg.LetterHeader{Key: h.Key, Value: h.Value})
	}
	return l
}
