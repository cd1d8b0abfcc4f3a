package replication

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cdc-relay/cdc-relay/decoder"
	"github.com/cdc-relay/cdc-relay/internal/backoff"
)

// Stream reads the slot and hands outbox rows to sessions, reconnecting with
// backoff until its context ends or a fatal error halts it.
type Stream struct {
	cfg   Config
	deps  Deps
	log   *slog.Logger
	stats *Stats

	// found is what Deps.Inspect returned, on the first connection that
	// got as far; nil before. Only the goroutine of Run uses it.
	found *Inspected

	raisedTimeout bool
	// joinedWarned is set once the tables that joined since the last
	// checkpoint were looked at (warnJoinedTables).
	joinedWarned bool
	// createdUnrecorded is set while the slot this process created has no
	// first checkpoint (Guard.SlotCreated) yet: the next connection writes it.
	createdUnrecorded bool
}

// NewStream returns a stream with its configuration and collaborators; Run
// starts it.
func NewStream(cfg Config, deps Deps) *Stream {
	cfg.setDefaults()
	if deps.Stats == nil {
		deps.Stats = &Stats{}
	}
	s := &Stream{cfg: cfg, deps: deps, log: cfg.Logger, stats: deps.Stats}
	s.stats.hosts = Hosts(cfg.URL)
	return s
}

// Stats returns the stream's live figures (Deps.Stats).
func (s *Stream) Stats() *Stats { return s.stats }

// errNoInspect is Run's answer to a stream made without Deps.Inspect.
var errNoInspect = errors.New("replication: NewStream needs Deps.Inspect")

// Run streams until ctx ends (returning nil after a clean drain and a final
// status update) or a fatal error (returned).
func (s *Stream) Run(ctx context.Context) error {
	if s.deps.Inspect == nil {
		return Fatal(errNoInspect)
	}
	bo := backoff.Backoff{Min: 250 * time.Millisecond, Max: 5 * time.Second}
	createSlot := true
	logged := map[string]bool{} // the distinct errors logged since the last progress
	for {
		progressed, err := s.connectAndStream(ctx, &createSlot)
		if ctx.Err() != nil && !IsFatal(err) {
			s.stats.state.Store(int32(StateStopped))
			s.log.Info("shutdown", "final_lsn", s.stats.Confirmed().String())
			return nil
		}
		if IsFatal(err) {
			cause := err.Error()
			s.stats.haltCause.Store(&cause)
			s.stats.state.Store(int32(StateHalted))
			attrs := []any{"cause", err.Error()}
			if c := s.stats.Confirmed(); c != 0 {
				// Only what this process confirmed: a halt before it
				// streamed has none, and its cause names the LSNs.
				attrs = append(attrs, "confirmed_lsn", c.String())
			}
			if s.cfg.IsConfigError != nil && s.cfg.IsConfigError(err) {
				s.log.Error("configuration error: stopping", attrs...)
			} else {
				s.log.Error("halt", attrs...)
			}
			return err
		}
		if u := s.unrecoverable(err); u != nil {
			return u
		}
		if progressed {
			bo.Reset()
			clear(logged)
		}
		if errors.Is(err, ErrWaitingPromotion) {
			if s.stats.State() != StateWaiting {
				s.log.Info("standby: waiting for promotion; the relay retries and never creates a slot on a standby", "slot", s.cfg.Slot, "detail", err.Error())
			} else {
				s.log.Debug("standby: still waiting for promotion", "attempts", bo.Attempts()+1, "detail", err.Error())
			}
			s.stats.state.Store(int32(StateWaiting))
			bo.Max = waitingRetryMax
		} else if errors.Is(err, ErrSlotActive) {
			if s.stats.State() != StateStandby {
				s.log.Info("standby: slot is active in another process; retrying", "slot", s.cfg.Slot)
			} else {
				s.log.Debug("standby: slot still active", "slot", s.cfg.Slot, "attempts", bo.Attempts()+1)
			}
			s.stats.state.Store(int32(StateStandby))
			bo.Max = standbyRetryMax
		} else {
			cause := classify(err, s.cfg.Broker)
			s.stats.countReconnect(cause)
			s.stats.state.Store(int32(StateReconnecting))
			bo.Max = 5 * time.Second
			// Each distinct error once: a retry loop repeats the same one.
			if key := errorKey(cause, err); !logged[key] {
				if len(logged) >= maxLoggedErrors {
					clear(logged)
				}
				logged[key] = true
				s.log.Warn("reconnect", "cause", cause, "err", err.Error(), "consecutive_errors", bo.Attempts()+1)
			} else {
				s.log.Debug("reconnect: the same error again", "cause", cause, "err", err.Error(), "consecutive_errors", bo.Attempts()+1)
			}
		}
		if bo.Wait(ctx) != nil {
			s.stats.state.Store(int32(StateStopped))
			s.log.Info("shutdown", "final_lsn", s.stats.Confirmed().String())
			return nil
		}
	}
}

