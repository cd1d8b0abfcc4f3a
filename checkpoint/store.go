package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cdc-relay/cdc-relay/internal/kproduce"
)

// DefaultTopic is the checkpoint topic unless --checkpoint-topic says
// otherwise.
const DefaultTopic = "cdc-relay.checkpoints"

// Store reads and writes the checkpoint topic.
type Store struct {
	topic   string
	brokers []string
	kopts   []kgo.Opt

	mu  sync.Mutex
	cl  *kgo.Client // the topic's administration and writes; made on first use
	adm *kadm.Client
}

// NewStore returns a store for topic on the brokers through franz-go, with
// kopts (TLS, SASL; none for plain text). One client, made on first use,
// administers the topic and writes to it until Close; each Load reads with
// a consuming client of its own (the records of aborted transactions, which
// the checkpoints of exactly-once delivery can be, are dropped).
func NewStore(brokers []string, kopts []kgo.Opt, topic string) *Store {
	return &Store{topic: topic, brokers: brokers, kopts: kopts}
}

// Topic is the checkpoint topic's name.
func (s *Store) Topic() string { return s.topic }

// Broker is Kafka.
func (s *Store) Broker() Broker { return Kafka }

// Close closes the store's Kafka client. A store used after Close makes a
// new one.
func (s *Store) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cl != nil {
		s.cl.Close()
		s.cl, s.adm = nil, nil
	}
}

// opts are the options of the store's clients: kopts, the brokers, the
// client id, and extra.
func (s *Store) opts(extra ...kgo.Opt) []kgo.Opt {
	return append(append(slices.Clip(s.kopts), kgo.SeedBrokers(s.brokers...), kgo.ClientID("cdc-relay")), extra...)
}

// client returns the store's client, making it on first use. Its writes
// wait for all in-sync replicas (acks=all, idempotent), and a keyed record
// lands on the partition murmur2(key) picks, like the Java client's.
func (s *Store) client() (*kgo.Client, *kadm.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cl == nil {
		// A request retries for 5s at most: a Kafka that cannot be
		// reached fails the call soon, and the guard retries it.
		cl, err := kgo.NewClient(s.opts(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0), kgo.RetryTimeout(5*time.Second))...)
		if err != nil {
			return nil, nil, err
		}
		s.cl, s.adm = cl, kadm.NewClient(cl)
	}
	return s.cl, s.adm, nil
}

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
	} else if !errors.Is(err, kerr.UnknownTopicOrPartition) {
		return false, fmt.Errorf("read checkpoint topic %s metadata: %w", s.topic, err)
	}
	_, adm, err := s.client()
	if err != nil {
		return false, fmt.Errorf("read checkpoint topic %s metadata: %w", s.topic, err)
	}
	if create {
		res, err := adm.CreateTopics(ctx, 1, -1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, s.topic)
		if err != nil {
			return false, fmt.Errorf("create checkpoint topic %s: %w", s.topic, err)
		}
		r, err := res.On(s.topic, nil)
		if err == nil {
			err = r.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return false, fmt.Errorf("create checkpoint topic %s: %w", s.topic, err)
		}
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, s.topic)
	if err != nil {
		return false, fmt.Errorf("describe checkpoint topic %s: %w", s.topic, err)
	}
	for _, r := range rcs {
		if r.Name != s.topic {
			continue
		}
		if r.Err != nil {
			if !create && errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
				return false, nil
			}
			return false, fmt.Errorf("describe checkpoint topic %s: %w", s.topic, r.Err)
		}
		for _, c := range r.Configs {
			if c.Key == "cleanup.policy" {
				if strings.TrimSpace(c.MaybeValue()) != "compact" {
					return true, &PolicyError{Topic: s.topic, Policy: c.MaybeValue()}
				}
				return true, nil
			}
		}
	}
	return false, fmt.Errorf("describe checkpoint topic %s: the broker did not report cleanup.policy", s.topic)
}

