package replication

import "time"

// This file: how many bytes wake the reader (SO_RCVLOWAT), and how long a
// read waits for them. A read that finds data returns it at once, so
// nothing waits that was already there; the option only decides when a
// reader that found the socket empty is woken.
//
// While a backlog drains the walsender is the limit, not the relay: the
// relay keeps up, and each read of the socket would find a message or two,
// a wake-up of the relay (which the walsender's send pays for) and a system
// call apiece. So while the transaction being read committed more than
// lowatBehind before the walsender sent it, the reader is woken only once
// streamLowat bytes are queued, and a read waits at most lowatWait for
// them. A read that waited lowatWait without streamLowat arriving (the end
// of the backlog) ends the mode until the next transaction that is behind.
// Both times are the server's, so the clocks of the relay and the server
// need not agree.
//
// At a steady rate (a thousand single-row transactions a second) the same
// holds per transaction: each came in a wake-up of its own, and at that
// rate the wake-ups, not the bytes, are the relay's cost. With Config.Gather
// set, the reader is woken once the bytes of the transactions that come
// within a Gather of the first are queued (the rate measured over windows
// of at least two Gathers), and a read waits at most two Gathers for them:
// the wait a linger gives a batch's first record, spent in the kernel
// instead of in a timer of the relay's. Below one transaction a Gather the
// reader wakes on the first bytes, as without it. A read that waited two
// Gathers (the rate fell) wakes on the first bytes again until the next
// window's measure. Wake-ups the relay saves are sends the walsender makes
// without waking anyone.
const (
	lowatBehind = time.Second
	streamLowat = 64 << 10
	lowatWait   = 5 * time.Millisecond
)

// copyDataOverhead is the bytes of a CopyData message around its data.
const copyDataOverhead = 5

// setBehind turns the backlog's lowat mode on or off.
func (r *reader) setBehind(behind bool) {
	r.behind = behind
	r.setLowat()
}

// setLowat sets SO_RCVLOWAT for the mode: a backlog's streamLowat, the
// steady rate's gather.lowat, or 1. A steady rate's that moved by less
// than a quarter is left as it is: each change is a system call.
func (r *reader) setLowat() {
	if on := !r.behind && r.gather.lowat > 1 && !r.noLowat; on != r.s.stats.gathering.Load() {
		r.s.stats.gathering.Store(on)
	}
	n := 1
	if r.behind {
		n = streamLowat
	} else if r.gather.lowat > 1 {
		n = r.gather.lowat
	}
	cur := max(r.lowat, 1)
	if n == cur || r.noLowat || !r.behind && n > 1 && cur > 1 && cur < streamLowat && abs(n-cur) < cur/4 {
		return
	}
	if err := setReadLowat(r.conn.Conn(), n); err != nil {
		r.s.log.Debug("cannot set SO_RCVLOWAT on the replication connection; each read wakes on the first bytes", "error", err)
		// Off failed: the socket may still wait for more than 1 byte,
		// so the reads keep the mode's bound.
		r.noLowat = true
		return
	}
	r.lowat = n
}

// lowatWaitEnd is when a read that starts at now stops waiting for the
// SO_RCVLOWAT bytes; zero when every read wakes on the first bytes.
func (r *reader) lowatWaitEnd(now time.Time) time.Time {
	switch {
	case r.lowat <= 1:
		return time.Time{}
	case r.behind:
		return now.Add(lowatWait)
	default:
		return now.Add(2 * r.s.cfg.Gather)
	}
}

// lowatExpired: a read waited lowatWaitEnd without the bytes arriving. The
// backlog is near its end, or the steady rate fell: read each message
// again, and take what is queued now.
func (r *reader) lowatExpired() {
	r.behind, r.gather.lowat = false, 0
	r.setLowat()
}

// gatherer measures a steady rate's bytes and transactions per Gather.
type gatherer struct {
	from    time.Time // the window's start
	last    time.Time // the last read that found data
	bytes   int       // CopyData bytes handled in the window
	commits int       // transactions handled in the window
	lowat   int       // bytes that wake the reader; 0: the first bytes
}

// read notes a read of the socket that found data at now. Once the window
// spans two Gathers its rate sets lowat, and a new window starts; a read
// after a silence of more than four Gathers starts one afresh, waking on
// the first bytes.
func (g *gatherer) read(now time.Time, gather time.Duration) {
	quiet := now.Sub(g.last) > 4*gather
	g.last = now
	if quiet {
		*g = gatherer{from: now, last: now}
		return
	}
	span := now.Sub(g.from)
	if span < 2*gather {
		return
	}
	g.lowat = 0
	if g.commits > 0 {
		// As many transactions as a Gather brings, and the one that
		// began the wait: the first waits about a Gather, as a batch's
		// first record waits a linger. Only when a Gather brings one
		// at least, of the window's mean size.
		per, tx := int64(g.bytes)*int64(gather)/int64(span), int64(g.bytes/g.commits)
		if per >= tx {
			g.lowat = int(min(per+tx, streamLowat))
		}
	}
	g.from, g.bytes, g.commits = now, 0, 0
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
