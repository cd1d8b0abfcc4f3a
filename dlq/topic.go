package dlq

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

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

// connect makes a client of opts, the connection settings of
// kafkaOptions, with extra: the consume or produce options of its use.
func connect(opts []kgo.Opt, extra ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append(slices.Clip(opts), extra...)...)
}

// shardErr is the first error of a kadm *ShardErrors, what the request
// alone fails with; any other err as it is.
func shardErr(err error) error {
	if se, ok := errors.AsType[*kadm.ShardErrors](err); ok && len(se.Errs) > 0 {
		return se.Errs[0].Err
	}
	return err
}

// listOffsets returns the topic's start (timestamp -2) or end (-1)
// offsets, read_committed: the end is the last stable offset, so a letter
// of an open transaction is not waited for.
func listOffsets(ctx context.Context, adm *kadm.Client, topic string, which int64) (partitionOffsets, error) {
	return retriable(ctx, func() (partitionOffsets, error) { return listOnce(ctx, adm, topic, which) })
}

// topicID is the topic's id; the zero id when the topic does not exist.
func topicID(ctx context.Context, adm *kadm.Client, topic string) ([16]byte, error) {
	m, err := adm.Metadata(ctx, topic)
	if err != nil {
		return [16]byte{}, fmt.Errorf("read the metadata of %s: %w", topic, err)
	}
	t := m.Topics[topic]
	if errors.Is(t.Err, kerr.UnknownTopicOrPartition) {
		return [16]byte{}, nil
	}
	if t.Err != nil {
		return [16]byte{}, fmt.Errorf("read the metadata of %s: %w", topic, t.Err)
	}
	return t.ID, nil
}

func listOnce(ctx context.Context, adm *kadm.Client, topic string, which int64) (partitionOffsets, error) {
	list := adm.ListCommittedOffsets // the last stable offset
	if which == -2 {
		list = adm.ListStartOffsets
	}
	listed, err := list(ctx, topic)
	if _, ok := errors.AsType[*kadm.ShardErrors](err); ok {
		return nil, fmt.Errorf("list the offsets of %s: %w", topic, shardErr(err))
	}
	if err != nil { // the metadata kadm reads first
		return nil, fmt.Errorf("read the metadata of %s: %w", topic, err)
	}
	out := partitionOffsets{}
	for p, o := range listed[topic] {
		switch {
		case o.Err == nil:
			out[p] = o.Offset
		case p == -1: // kadm's place for the topic's own metadata error
			if errors.Is(o.Err, kerr.UnknownTopicOrPartition) {
				return nil, fmt.Errorf("%s: %w", topic, errNoTopic)
			}
			return nil, fmt.Errorf("read the metadata of %s: %w", topic, o.Err)
		default:
			return nil, fmt.Errorf("list the offsets of %s partition %d: %w", topic, p, o.Err)
		}
	}
	return out, nil
}

// committedOffsets returns the group's committed offsets on topic
// (partitions without one are absent; none at all for a group the broker
// answers GROUP_ID_NOT_FOUND for: nothing was committed yet). A retriable
// answer (the coordinator not available yet, as on a cluster's first
// group) is asked again, with backoff, until ctx ends.
func committedOffsets(ctx context.Context, adm *kadm.Client, group, topic string) (partitionOffsets, error) {
	return retriable(ctx, func() (partitionOffsets, error) { return fetchCommitted(ctx, adm, group, topic) })
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

func fetchCommitted(ctx context.Context, adm *kadm.Client, group, topic string) (partitionOffsets, error) {
	// OffsetFetch v10+ answers with topic ids: a topic's offsets are
	// those of its name or its id.
	id, err := topicID(ctx, adm, topic)
	if err != nil {
		return nil, err
	}
	resps, err := adm.FetchOffsets(ctx, group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		// Some brokers (kfake) answer so for a group that never
		// committed; others answer with no offsets. Either way: nothing
		// committed yet.
		return partitionOffsets{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the offsets of group %s: %w", group, err)
	}
	out := partitionOffsets{}
	for name, ps := range resps {
		for p, o := range ps {
			if o.Err != nil {
				return nil, fmt.Errorf("read the offsets of group %s: %w", group, o.Err)
			}
			if (name == topic || o.TopicID == id) && o.At >= 0 {
				out[p] = o.At
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
