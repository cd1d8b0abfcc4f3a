package replication

import (
	"sync"
	"sync/atomic"
	"time"
)

// State is where the stream is in its lifecycle.
type State int32

// The states a Stream goes through.
const (
	StateStarting     State = iota // connecting for the first time
	StateStreaming                 // START_REPLICATION succeeded
	StateStandby                   // another instance holds the slot
	StateReconnecting              // waiting to reconnect after an error
	StateHalted                    // stopped on a fatal error
	StateStopped                   // shut down cleanly
	StateWaiting                   // the server is a standby: waiting for its promotion
)

var stateNames = [...]string{"starting", "streaming", "standby", "reconnecting", "halted", "stopped", "waiting"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "unknown"
}

// Stats are the stream's live figures, read by the metrics endpoint.
type Stats struct {
	state         atomic.Int32
	serverWALEnd  atomic.Uint64
	confirmed     atomic.Uint64
	lastStatus    atomic.Int64 // unix nanos
	lastKeepalive atomic.Int64
	lastMessage   atomic.Int64
	rowsRead      atomic.Uint64
	confCommitNs  atomic.Int64
	confCommitLSN atomic.Uint64
	backpressure  atomic.Bool
	gathering     atomic.Bool
	haltCause     atomic.Pointer[string]
	slotFailover  atomic.Bool
	slotSample    atomic.Pointer[SlotSample]
	serverMajor   atomic.Int32
	server        atomic.Pointer[Server]
	hosts         []string

	mu         sync.Mutex
	reconnects map[string]uint64
	lastCause  string
	tracker    atomic.Pointer[Tracker]
}

// Tracker is the current connection's tracker; nil before the first.
func (s *Stats) Tracker() *Tracker { return s.tracker.Load() }

// SlotFailover reports whether the slot was a failover slot when the
// stream last started.
func (s *Stats) SlotFailover() bool { return s.slotFailover.Load() }

// SlotSample is the newest reading of a SlotPoller; nil before the first,
// and while the slot's row cannot be read.
func (s *Stats) SlotSample() *SlotSample { return s.slotSample.Load() }

// ServerMajor is the major version of the server last connected to (0
// before the first connection).
func (s *Stats) ServerMajor() int { return int(s.serverMajor.Load()) }

// Server is what IDENTIFY_SYSTEM said on the newest connection (nil before
// the first).
func (s *Stats) Server() *Server { return s.server.Load() }

// Hosts are the host:port pairs of --pg-url, in the order they are tried.
func (s *Stats) Hosts() []string { return s.hosts }

// State is the current lifecycle state.
func (s *Stats) State() State { return State(s.state.Load()) }

// ServerWALEnd is the newest WAL end the server reported.
func (s *Stats) ServerWALEnd() LSN { return LSN(s.serverWALEnd.Load()) }

// Confirmed is the LSN last sent to PostgreSQL as flushed.
func (s *Stats) Confirmed() LSN { return LSN(s.confirmed.Load()) }

// LagBytes is ServerWALEnd minus Confirmed (0 when not yet known).
func (s *Stats) LagBytes() uint64 {
	end, conf := s.serverWALEnd.Load(), s.confirmed.Load()
	if end <= conf || conf == 0 {
		return 0
	}
	return end - conf
}

// LastStatus is when the last status update was sent.
func (s *Stats) LastStatus() time.Time { return unixTime(s.lastStatus.Load()) }

// LastKeepalive is when the last keepalive arrived.
func (s *Stats) LastKeepalive() time.Time { return unixTime(s.lastKeepalive.Load()) }

// LastMessage is when any message last arrived from the server.
func (s *Stats) LastMessage() time.Time { return unixTime(s.lastMessage.Load()) }

// HaltCause is the fatal error that halted the stream ("" unless halted).
func (s *Stats) HaltCause() string {
	if p := s.haltCause.Load(); p != nil {
		return *p
	}
	return ""
}

// Backpressure reports whether the reader is waiting for in-flight room:
// Kafka is slower than the WAL, and PostgreSQL holds the WAL meanwhile.
func (s *Stats) Backpressure() bool { return s.backpressure.Load() }

// Gathering reports whether the reader now waits for a steady rate's
// transactions in the kernel (Config.Gather; lowat.go): what it hands over
// comes in batches that waited for company already.
func (s *Stats) Gathering() bool { return s.gathering.Load() }

// RowsRead counts outbox rows read from the stream.
func (s *Stats) RowsRead() uint64 { return s.rowsRead.Load() }

// ConfirmedCommitTime is the commit time of the newest confirmed transaction.
func (s *Stats) ConfirmedCommitTime() time.Time { return unixTime(s.confCommitNs.Load()) }

// AckedCommitTime is the commit time of the newest transaction the broker
// acknowledged, which Confirmed reaches once a checkpoint covers it; zero
// before the first.
func (s *Stats) AckedCommitTime() time.Time {
	if t := s.tracker.Load(); t != nil {
		if _, ct := t.ReadyCommit(); !ct.IsZero() {
			return ct
		}
	}
	return s.ConfirmedCommitTime()
}

// ConfirmedCommitLSN is the end LSN of the newest confirmed transaction (0
// before the first); read it before ConfirmedCommitTime and the pair may be
// one status update apart, never mixed the other way.
func (s *Stats) ConfirmedCommitLSN() LSN { return LSN(s.confCommitLSN.Load()) }

// InFlight returns events and bytes in flight in the current session.
func (s *Stats) InFlight() (events int, bytes int64) {
	if t := s.tracker.Load(); t != nil {
		return t.InFlight()
	}
	return 0, 0
}

// OldestInFlight is how long ago the oldest event in flight in the current
// session (read from the slot, not yet acknowledged by Kafka) was read; 0
// when nothing is in flight. Like InFlight, it keeps the last session's
// figure while the stream reconnects.
func (s *Stats) OldestInFlight(now time.Time) time.Duration {
	if t := s.tracker.Load(); t != nil {
		return t.OldestInFlight(now)
	}
	return 0
}

// Reconnects returns reconnect counts by cause.
func (s *Stats) Reconnects() map[string]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]uint64, len(s.reconnects))
	for k, v := range s.reconnects {
		out[k] = v
	}
	return out
}

func (s *Stats) countReconnect(cause string) {
	s.mu.Lock()
	if s.reconnects == nil {
		s.reconnects = map[string]uint64{}
	}
	s.reconnects[cause]++
	s.lastCause = cause
	s.mu.Unlock()
}

// LastReconnectCause is the cause of the newest reconnect ("" if none).
func (s *Stats) LastReconnectCause() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastCause
}

func unixTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}
