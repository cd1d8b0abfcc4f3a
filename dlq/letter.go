package dlq

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/publisher"
	recordpkg "github.com/cdc-relay/cdc-relay/record"
	"github.com/cdc-relay/cdc-relay/relay"
	"github.com/cdc-relay/cdc-relay/router"
)

// nopAcker: redrive waits for each batch with Drain.
type nopAcker struct{}

func (nopAcker) Ack(uint64, int, int64) {}

// mineKey identifies a letter this run appended: its id and attempts.
func mineKey(l *recordpkg.Letter) string { return letterKey(l, l.Attempts()) }

// letterKey is mineKey of letter l with attempts: its id header, or for a
// letter without one (unconfigured_table) a hash of its value and table.
func letterKey(l *recordpkg.Letter, attempts int) string {
	id, _ := l.Header(router.HeaderID)
	key := string(id)
	if len(id) == 0 {
		h := fnv.New64a()
		table, _ := l.Header(recordpkg.HeaderTable)
		h.Write(table)
		h.Write([]byte{0})
		h.Write(l.Value)
		key = "\x00" + strconv.FormatUint(h.Sum64(), 16)
	}
	return key + "\x00" + strconv.Itoa(attempts)
}

// batch builds and hands over one poll's letters, waits until Kafka
// acknowledged every record they became, then commits their offsets.
func (r *redriver) batch(ctx context.Context, cl *kgo.Client, recs []*kgo.Record) error {
	if len(recs) == 0 {
		return nil
	}
	items := make([]*redriveItem, 0, len(recs))
	var err error
	for _, src := range recs {
		var it *redriveItem
		if it, err = r.letter(ctx, src); err != nil {
			break
		}
		items = append(items, it)
	}
	if r.rf.DryRun {
		for _, it := range items {
			fmt.Fprintln(r.stdout, "would be "+it.String())
			r.counts[it.outcome]++
		}
		return err
	}
	// What was handed over is acknowledged and committed even after a
	// failure to build the next letter; a failure to drain commits none
	// of the batch (its letters come again: at least once).
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.ShutdownTimeout+time.Minute)
	defer cancel()
	if derr := r.sess.Drain(dctx); derr != nil {
		return fmt.Errorf("wait for Kafka: %w", derr)
	}
	done := make([]*kgo.Record, len(items))
	for i, it := range items {
		done[i] = it.src
	}
	if cerr := cl.CommitRecords(dctx, done...); cerr != nil {
		return fmt.Errorf("commit the offsets of group %s: %w", r.group, cerr)
	}
	r.mu.Lock()
	for _, it := range items {
		delete(r.items, it.seq)
		fmt.Fprintln(r.stdout, it.String())
		r.counts[it.outcome]++
		if it.outcome == outFailing || it.outcome == outFiltered || it.outcome == outSkipped {
			r.mine[it.key()] = true
		}
	}
	r.mu.Unlock()
	return err
}

// key is mineKey of the letter this item appended.
func (it *redriveItem) key() string {
	l := letterOf(it.src)
	a := it.attempt
	if it.outcome == outFiltered || it.outcome == outSkipped {
		a = l.Attempts()
	}
	if it.outcome == outFailing && len(it.rowID) > 0 {
		// An unconfigured_table letter built again: its new letter has the
		// row's id.
		return string(it.rowID) + "\x00" + strconv.Itoa(a)
	}
	return letterKey(l, a)
}

// letter decides what becomes of one dead letter and, unless a dry run,
// hands the record it becomes to the session.
func (r *redriver) letter(ctx context.Context, src *kgo.Record) (*redriveItem, error) {
	l := letterOf(src)
	id, _ := l.Header(router.HeaderID)
	it := &redriveItem{src: src, id: relay.Token(id)}
	if ret, ok := r.retired[retiredKey(r.cfg.DLQTopic, r.dlqID, src.Partition, src.Offset)]; ok {
		// Before the filters: a retired letter is never re-appended.
		it.outcome, it.reason = outRetired, ret.Reason
		return it, nil
	}
	if why := r.rf.filtered(l); why != "" {
		it.outcome, it.reason, it.topic = outFiltered, why, r.cfg.DLQTopic
		if r.rf.DryRun {
			return it, nil
		}
		rec := copyLetter(src, r.cfg.DLQTopic)
		return it, r.enqueue(it, rec)
	}
	rb, err := r.step.rebuild(l)
	if err != nil {
		// Appended again unchanged, so that it stays pending (dlq stats)
		// until a run builds it or dlq retire retires it.
		it.outcome, it.reason, it.topic = outSkipped, err.Error()+"; re-appended unchanged: pending until it is built or retired (cdc-relay dlq retire)", r.cfg.DLQTopic
		r.log.Warn("dead letter skipped: it cannot be built again; it is appended again unchanged and stays pending until a redrive builds it or dlq retire retires it", "partition", src.Partition, "offset", src.Offset, "id", it.id, "reason", err.Error())
		if r.rf.DryRun {
			return it, nil
		}
		return it, r.enqueue(it, copyLetter(src, r.cfg.DLQTopic))
	}
	if l.Kind() == recordpkg.ReasonUnconfigured {
		it.id, it.rowKey, it.rowID = relay.Token(rb.Row.ID), rb.Row.AggregateID, rb.Row.ID
	}
	rec := publisher.NewRecord()
	inv, err := r.step.builder.Build(ctx, rec, rb.CommitTime, &rb.Row)
	if err != nil {
		publisher.Release(rec)
		return nil, fmt.Errorf("build the record of dead letter id=%s (partition %d offset %d): %w", it.id, src.Partition, src.Offset, err)
	}
	it.topic = rec.Topic
	if inv == nil {
		it.outcome = outRedriven
	} else {
		it.outcome, it.kind, it.reason, it.attempt = outFailing, inv.Kind, inv.Reason, l.Attempts()+1
		rec.Headers = withAttempts(rec.Headers, it.attempt)
	}
	if r.rf.DryRun {
		publisher.Release(rec)
		return it, nil
	}
	return it, r.enqueue(it, rec)
}