// classify names an error's cause for logs and metrics; a session's
// failure is named after broker (Config.Broker) in lower case: "kafka",
// "rabbitmq".
func classify(err error, broker string) string {
	var pgErr *pgconn.PgError
	var netErr net.Error
	switch {
	case errors.Is(err, errStreamSilent):
		return "read_timeout"
	case errors.Is(err, ErrCheckpointUnavailable):
		return "checkpoint"
	case errors.Is(err, ErrFenced):
		return "fenced"
	case errors.Is(err, errSession):
		return strings.ToLower(broker)
	case errors.As(err, &pgErr):
		return "postgres_error"
	case errors.As(err, &netErr), errors.Is(err, net.ErrClosed):
		return "network"
	}
	return "other"
}

// waitingRetryMax caps the wait between attempts while no host is a
// primary: with jitter the relay tries again at least every 1.2 s, and so
// streams soon after a promotion.
const waitingRetryMax = time.Second

// standbyRetryMax caps a standby's wait between attempts. The backoff adds
// up to 20 % jitter, so a standby tries again at least every 2 s (1.92 s
// plus the attempt itself) and takes over soon after the slot is released.
const standbyRetryMax = 1600 * time.Millisecond

var (
	errStreamSilent = errors.New("no message from PostgreSQL within the read timeout: stream considered dead")
	errSession      = errors.New("session failed")
)

// progressAfter is how long a connection must stream before a failure
// counts as a fresh one (backoff reset) even without confirmed progress.
const progressAfter = 30 * time.Second