// partitions returns the topic's partition count. It asks a broker each
// time: the metadata kadm caches could still say a topic created a moment
// ago is missing. The answer refreshes that cache for the offset listings
// that follow.
func (s *Store) partitions(ctx context.Context) (int, error) {
	cl, _, err := s.client()
	if err != nil {
		return 0, err
	}
	// kmsg, not kadm.Metadata: kadm answers from that cache.
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(s.topic)
	req.Topics = append(req.Topics, rt)
	md, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, err
	}
	for _, t := range md.Topics {
		if t.Topic != nil && *t.Topic == s.topic {
			if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
				return 0, err
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
// high watermark, keeping the newest record of each key as read_committed
// reads it (see reading); a tombstone removes its key. State.Open lists the
// keys of transactions still open at the end. Records that are not
// checkpoint JSON are skipped. Any failure is an error: a topic that cannot
// be read is unknown, never empty.
//
// It does not read read_committed: that stops at the last stable offset,
// which a transaction left open holds back, and an exactly-once relay
// killed inside one leaves it open until its timeout (a minute by default).
// Every checkpoint written after it on the partition, by any relay, would
// stay unread so long, and a relay restarted then would miss its own newest
// checkpoint: a dropped slot taken for a first start, a silent gap.
func (s *Store) Load(ctx context.Context) (*State, error) {
	n, err := s.partitions(ctx)
	if err != nil {
		return nil, fmt.Errorf("read checkpoint topic %s: %w", s.topic, err)
	}
	ends, err := s.offsets(ctx, n)
	if err != nil {
		return nil, err
	}
	start := map[int32]kgo.Offset{}
	left := map[int32]int64{} // partition: the high watermark still to reach
	for p, o := range ends {
		if o.end > o.start {
			start[p] = kgo.NewOffset().At(o.start)
			left[p] = o.end
		}
	}
	rd := newReading()
	if len(left) > 0 {
		// A client of its own: it consumes these partitions only, and
		// gets every record, those of aborted and open transactions and
		// their markers included, for reading to tell them apart.
		cl, err := kgo.NewClient(s.opts(kgo.FetchIsolationLevel(kgo.ReadUncommitted()), kgo.KeepControlRecords(),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{s.topic: start}))...)
		if err != nil {
			return nil, fmt.Errorf("read checkpoint topic %s: %w", s.topic, err)
		}
		defer cl.Close()
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
					rd.add(r)
				}
				// The partition is read once the record before its high
				// watermark was: that one is in the active segment, which
				// compaction leaves alone (control records are kept for
				// this).
				if n := len(fp.Records); n > 0 && fp.Records[n-1].Offset >= end-1 {
					delete(left, fp.Partition)
				}
			})
		}
	}
	st := NewState(rd.newest())
	st.Open = rd.openKeys()
	return st, nil
}

// span is a partition's first offset and its high watermark.
type span struct{ start, end int64 }

// offsets lists each of the n partitions' first offset and high watermark.
func (s *Store) offsets(ctx context.Context, n int) (map[int32]span, error) {
	_, adm, err := s.client()
	if err != nil {
		return nil, fmt.Errorf("read checkpoint topic %s offsets: %w", s.topic, err)
	}
	out := make(map[int32]span, n)
	for i, list := range []func(context.Context, ...string) (kadm.ListedOffsets, error){adm.ListStartOffsets, adm.ListEndOffsets} {
		listed, err := list(ctx, s.topic)
		if err != nil {
			return nil, fmt.Errorf("read checkpoint topic %s offsets: %w", s.topic, err)
		}
		for p := range int32(n) {
			o, ok := listed.Lookup(s.topic, p)
			if !ok {
				if o, ok = listed.Lookup(s.topic, -1); !ok || o.Err == nil {
					o.Err = kerr.UnknownTopicOrPartition
				}
			}
			if o.Err != nil {
				return nil, fmt.Errorf("read checkpoint topic %s partition %d offsets: %w", s.topic, p, o.Err)
			}
			sp := out[p]
			if i == 0 {
				sp.start = o.Offset
			} else {
				sp.end = o.Offset
			}
			out[p] = sp
		}
	}
	return out, nil
}

// Write appends rec under its key, on the partition murmur2(key) picks, and
// returns once all in-sync replicas acknowledged it.
func (s *Store) Write(ctx context.Context, rec *Record) error {
	value, err := rec.marshal()
	if err != nil {
		return err
	}
	// The topic must exist: the client waits for a missing one, and never
	// creates it.
	if _, err := s.partitions(ctx); err != nil {
		return fmt.Errorf("write checkpoint to %s: %w", s.topic, err)
	}
	cl, _, err := s.client()
	if err != nil {
		return fmt.Errorf("write checkpoint to %s: %w", s.topic, err)
	}
	r := &kgo.Record{Topic: s.topic, Key: []byte(rec.Key()), Value: value, Timestamp: rec.WrittenAt}
	// Not ProduceSync, which can wait for a broker that is down without
	// end (see kproduce); a record given up on here stays ahead of any
	// later checkpoint on the partition.
	res, err := kproduce.Sync(ctx, cl, r)
	if err == nil {
		err = res.FirstErr()
	}
	if err != nil {
		return fmt.Errorf("write checkpoint to %s: %w", s.topic, err)
	}
	return nil
}