// enqueue hands rec to the session, remembering it for Reject.
func (r *redriver) enqueue(it *redriveItem, rec *publisher.Record) error {
	r.seq++
	it.seq, rec.Seq = r.seq, r.seq
	r.mu.Lock()
	r.items[it.seq] = it
	r.mu.Unlock()
	return r.sess.Enqueue(rec)
}

// rejected is the publisher's Reject: the broker refused a record (too
// large for its topic, or its timestamp). The letter is re-appended as it
// was read, with redrive_attempts one higher and the broker's reason, so
// that nothing of it is lost.
func (r *redriver) rejected(rec *publisher.Record, err error) (*publisher.Record, error) {
	r.mu.Lock()
	it := r.items[rec.Seq]
	r.mu.Unlock()
	if it == nil {
		return nil, fmt.Errorf("the broker refused a record redrive does not know: %w", err)
	}
	_, inv := recordpkg.Rejected(r.cfg.DLQTopic, rec, err)
	dl := copyLetter(it.src, r.cfg.DLQTopic)
	r.mu.Lock()
	it.outcome, it.topic, it.kind, it.reason = outFailing, r.cfg.DLQTopic, inv.Kind, inv.Reason
	it.attempt = letterOf(it.src).Attempts() + 1
	r.mu.Unlock()
	hs := dl.Headers[:0:0]
	for _, h := range dl.Headers {
		if h.Key != recordpkg.HeaderErrorKind && h.Key != recordpkg.HeaderError && h.Key != recordpkg.HeaderRedriveAttempts {
			hs = append(hs, h)
		}
	}
	hs = withAttempts(hs, it.attempt)
	hs = relay.AppendHeader(hs, recordpkg.HeaderErrorKind, []byte(inv.Kind))
	dl.Headers = relay.AppendHeader(hs, recordpkg.HeaderError, []byte(inv.Reason))
	dl.Seq, dl.Reserved = rec.Seq, rec.Reserved
	return dl, nil
}

// copyLetter is a dead letter as it was read, for topic.
func copyLetter(src *kgo.Record, topic string) *publisher.Record {
	rec := publisher.NewRecord()
	rec.Topic, rec.Time = topic, src.Timestamp
	rec.Key, rec.Value = src.Key, src.Value
	for _, h := range src.Headers {
		rec.Headers = relay.AppendHeader(rec.Headers, h.Key, h.Value)
	}
	return rec
}

// withAttempts sets the redrive_attempts header to n: in the place of an
// existing one, else just before outbox_row (or at the end).
func withAttempts[H ~relay.Header](hs []H, n int) []H {
	v := []byte(strconv.Itoa(n))
	at := len(hs)
	for i := range hs {
		switch h := relay.Header(hs[i]); h.Key {
		case recordpkg.HeaderRedriveAttempts:
			hs[i] = H{Key: h.Key, Value: v}
			return hs
		case recordpkg.HeaderRow:
			at = i
		}
	}
	return slices.Insert(hs, at, H{Key: recordpkg.HeaderRedriveAttempts, Value: v})
}

// summary prints the summary line and returns the exit code: 0 when
// nothing still fails.
func (r *redriver) summary(err error) int {
	c := r.counts
	skipped := c[outFiltered] + c[outSkipped] + c[outRetired]
	prefix := "redrive"
	switch {
	case r.rf.DryRun:
		prefix = "dry run: would have"
	case err != nil:
		prefix = "redrive incomplete"
	}
	retired := ""
	if c[outRetired] > 0 {
		retired = fmt.Sprintf(", %d retired", c[outRetired])
	}
	fmt.Fprintf(r.stdout, "%s: redriven %d, still failing %d, skipped %d (%d left out by the filters and re-appended, %d that cannot be built again%s) from %s, group %s\n",
		prefix, c[outRedriven], c[outFailing], skipped, c[outFiltered], c[outSkipped], retired, r.cfg.DLQTopic, r.group)
	if c[outFailing] > 0 {
		return relay.ExitFailed
	}
	return relay.ExitOK
}