// connectAndStream runs one connection. progressed reports whether it got
// anywhere: the confirmed LSN moved or it streamed for progressAfter.
func (s *Stream) connectAndStream(ctx context.Context, createSlot *bool) (progressed bool, err error) {
	// Everything up to streaming is bounded (see dial.go): on a blackholed
	// connection a query would otherwise wait forever.
	setupCtx, cancelSetup := context.WithTimeout(ctx, setupTimeout)
	defer cancelSetup()
	rconn, err := s.connectReplication(setupCtx)
	if err != nil {
		return false, err
	}
	defer rconn.Close(context.Background())
	server, err := Identify(setupCtx, rconn)
	if err != nil {
		return false, err
	}
	conn, prepared, failover, err := s.prepare(ctx, setupCtx, createSlot, server, rconn)
	if err != nil {
		return false, err
	}
	defer conn.Close(context.Background())
	s.stats.server.Store(&server)
	readTimeout := s.readTimeout(setupCtx, conn)
	if failover && !prepared.Failover {
		if err := s.alterFailover(setupCtx, rconn); err != nil {
			return false, err
		}
	}

	// The publication name is quoted so that its case survives.
	pluginArgs := []string{"proto_version '1'", fmt.Sprintf(`publication_names '"%s"'`, s.cfg.Publication)}
	if s.found.MessagePrefix != "" {
		pluginArgs = append(pluginArgs, "messages 'true'")
	}
	if err := pglogrepl.StartReplication(setupCtx, rconn, s.cfg.Slot, 0, pglogrepl.StartReplicationOptions{PluginArgs: pluginArgs}); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "55006" {
			return false, fmt.Errorf("%w: %s", ErrSlotActive, pgErr.Message)
		}
		if errors.As(err, &pgErr) && pgErr.Code == "42704" {
			return false, Fatal(fmt.Errorf("slot %q: %w", s.cfg.Slot, ErrSlotDropped))
		}
		if errors.As(err, &pgErr) && pgErr.Code == "55000" {
			// A synchronised slot on a standby: usable only after promotion.
			return false, fmt.Errorf("%w: %s", ErrWaitingPromotion, pgErr.Message)
		}
		return false, fmt.Errorf("start replication: %w", err)
	}
	// Read the slot only now that this instance holds it: a previous holder
	// may have confirmed more just before it let go, and confirming less
	// would move the slot backwards.
	info, ok, err := LookupSlot(setupCtx, conn, s.cfg.Slot)
	if err != nil {
		return false, err
	}
	if !ok {
		return false, Fatal(fmt.Errorf("slot %q: %w", s.cfg.Slot, ErrSlotDropped))
	}
	if s.deps.Guard != nil {
		in := GuardInput{Server: server, Slot: s.cfg.Slot, Info: info, Exists: true,
			History: func(ctx context.Context) ([]TimelineSwitch, error) {
				return TimelineHistory(ctx, rconn, server.Timeline)
			}}
		if err := s.deps.Guard.Holding(setupCtx, in, info); err != nil {
			return false, err
		}
	}
	if err := s.initialReplay(ctx, rconn, server, info); err != nil {
		return false, err
	}
	conn.Close(context.Background())
	cancelSetup()
	s.stats.slotFailover.Store(info.Failover)
	if s.stats.State() == StateWaiting {
		s.log.Info("promoted: the server is a primary now", "slot", s.cfg.Slot)
	}
	if s.stats.State() == StateStandby {
		s.log.Info("takeover: this instance now holds the slot", "slot", s.cfg.Slot)
	}
	s.stats.state.Store(int32(StateStreaming))
	s.stats.confirmed.Store(uint64(info.Confirmed))
	s.log.Info("streaming", "slot", s.cfg.Slot, "publication", s.cfg.Publication, "from_lsn", info.Confirmed.String())
	started := time.Now()

	tr := NewTracker(info.Confirmed, s.cfg.MaxInFlightEvents, s.cfg.MaxInFlightBytes)
	if s.cfg.ExactlyOnce {
		tr.RequireCommit()
	}
	if s.deps.Guard != nil {
		tr.RequireCheckpoint()
	}
	s.stats.tracker.Store(tr)
	defer tr.Retire() // last: after the drain and the final checkpoint
	defer func() { progressed = tr.Confirmed() > info.Confirmed || time.Since(started) >= progressAfter }()
	sessCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sess, err := s.found.NewSession(sessCtx, tr)
	if err != nil {
		return false, fmt.Errorf("%w: %w", errSession, err)
	}
	defer sess.Close()

	r := reader{s: s, conn: rconn, tr: tr, sess: sess, dec: decoder.NewDecoder(decoder.Config{Tables: s.cfg.Tables, Extra: s.found.ExtraColumns, MessagePrefix: s.found.MessagePrefix, OtherTables: true}), readTimeout: readTimeout}
	r.bounded, _ = sess.(Bounded)
	if sk, ok := sess.(Skipping); ok {
		if r.skipBelow = sk.SkipBelow(); r.skipBelow > info.Confirmed {
			s.log.Info("exactly-once: transactions up to the checkpoint are in Kafka already and are skipped", "slot_confirmed_lsn", info.Confirmed.String(), "checkpoint_lsn", r.skipBelow.String())
		}
	}
	// Wake a blocked read when shutdown starts, and when Kafka's
	// acknowledgements moved the confirmed LSN, so that it is reported
	// within minStatusGap instead of at the next status tick.
	stopWake := context.AfterFunc(ctx, func() { rconn.Conn().SetReadDeadline(time.Now()) })
	wakeCtx, stopWaker := context.WithCancel(context.Background())
	wakerDone := make(chan struct{})
	go func() {
		defer close(wakerDone)
		wakeOnProgress(wakeCtx, tr, rconn)
	}()
	err = r.loop(ctx)
	stopWaker()
	<-wakerDone
	stopWake()
	if ctx.Err() != nil || IsFatal(err) {
		r.drain()
		if st, ok := sess.(Stopping); ok {
			st.Stopping()
		}
	} else if err != nil && !errors.Is(err, errSession) {
		// The replication connection failed (not the session).
		if sl, ok := sess.(SlotLosing); ok {
			sl.SlotLost()
		}
	}
	return false, err
}

// tableNames lists the outbox tables' names.
func (s *Stream) tableNames() []string {
	names := make([]string, len(s.cfg.Tables))
	for i, t := range s.cfg.Tables {
		names[i] = t.Name
	}
	return names
}

// MessagesMinMajor is the first PostgreSQL major whose pgoutput sends
// logical decoding messages.
const MessagesMinMajor = 14
