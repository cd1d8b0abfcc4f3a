package dlq

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/internal/kproduce"
	recordpkg "github.com/cdc-relay/cdc-relay/record"
	"github.com/cdc-relay/cdc-relay/relay"
	"github.com/cdc-relay/cdc-relay/router"
)

// Retirement is the value of a record of --dlq-retired-topic: one dead
// letter marked handled by cdc-relay dlq retire. Its key is retiredKey.
type Retirement struct {
	DLQTopic   string    `json:"dlq_topic"`
	TopicID    string    `json:"dlq_topic_id"` // hex: a topic created again is another topic
	Partition  int32     `json:"partition"`
	Offset     int64     `json:"offset"`
	ID         string    `json:"id,omitempty"`
	EventType  string    `json:"event_type,omitempty"`
	ErrorKind  string    `json:"error_kind,omitempty"`
	Table      string    `json:"table,omitempty"`
	LetterTime time.Time `json:"letter_timestamp"`
	Reason     string    `json:"reason"`
	RetiredAt  time.Time `json:"retired_at"`
	RetiredBy  string    `json:"retired_by"`
}

// retiredKey is the key of a letter's Retirement record: the dead-letter
// topic, its topic id, and the letter's partition and offset.
func retiredKey(topic string, id [16]byte, partition int32, offset int64) string {
	return topic + "/" + hex.EncodeToString(id[:]) + "/" + strconv.Itoa(int(partition)) + "/" + strconv.FormatInt(offset, 10)
}

// readRange reads topic from start to end (read_committed), calling fn for
// each record before its partition's end. A partition whose end is not
// after its start is not read; the rest of a range that is only control
// records ends the read after dlqIdle.
func readRange(ctx context.Context, opts []kgo.Opt, topic string, start, end partitionOffsets, fn func(*kgo.Record)) error {
	from := map[int32]kgo.Offset{}
	for p, s := range start {
		if end[p] > s {
			from[p] = kgo.NewOffset().At(s)
		}
	}
	if len(from) == 0 {
		return nil
	}
	cl, err := connect(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return fmt.Errorf("connect to Kafka: %w", err)
	}
	defer cl.Close()
	done := map[int32]bool{}
	for len(done) < len(from) {
		pctx, cancel := context.WithTimeout(ctx, dlqIdle)
		fetches := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := fetchError(fetches); err != nil {
			return err
		}
		if fetches.NumRecords() == 0 {
			break // the rest of every range is control records
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if done[r.Partition] || r.Offset >= end[r.Partition] {
				return
			}
			fn(r)
			if r.Offset+1 >= end[r.Partition] {
				done[r.Partition] = true
			}
		})
	}
	return nil
}

// readRetirements reads the retirements of the letters of dlqTopic (whose
// topic id is dlqID) from retiredTopic, by retiredKey: the last record of
// a key wins, and one without a value (a tombstone) takes the Retirement
// back. A missing topic holds none.
func readRetirements(ctx context.Context, adm *kadm.Client, opts []kgo.Opt, retiredTopic, dlqTopic string, dlqID [16]byte) (map[string]Retirement, error) {
	out := map[string]Retirement{}
	start, err := listOffsets(ctx, adm, retiredTopic, -2)
	if errors.Is(err, errNoTopic) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	end, err := listOffsets(ctx, adm, retiredTopic, -1)
	if err != nil {
		return nil, err
	}
	prefix := retiredKey(dlqTopic, dlqID, 0, 0)
	prefix = prefix[:len(prefix)-len("0/0")]
	err = readRange(ctx, opts, retiredTopic, start, end, func(r *kgo.Record) {
		key := string(r.Key)
		if !strings.HasPrefix(key, prefix) {
			return
		}
		if r.Value == nil {
			delete(out, key)
			return
		}
		var ret Retirement
		if json.Unmarshal(r.Value, &ret) == nil {
			out[key] = ret
		}
	})
	return out, err
}

// retiredBy names who retires: the user and the host.
func retiredBy() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, _ := os.Hostname()
	return name + "@" + host
}

// Retirer is one dlq retire: it marks the pending letters of
// Config.DLQTopic that Filters keep handled, writing a Retirement with
// Reason to Topic (--dlq-retired-topic) for each, and prints a line per
// letter on Stdout. Run leaves the counts in Retired, Already (retired
// before) and Filtered (left out by the filters).
type Retirer struct {
	Config                     *relay.Config
	Filters                    Filters
	Group, Topic, Reason       string
	Stdout                     io.Writer
	Retired, Already, Filtered int
}

