package inbox

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// clientOpts are the options every franz-go client of the consumer starts
// from: the brokers, TLS and SASL (Config.TLS..., Config.SASL...), the
// logger.
func (c *Consumer[T]) clientOpts() []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(c.cfg.Brokers...), kgo.WithLogger(kgoLogger{c.log})}
	return append(opts, c.security...)
}

// groupClient makes the group consumer of Run. Offsets are committed by
// the caller only (no auto-commit); the rebalance callbacks commit the
// done prefix before partitions leave and forget what was revoked.
func (c *Consumer[T]) groupClient(offs *offsets) (*kgo.Client, error) {
	cfg := &c.cfg
	isolation := kgo.ReadCommitted()
	if cfg.ReadUncommitted {
		isolation = kgo.ReadUncommitted()
	}
	opts := append(c.clientOpts(),
		kgo.ConsumerGroup(cfg.GroupID),
		kgo.ConsumeTopics(cfg.Topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(isolation),
		// The transaction markers come as records, so that their offsets are
		// done, and committed, like any other (the handler never sees them).
		kgo.KeepControlRecords(),
		kgo.DisableAutoCommit(),
		kgo.Balancers(groupBalancers()...),
		kgo.SessionTimeout(cfg.SessionTimeout),
		kgo.RebalanceTimeout(cfg.SessionTimeout),
		kgo.HeartbeatInterval(cfg.SessionTimeout/10),
		kgo.FetchMaxWait(250*time.Millisecond),
		// How soon the group leader sees partitions added to a topic.
		kgo.MetadataMaxAge(10*time.Second),
		kgo.OnPartitionsAssigned(func(_ context.Context, cl *kgo.Client, assigned map[string][]int32) {
			member, generation := cl.GroupMetadata()
			c.log.Info("kafka reader: Joined group", "group", cfg.GroupID, "member", member, "generation", generation)
			c.log.Info("kafka reader: subscribed to topics and partitions", "partitions", fmt.Sprint(assigned))
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
			if len(revoked) == 0 {
				return
			}
			c.log.Info("kafka reader: rebalancing; partitions revoked", "partitions", fmt.Sprint(revoked))
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			if err := c.commit(cctx, cl, offs); err != nil {
				c.log.Warn("offset commit before the rebalance failed; the events after the last commit will be skipped as duplicates", "error", err)
			}
			cancel()
			offs.forget(revoked)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
			if len(lost) > 0 {
				c.log.Warn("kafka reader: partitions lost (the group session ended); rejoining", "partitions", fmt.Sprint(lost))
				offs.forget(lost)
			}
		}),
	)
	return kgo.NewClient(opts...)
}

// dlqClient makes the dead-letter producer. A letter's partition is
// hash(key) as the kafka-go writer of earlier versions chose it (FNV-1a,
// Sarama's arithmetic), so that old and new instances of one consumer put
// a key's letters in the same partition.
func (c *Consumer[T]) dlqClient() (*kgo.Client, error) {
	return kgo.NewClient(append(c.clientOpts(),
		kgo.AllowAutoTopicCreation(),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(kgo.SaramaCompatHasher(fnv32a))),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.RecordDeliveryTimeout(30*time.Second),
	)...)
}

func fnv32a(b []byte) uint32 {
	h := fnv.New32a()
	h.Write(b)
	return h.Sum32()
}

// groupBalancers are the group protocols the consumer offers, in the order
// kafka-go's Reader offered them (its defaults, which earlier versions of
// this package used): range, then roundrobin. During a rolling upgrade the
// group holds kafka-go and franz-go members together, and the broker picks
// a protocol every member offers; franz-go's default, cooperative-sticky,
// is one kafka-go does not know (INCONSISTENT_GROUP_PROTOCOL).
func groupBalancers() []kgo.GroupBalancer {
	return []kgo.GroupBalancer{v0Balancer{kgo.RangeBalancer()}, v0Balancer{kgo.RoundRobinBalancer()}}
}

// v0Balancer is an eager franz-go balancer whose JoinGroup metadata is
// version 0 of the consumer protocol: the topics and no user data.
// franz-go writes version 3 (owned partitions, generation, rack), which a
// kafka-go group leader refuses ("unable to read metadata for member": it
// reads version 0 and wants nothing left over). Nothing else differs: range
// and roundrobin read no more than the topics, and every member, whichever
// its client, reads the assignments a leader of either client writes.
type v0Balancer struct{ kgo.GroupBalancer }

// JoinGroupMetadata returns version 0 metadata for topics.
func (v0Balancer) JoinGroupMetadata(topics []string, _ map[string][]int32, _ int32) []byte {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = 0
	meta.Topics = topics
	return meta.AppendTo(nil)
}

// kgoLogger passes franz-go's logs to the consumer's logger: its errors
// and warnings at WARN, the rest at DEBUG (group joins and assignments are
// logged at INFO by the rebalance callbacks).
type kgoLogger struct{ log *slog.Logger }

func (l kgoLogger) Level() kgo.LogLevel {
	if l.log.Enabled(context.Background(), slog.LevelDebug) {
		return kgo.LogLevelDebug
	}
	return kgo.LogLevelWarn
}

func (l kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	lvl := slog.LevelDebug
	if level == kgo.LogLevelError || level == kgo.LogLevelWarn {
		lvl = slog.LevelWarn
	}
	l.log.Log(context.Background(), lvl, "kafka client: "+msg, keyvals...)
}
