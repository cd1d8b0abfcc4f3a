package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// What lands in Kafka is checked with franz-go, independent of the relay's
// kafka-go client and of its own decoding.

// topicRecords sums the end offsets of topic's partitions. A topic that does
// not exist holds 0 records.
func topicRecords(ctx context.Context, broker, topic string) (int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	ends, err := endOffsets(ctx, cl, topic)
	if err != nil {
		return 0, err
	}
	return sumOffsets(ends, nil), nil
}

// endOffsets returns the end offset of each of topic's partitions; none for
// a topic that does not exist.
func endOffsets(ctx context.Context, cl *kgo.Client, topic string) (map[int32]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()

	meta := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	meta.Topics = append(meta.Topics, mt)
	mresp, err := meta.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("metadata for %s: %w", topic, err)
	}
	if len(mresp.Topics) != 1 {
		return nil, fmt.Errorf("metadata for %s: %d topics in the answer", topic, len(mresp.Topics))
	}
	if err := kerr.ErrorForCode(mresp.Topics[0].ErrorCode); err != nil {
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			return map[int32]int64{}, nil
		}
		return nil, fmt.Errorf("metadata for %s: %w", topic, err)
	}

	req := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = topic
	for _, p := range mresp.Topics[0].Partitions {
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition = p.Partition
		lp.Timestamp = -1 // the end offset
		lt.Partitions = append(lt.Partitions, lp)
	}
	req.Topics = append(req.Topics, lt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("list offsets of %s: %w", topic, err)
	}
	ends := map[int32]int64{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("list offsets of %s[%d]: %w", topic, p.Partition, err)
			}
			ends[p.Partition] = p.Offset
		}
	}
	return ends, nil
}

// sumOffsets returns how many records lie between from and ends, summed
// over ends' partitions (a partition missing from from starts at 0).
func sumOffsets(ends, from map[int32]int64) int64 {
	var sum int64
	for p, end := range ends {
		sum += end - from[p]
	}
	return sum
}

// verifyIDs reads the topic's records (want of them, from the start) and
// checks that the "id" headers cover every outbox id of the load. It
// returns how many records repeated an id.
func verifyIDs(ctx context.Context, broker, topic string, want int64, load loadInfo) (dups int64, err error) {
	return verifyIDsFrom(ctx, broker, topic, nil, want, load)
}

// verifyIDsFrom is verifyIDs for the records after the offsets in from, by
// partition (nil: from the start), for a topic that earlier runs wrote to
// as well.
func verifyIDsFrom(ctx context.Context, broker, topic string, from map[int32]int64, want int64, load loadInfo) (dups int64, err error) {
	return verifyRead(ctx, broker, topic, from, want, false, load)
}

// committedSettle is how long verifyIDsCommitted keeps reading after it has
// seen every id, for duplicates behind them.
const committedSettle = 2 * time.Second

// verifyIDsCommitted is verifyIDs with a read_committed consumer, for the
// relay in exactly-once mode: the end offsets count commit markers, which
// no consumer sees, so it reads until every id has been seen and then for
// committedSettle more.
func verifyIDsCommitted(ctx context.Context, broker, topic string, load loadInfo) (dups int64, err error) {
	return verifyRead(ctx, broker, topic, nil, -1, true, load)
}

// verifyRead reads topic after from (nil: from the start), want records or,
// with want < 0, until every id of the load has been seen and
// committedSettle has passed without a record, read_committed when
// committed is set. It checks the "id" headers against the load's ids and
// returns how many repeated one.
func verifyRead(ctx context.Context, broker, topic string, from map[int32]int64, want int64, committed bool, load loadInfo) (dups int64, err error) {
	consume := kgo.ConsumeTopics(topic)
	if from != nil {
		parts := map[int32]kgo.Offset{}
		for p, o := range from {
			parts[p] = kgo.NewOffset().At(o)
		}
		consume = kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts})
	}
	opts := []kgo.Opt{kgo.SeedBrokers(broker), consume, kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	seen := make([]bool, load.MaxID-load.MinID+1)
	var got, missingHeader, distinct int64
	count := func(r *kgo.Record) {
		got++
		id := int64(-1)
		for _, h := range r.Headers {
			if h.Key == "id" {
				id, _ = strconv.ParseInt(string(h.Value), 10, 64)
			}
		}
		switch {
		case id < load.MinID || id > load.MaxID:
			missingHeader++
		case seen[id-load.MinID]:
			dups++
		default:
			seen[id-load.MinID] = true
			distinct++
		}
	}
	for want < 0 || got < want {
		pctx, pcancel := ctx, context.CancelFunc(func() {})
		settling := want < 0 && distinct == int64(len(seen))
		if settling {
			pctx, pcancel = context.WithTimeout(ctx, committedSettle)
		}
		fs := cl.PollFetches(pctx)
		pcancel()
		switch {
		case ctx.Err() != nil && want < 0:
			return dups, fmt.Errorf("read %s (read_committed): %d of %d ids within the deadline: %w", topic, distinct, len(seen), ctx.Err())
		case ctx.Err() != nil:
			return dups, fmt.Errorf("read %s: %d of %d records within the deadline: %w", topic, got, want, ctx.Err())
		case settling && fs.NumRecords() == 0 && pctx.Err() != nil:
			want = got // settled: nothing behind the last id
			continue
		}
		for _, fe := range fs.Errors() {
			if errors.Is(fe.Err, context.DeadlineExceeded) && settling {
				continue
			}
			return dups, fmt.Errorf("read %s[%d]: %w", fe.Topic, fe.Partition, fe.Err)
		}
		fs.EachRecord(count)
	}
	var missing int64
	for _, ok := range seen {
		if !ok {
			missing++
		}
	}
	if missing > 0 || missingHeader > 0 {
		return dups, fmt.Errorf("%s: %d outbox ids missing, %d records without a valid id header, %d duplicates in %d records", topic, missing, missingHeader, dups, got)
	}
	return dups, nil
}
