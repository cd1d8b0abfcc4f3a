package publisher

import "time"

// This file: the linger of an at-least-once session, kept here instead of
// in kgo. kgo's linger timer fires a fixed time after a batch's first
// record, even when company came long before: at a steady rate of a
// thousand events a second, each produce request cost the relay a wake-up
// of its own. A session whose queue runs dry holds its records instead,
// and hands them to kgo (whose own linger is 0) as soon as a record comes
// once the oldest held has waited half the linger, when more are queued
// (a burst: kgo batches what comes while a request is in flight), when
// they fill a batch, or when the linger ends with nothing new. The timer
// is stopped whenever company comes in time. Exactly-once sessions keep
// kgo's linger: each commit sends at once anyway. While the records come
// gathered (Config.Gathered: at a steady rate the replication reader
// waited for their company in the kernel already), the session hands them
// over as soon as none is queued: holding them again would only add a
// timer's wake-up. A backlog's are held as before, so requests stay large.

// holder is what a session holds.
type holder struct {
	recs  []*Record
	since time.Time // when the oldest came
	bytes int
	timer *time.Timer
}

// holding reports whether records are held before kgo gets them.
func (s *Session) holding() bool { return s.txn == nil && s.p.cfg.Linger > 0 }

// take holds r, or produces it when the session does not hold records.
func (s *Session) take(r *Record) {
	if s.holding() {
		s.holdRecord(r)
		return
	}
	s.produce(r)
}

// maybeRelease releases what is held when more records are queued (not
// idle), when holdDue, or when the session failed.
func (s *Session) maybeRelease(idle bool) {
	if len(s.hold.recs) > 0 && (!idle || s.holdDue() || s.failed()) {
		s.release()
	}
}

// holdRecord keeps r until release.
func (s *Session) holdRecord(r *Record) {
	if len(s.hold.recs) == 0 {
		s.hold.since = time.Now()
		if s.hold.timer == nil {
			s.hold.timer = time.NewTimer(s.p.cfg.Linger)
		} else {
			s.hold.timer.Reset(s.p.cfg.Linger)
		}
	}
	s.hold.recs = append(s.hold.recs, r)
	s.hold.bytes += r.size()
}

// holdDue reports whether the held records go now, though the session is
// idle: the oldest has waited half the linger and others came meanwhile,
// they fill a batch, or they came gathered.
func (s *Session) holdDue() bool {
	return len(s.hold.recs) > 1 && time.Since(s.hold.since) >= s.p.cfg.Linger/2 || s.hold.bytes >= s.p.cfg.BatchBytes ||
		s.p.cfg.Gathered != nil && s.p.cfg.Gathered()
}

// holdTimer is the channel of the oldest held record's linger; nil when
// nothing is held.
func (s *Session) holdTimer() <-chan time.Time {
	if len(s.hold.recs) == 0 {
		return nil
	}
	return s.hold.timer.C
}

// release hands the held records to kgo, in order.
func (s *Session) release() {
	s.hold.timer.Stop()
	for _, r := range s.hold.recs {
		if !s.failed() {
			s.produce(r)
		}
	}
	clear(s.hold.recs)
	s.hold.recs, s.hold.bytes = s.hold.recs[:0], 0
}
