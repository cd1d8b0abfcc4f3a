package publisher

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// topicLimit is a topic's max.message.bytes, as read at.
type topicLimit struct {
	bytes int
	at    time.Time
}

// limitRetry is how long a failed DescribeConfigs leaves the default limit
// in place before the next try.
const limitRetry = 10 * time.Second

// recordLimit is the largest record the topic takes: MaxRecordBytes, or the
// topic's max.message.bytes when smaller, read with DescribeConfigs and
// cached for MetadataMaxAge. A failed read uses MaxRecordBytes (the broker
// still refuses what is too large) and tries again after limitRetry.
func (p *Publisher) recordLimit(ctx context.Context, cl *kgo.Client, topic string) int {
	p.limitsMu.Lock()
	l, ok := p.limits[topic]
	p.limitsMu.Unlock()
	if ok && time.Since(l.at) < p.cfg.MetadataMaxAge {
		return l.bytes
	}
	limit, err := describeMaxMessageBytes(ctx, cl, topic, p.cfg.RequestTimeout)
	at := time.Now()
	switch {
	case err != nil:
		limit, at = p.cfg.MaxRecordBytes, at.Add(limitRetry-p.cfg.MetadataMaxAge)
		if ok {
			limit = l.bytes
		}
		p.log.Debug("read max.message.bytes", "topic", topic, "err", err.Error())
	case limit <= 0 || limit > p.cfg.MaxRecordBytes:
		limit = p.cfg.MaxRecordBytes
	}
	p.limitsMu.Lock()
	p.limits[topic] = topicLimit{bytes: limit, at: at}
	p.limitsMu.Unlock()
	return limit
}

// batchMaxBytes is kgo's per-topic batch bound: BatchBytes, or less when the
// topic takes less.
func (p *Publisher) batchMaxBytes(topic string) int32 {
	p.limitsMu.Lock()
	l, ok := p.limits[topic]
	p.limitsMu.Unlock()
	if ok && l.bytes < p.cfg.BatchBytes {
		// The batch framing (61 bytes) is counted against the limit too.
		return int32(max(l.bytes+128, 1024))
	}
	return int32(p.cfg.BatchBytes)
}

// describeMaxMessageBytes reads a topic's max.message.bytes; 0 when the
// topic does not exist yet (auto-creation will make it with the broker's).
func describeMaxMessageBytes(ctx context.Context, cl *kgo.Client, topic string, timeout time.Duration) (int, error) {
	rctx, cancel := context.WithTimeout(ctx, min(timeout, 10*time.Second))
	defer cancel()
	rcs, err := kadm.NewClient(cl).DescribeTopicConfigs(rctx, topic)
	if err != nil {
		return 0, shardErr(err)
	}
	for _, rc := range rcs {
		if rc.Err != nil {
			if errors.Is(rc.Err, kerr.UnknownTopicOrPartition) {
				return 0, nil
			}
			return 0, rc.Err
		}
		for _, c := range rc.Configs {
			if c.Key == "max.message.bytes" && c.Value != nil {
				return strconv.Atoi(*c.Value)
			}
		}
	}
	return 0, nil
}

// shardErr is the first error of a kadm *ShardErrors, what the request
// alone fails with; any other err as it is.
func shardErr(err error) error {
	if se, ok := errors.AsType[*kadm.ShardErrors](err); ok && len(se.Errs) > 0 {
		return se.Errs[0].Err
	}
	return err
}

// limitCheck is how long a session uses a topic's limit before it asks the
// publisher's cache again.
const limitCheck = time.Second

// sendAlone sends a suspect record in a request of its own and waits for
// the answer: refused alone, it is at fault.
func (s *Session) sendAlone(r *Record) {
	if err := s.cl.Flush(s.ctx); err != nil {
		return
	}
	r.alone = true
	s.send(r)
	if err := s.cl.Flush(s.ctx); err != nil || !s.allAnswered() {
		return
	}
	if r.err == nil {
		return
	}
	err := r.err
	s.p.resolve(r, err)
	if s.txn != nil {
		s.fail(fmt.Errorf("produce to %s: the broker refused a record (%w); the Kafka transaction is aborted and the record goes to the dead-letter topic on the replay", r.Topic, err))
		return
	}
	s.reject(r, err)
}

// reject produces what Config.Reject gives in r's place, or fails.
func (s *Session) reject(r *Record, err error) {
	if s.p.cfg.Reject == nil || r.replaced {
		s.fail(fmt.Errorf("produce to %s: %w", r.Topic, err))
		return
	}
	rep, rerr := s.p.cfg.Reject(r, err)
	if rerr != nil {
		s.fail(rerr)
		return
	}
	rep.replaced = true
	s.mu.Lock()
	s.slots[rep.Seq&uint64(len(s.slots)-1)].rec = rep
	s.mu.Unlock()
	s.send(rep)
}

// refusalState is what the publisher knows of a record the broker refused.
type refusalState uint8

const (
	notRefused   refusalState = iota
	suspect                   // in a refused batch: send it alone
	refusedAlone              // refused alone: dead-letter it up front
)

// refusal is a refused record remembered across sessions.
type refusal struct {
	state refusalState
	err   error
}

// refusalKey names a record across sessions: a hash of its topic, key,
// value and headers (the records of a replay are built again alike).
func refusalKey(r *Record) uint64 {
	h := fnv.New64a()
	h.Write([]byte(r.Topic))
	h.Write([]byte{0})
	h.Write(r.Key)
	h.Write([]byte{0})
	h.Write(r.Value)
	for _, hd := range r.Headers {
		h.Write([]byte(hd.Key))
		h.Write(hd.Value)
	}
	return h.Sum64()
}

// suspectRecord remembers a record of a refused batch.
func (p *Publisher) suspectRecord(r *Record, err error) {
	p.refusedMu.Lock()
	defer p.refusedMu.Unlock()
	k := refusalKey(r)
	if p.refused[k].state == notRefused {
		p.refused[k] = refusal{state: suspect, err: err}
		p.refusedN.Store(int32(len(p.refused)))
	}
}

// resolve records that r was refused alone.
func (p *Publisher) resolve(r *Record, err error) {
	p.refusedMu.Lock()
	p.refused[refusalKey(r)] = refusal{state: refusedAlone, err: err}
	p.refusedN.Store(int32(len(p.refused)))
	p.refusedMu.Unlock()
}

// refusal says whether the broker refused r before; one map lookup only
// while some record was refused.
func (p *Publisher) refusal(r *Record) refusalState {
	if p.refusedN.Load() == 0 {
		return notRefused
	}
	p.refusedMu.Lock()
	defer p.refusedMu.Unlock()
	if len(p.refused) == 0 {
		return notRefused
	}
	return p.refused[refusalKey(r)].state
}

// refusedErr is the broker's refusal of r, remembered by resolve.
func (p *Publisher) refusedErr(r *Record) error {
	p.refusedMu.Lock()
	defer p.refusedMu.Unlock()
	return p.refused[refusalKey(r)].err
}