// Run retires the letters; an error leaves the counts of what it did.
func (rt *Retirer) Run(ctx context.Context) error {
	cfg := rt.Config
	opts, err := kafkaOptions(cfg)
	if err != nil {
		return err
	}
	admin, err := connect(opts)
	if err != nil {
		return fmt.Errorf("connect to Kafka: %w", err)
	}
	defer admin.Close()
	adm := kadm.NewClient(admin)
	start, err := listOffsets(ctx, adm, cfg.DLQTopic, -2)
	if errors.Is(err, errNoTopic) {
		return nil // nothing was ever dead-lettered
	}
	if err != nil {
		return err
	}
	end, err := listOffsets(ctx, adm, cfg.DLQTopic, -1)
	if err != nil {
		return err
	}
	committed, err := committedOffsets(ctx, adm, rt.Group, cfg.DLQTopic)
	if err != nil {
		return err
	}
	dlqID, err := topicID(ctx, adm, cfg.DLQTopic)
	if err != nil {
		return err
	}
	retired, err := readRetirements(ctx, adm, opts, rt.Topic, cfg.DLQTopic, dlqID)
	if err != nil {
		return err
	}
	// The pending letters: from the group's offsets (or the start) on.
	from := partitionOffsets{}
	for p, s := range start {
		from[p] = s
		if c, ok := committed[p]; ok && c > s {
			from[p] = c
		}
	}
	var recs []*kgo.Record
	now, by := time.Now().UTC(), retiredBy()
	err = readRange(ctx, opts, cfg.DLQTopic, from, end, func(r *kgo.Record) {
		l := letterOf(r)
		id, _ := l.Header(router.HeaderID)
		where := fmt.Sprintf("id=%s partition=%d offset=%d", relay.Token(id), r.Partition, r.Offset)
		key := retiredKey(cfg.DLQTopic, dlqID, r.Partition, r.Offset)
		if why := rt.Filters.filtered(l); why != "" {
			rt.Filtered++
			return
		}
		if prev, ok := retired[key]; ok {
			rt.Already++
			fmt.Fprintf(rt.Stdout, "already retired %s at %s by %s reason=%s\n", where, prev.RetiredAt.Format(time.RFC3339), prev.RetiredBy, strconv.Quote(prev.Reason))
			return
		}
		et, _ := l.Header(router.HeaderEventType)
		table, _ := l.Header(recordpkg.HeaderTable)
		ret := Retirement{DLQTopic: cfg.DLQTopic, TopicID: hex.EncodeToString(dlqID[:]), Partition: r.Partition, Offset: r.Offset,
			ID: string(id), EventType: string(et), ErrorKind: l.Kind(), Table: string(table), LetterTime: r.Timestamp.UTC(),
			Reason: rt.Reason, RetiredAt: now, RetiredBy: by}
		value, _ := json.Marshal(ret) // strings, numbers and times always marshal
		recs = append(recs, &kgo.Record{Topic: rt.Topic, Key: []byte(key), Value: value, Timestamp: now})
		if rt.Filters.DryRun {
			fmt.Fprintf(rt.Stdout, "would be retired %s kind=%s\n", where, l.Kind())
		}
	})
	if err != nil {
		return err
	}
	if rt.Filters.DryRun {
		rt.Retired = len(recs)
		return nil
	}
	if len(recs) == 0 {
		return nil
	}
	if err := createCompacted(ctx, adm, rt.Topic); err != nil {
		return err
	}
	pcl, err := connect(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		return fmt.Errorf("connect to Kafka: %w", err)
	}
	defer pcl.Close()
	results, err := kproduce.Sync(ctx, pcl, recs...)
	if err != nil {
		return fmt.Errorf("write the Retirements to %s: %w", rt.Topic, err)
	}
	for _, res := range results {
		if res.Err != nil {
			return fmt.Errorf("write the Retirement to %s: %w", rt.Topic, res.Err)
		}
		var ret Retirement
		json.Unmarshal(res.Record.Value, &ret)
		rt.Retired++
		fmt.Fprintf(rt.Stdout, "retired id=%s partition=%d offset=%d kind=%s\n", relay.Token([]byte(ret.ID)), ret.Partition, ret.Offset, ret.ErrorKind)
	}
	return nil
}

// createCompacted creates topic, compacted and kept forever, unless it
// exists. It gives adm's requests 30 s, as the broker may take that long.
func createCompacted(ctx context.Context, adm *kadm.Client, topic string) error {
	adm.SetTimeoutMillis(30000)
	resp, err := adm.CreateTopics(ctx, 1, -1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact"), "retention.ms": kadm.StringPtr("-1")}, topic)
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	for _, rt := range resp {
		if rt.Err != nil && !errors.Is(rt.Err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", topic, rt.Err)
		}
	}
	return nil
}
