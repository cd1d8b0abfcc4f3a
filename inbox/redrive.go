package inbox

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Letter is one record of the consumer's dead-letter topic, as a Redrive
// filter sees it.
type Letter struct {
	// ID, Type and AggregateType are the original record's id, event_type
	// and aggregate_type headers.
	ID, Type, AggregateType string
	// Topic, Partition and Offset locate the original record.
	Topic     string
	Partition int
	Offset    int64
	// Error is the reason it was dead-lettered (the error header).
	Error string
	// DLQPartition and DLQOffset locate the letter in the DLQ topic.
	DLQPartition int
	DLQOffset    int64
}

// RedriveStats counts what a Redrive did.
type RedriveStats struct {
	// Read letters of the DLQ topic, up to its end when Redrive began.
	Read int
	// Skipped by the filter, or written by another consumer.
	Skipped int
	// Applied: the handler ran and its transaction committed.
	Applied int
	// Duplicates: the mark was there (applied before, by Run or an earlier
	// Redrive); nothing ran.
	Duplicates int
	// Failed letters: the handler failed MaxAttempts times again, or the
	// record still cannot be decoded. They stay in the DLQ topic.
	Failed int
}

// Redrive reads the consumer's dead-letter topic (Config.DLQTopic) from its
// start to its end at the call, and runs each letter that this consumer
// wrote and filter accepts (nil: all) through the same path as Run: decode,
// mark, handler, commit, with the same retries. It does not re-publish to
// the source topic, which every other consumer group would see again. An
// event applied once is never applied again: a second Redrive, or a letter
// whose event was meanwhile applied, finds its mark and counts a duplicate.
// A letter that fails again stays in the DLQ, where it already is; Redrive
// writes nothing to Kafka and commits no offsets. It may run while Run
// runs.
func (c *Consumer[T]) Redrive(ctx context.Context, filter func(Letter) bool) (RedriveStats, error) {
	var st RedriveStats
	topic := c.cfg.DLQTopic
	cl, err := kgo.NewClient(c.clientOpts()...)
	if err != nil {
		return st, fmt.Errorf("inbox: redrive: kafka client: %w", err)
	}
	defer cl.Close()
	ends, err := letterRange(ctx, cl, topic)
	if err != nil {
		return st, fmt.Errorf("inbox: redrive: offsets of %s: %w", topic, err)
	}
	for len(ends) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return st, ctx.Err()
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if ferr == nil {
				ferr = fmt.Errorf("inbox: redrive: read %s/%d: %w", t, p, err)
			}
		})
		if ferr != nil {
			return st, ferr
		}
		for _, r := range fs.Records() {
			end, left := ends[r.Partition]
			if !left || r.Offset >= end {
				continue // past the end at the call
			}
			st.Read++
			c.redriveLetter(ctx, r, filter, &st)
			if ctx.Err() != nil {
				return st, ctx.Err()
			}
			if r.Offset >= end-1 {
				delete(ends, r.Partition)
			}
		}
	}
	c.log.Info("redrive done", "dlq_topic", topic, "read", st.Read, "skipped", st.Skipped, "applied", st.Applied,
		"duplicates", st.Duplicates, "failed", st.Failed)
	return st, nil
}

// letterRange lists the partitions of topic that hold letters, with their
// end offsets, and has cl consume them from their start. A topic that does
// not exist holds none.
func letterRange(ctx context.Context, cl *kgo.Client, topic string) (map[int32]int64, error) {
	adm := kadm.NewClient(cl)
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	endOffsets, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = endOffsets.Error()
	}
	if err != nil {
		return nil, err
	}
	ends := map[int32]int64{}
	from := map[int32]kgo.Offset{}
	starts.Each(func(o kadm.ListedOffset) {
		if end, ok := endOffsets.Lookup(o.Topic, o.Partition); ok && o.Offset < end.Offset {
			ends[o.Partition] = end.Offset
			from[o.Partition] = kgo.NewOffset().At(o.Offset)
		}
	})
	if len(from) > 0 {
		cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: from})
	}
	return ends, nil
}

// redriveLetter runs one letter.
func (c *Consumer[T]) redriveLetter(ctx context.Context, m *kgo.Record, filter func(Letter) bool, st *RedriveStats) {
	orig, l, ours := unwrapLetter(m, c.cfg.Consumer)
	if !ours || (filter != nil && !filter(l)) {
		st.Skipped++
		return
	}
	ev, ok := c.prepare(ctx, nil, orig, false)
	if !ok {
		if ctx.Err() == nil {
			c.log.Warn("redrive: letter still cannot be processed; it stays in the dead-letter topic",
				"id", l.ID, "dlq_offset", l.DLQOffset, "reason", ev.rejected)
			st.Failed++
		}
		return
	}
	dup, err := c.retry(ctx, ev)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("redrive: letter failed again; it stays in the dead-letter topic",
				"id", l.ID, "dlq_offset", l.DLQOffset, "attempts", ev.Attempt, "error", err)
			st.Failed++
		}
		return
	}
	if dup {
		st.Duplicates++
	} else {
		st.Applied++
	}
}

// unwrapLetter returns the original record of a dead letter (its headers
// without those deadLetter added, its topic, partition and offset), the
// Letter, and whether consumer wrote it.
func unwrapLetter(m *kgo.Record, consumer string) (*kgo.Record, Letter, bool) {
	l := Letter{DLQPartition: int(m.Partition), DLQOffset: m.Offset}
	orig := &kgo.Record{Key: m.Key, Value: m.Value}
	var from string
	for _, h := range m.Headers {
		v := string(h.Value)
		switch h.Key {
		case HeaderConsumer:
			from = v
		case HeaderTopic:
			l.Topic = v
		case HeaderPartition:
			l.Partition, _ = strconv.Atoi(v)
		case HeaderOffset:
			l.Offset, _ = strconv.ParseInt(v, 10, 64)
		case HeaderAttempts:
		case HeaderError:
			l.Error = v
		default:
			orig.Headers = append(orig.Headers, h)
			switch h.Key {
			case "id":
				l.ID = v
			case "event_type":
				l.Type = v
			case "aggregate_type":
				l.AggregateType = v
			}
		}
	}
	orig.Topic, orig.Partition, orig.Offset = l.Topic, int32(l.Partition), l.Offset
	return orig, l, from == consumer
}
