package debeziumtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Header is one Kafka record header; Null marks a header whose value is
// null (Kafka distinguishes it from an empty value).
type Header struct {
	Key   string
	Value []byte
	Null  bool
}

// Record is a Kafka record as an independent consumer (franz-go) sees it.
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte // nil for a null key
	Value     []byte // nil for a null value (a tombstone)
	Headers   []Header
	Timestamp time.Time
}

// Header returns the value of the first header named key and whether
// there is one.
func (r Record) Header(key string) ([]byte, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return h.Value, true
		}
	}
	return nil, false
}

// Reader consumes every topic matching a regular expression from the
// start, in the background, with franz-go.
type Reader struct {
	client *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	recs []Record
}

// NewReader starts reading the topics matching topicRegex on broker; new
// matching topics are picked up within about a second.
func NewReader(broker, topicRegex string) (*Reader, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.ConsumeRegex(), kgo.ConsumeTopics(topicRegex),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.MetadataMinAge(250*time.Millisecond),
		kgo.MetadataMaxAge(time.Second), kgo.FetchMaxWait(250*time.Millisecond))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Reader{client: cl, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for ctx.Err() == nil {
			cl.PollFetches(ctx).EachRecord(func(kr *kgo.Record) {
				rec := Record{Topic: kr.Topic, Partition: kr.Partition, Offset: kr.Offset, Key: kr.Key, Value: kr.Value, Timestamp: kr.Timestamp}
				for _, h := range kr.Headers {
					rec.Headers = append(rec.Headers, Header{Key: h.Key, Value: h.Value, Null: h.Value == nil})
				}
				r.mu.Lock()
				r.recs = append(r.recs, rec)
				r.mu.Unlock()
			})
		}
	}()
	return r, nil
}

// Records returns a copy of what has been read so far, in the order read
// (per partition, by offset).
func (r *Reader) Records() []Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Record(nil), r.recs...)
}

// Close stops reading.
func (r *Reader) Close() {
	r.cancel()
	r.client.Close()
	<-r.done
}

// CreateTopics creates topics with partitions partitions each (replication
// factor 1) on broker, so that a test's first records do not race the
// broker's automatic creation; a topic that exists is left as it is.
func CreateTopics(ctx context.Context, broker string, partitions int32, topics ...string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(30000)
	resp, err := adm.CreateTopics(ctx, partitions, 1, nil, topics...)
	if err != nil {
		return fmt.Errorf("create topics: %w", err)
	}
	for _, t := range resp.Sorted() {
		if t.Err != nil && !errors.Is(t.Err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", t.Topic, t.Err)
		}
	}
	return nil
}

// EndOffsets returns the end offset of every partition of topics on
// broker (a topic that does not exist has none).
func EndOffsets(ctx context.Context, broker string, topics ...string) (map[string]map[int32]int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	listed, err := kadm.NewClient(cl).ListEndOffsets(ctx, topics...)
	if _, ok := errors.AsType[*kadm.ShardErrors](err); ok {
		return nil, fmt.Errorf("list offsets: %w", err)
	}
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	ends := map[string]map[int32]int64{}
	for t, ps := range listed {
		if _, topicErr := ps[-1]; topicErr {
			continue // kadm's place for the topic's own error: the topic is not listed
		}
		ends[t] = map[int32]int64{}
		for p, o := range ps {
			if o.Err != nil {
				return nil, fmt.Errorf("list offsets of %s[%d]: %w", t, p, o.Err)
			}
			ends[t][p] = o.Offset
		}
	}
	return ends, nil
}

// CaughtUp reports whether the reader has read every record below ends.
func (r *Reader) CaughtUp(ends map[string]map[int32]int64) bool {
	next := map[string]map[int32]int64{}
	for _, rec := range r.Records() {
		if next[rec.Topic] == nil {
			next[rec.Topic] = map[int32]int64{}
		}
		next[rec.Topic][rec.Partition] = max(next[rec.Topic][rec.Partition], rec.Offset+1)
	}
	for t, ps := range ends {
		for p, end := range ps {
			if next[t][p] < end {
				return false
			}
		}
	}
	return true
}
