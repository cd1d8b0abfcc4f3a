package inbox

import (
	"context"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/internal/backoff"
	"github.com/cdc-relay/cdc-relay/internal/kproduce"
)

// Headers added to a dead-letter record, after the original record's
// headers. HeaderError carries the reason (the last header of that name).
const (
	HeaderError     = "error"
	HeaderConsumer  = "inbox_consumer"
	HeaderTopic     = "inbox_topic"
	HeaderPartition = "inbox_partition"
	HeaderOffset    = "inbox_offset"
	HeaderAttempts  = "inbox_attempts"
)

// maxReason keeps the error header a sane size.
const maxReason = 2000

// deadLetter writes the original record, with the reason, to the DLQ
// topic, retrying until Kafka takes it: nothing is dropped silently. It
// returns false only when ctx ended first.
func (c *Consumer[T]) deadLetter(ctx context.Context, w *kgo.Client, ev *Event[T], m *kgo.Record, reason string, attempts int) bool {
	if len(reason) > maxReason {
		reason = reason[:maxReason] + "..."
	}
	headers := append(append([]kgo.RecordHeader(nil), m.Headers...),
		kgo.RecordHeader{Key: HeaderConsumer, Value: []byte(c.cfg.Consumer)},
		kgo.RecordHeader{Key: HeaderTopic, Value: []byte(m.Topic)},
		kgo.RecordHeader{Key: HeaderPartition, Value: []byte(strconv.Itoa(int(m.Partition)))},
		kgo.RecordHeader{Key: HeaderOffset, Value: []byte(strconv.FormatInt(m.Offset, 10))},
		kgo.RecordHeader{Key: HeaderAttempts, Value: []byte(strconv.Itoa(attempts))},
		kgo.RecordHeader{Key: HeaderError, Value: []byte(reason)},
	)
	rec := kgo.Record{Topic: c.cfg.DLQTopic, Key: m.Key, Value: m.Value, Headers: headers}
	b := backoff.Backoff{Min: c.cfg.RetryMin, Max: c.cfg.RetryMax}
	for {
		r := rec // a record of its own for each try
		// Not ProduceSync, which can outlast ctx while Kafka is down (see
		// kproduce): a letter given up on may still land, and is written
		// again after the restart (consumers of the DLQ dedupe by id).
		res, err := kproduce.Sync(ctx, w, &r)
		if err == nil {
			err = res.FirstErr()
		}
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return false
		}
		c.log.Warn("dead-letter write failed; retrying", "dlq_topic", c.cfg.DLQTopic, "id", ev.ID, "error", err, "consecutive_errors", b.Attempts()+1)
		if b.Wait(ctx) != nil {
			return false
		}
	}
	c.deadLettered.Add(1)
	c.log.Error("event sent to the dead-letter topic", "dlq_topic", c.cfg.DLQTopic, "id", ev.ID, "event_type", ev.Type,
		"topic", m.Topic, "partition", m.Partition, "offset", m.Offset, "reason", reason)
	return true
}
