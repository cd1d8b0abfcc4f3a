package slot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/checkpoint"
	"github.com/cdc-relay/cdc-relay/relay"
	"github.com/cdc-relay/cdc-relay/replication"
)

// activeGrace is how long slot recreate waits for an active slot's holder
// to go before it says the slot is in use.
const activeGrace = 10 * time.Second

// Recreate creates the slot (dropping an invalidated one), or keeps a
// usable one after a timeline fork, and records the gap.
func Recreate(ctx context.Context, cfg *relay.Config, guard *checkpoint.Guard, reason string, stdout io.Writer, log *slog.Logger) error {
	rconn, err := replication.ConnectReplication(ctx, cfg.PGURL)
	if err != nil {
		return err
	}
	defer rconn.Close(context.Background())
	server, err := replication.Identify(ctx, rconn)
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, cfg.PGURL)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.Background())
	if rec, err := replication.InRecovery(ctx, conn); err != nil {
		return err
	} else if rec {
		return errors.New("the server is a standby (in recovery): run slot recreate against the primary")
	}
	major, ver, err := replication.ServerVersion(ctx, conn)
	if err != nil {
		return err
	}
	failover, err := cfg.SlotFailover.Enabled(major, ver)
	if err != nil {
		return &relay.ConfigError{Msg: err.Error()}
	}
	if err := guard.Load(ctx, server); err != nil {
		return err
	}
	info, exists, err := replication.LookupSlot(ctx, conn, cfg.Slot)
	// A relay that has just exited leaves its walsender behind for a moment
	// (longer on a busy server): give it up to activeGrace to end.
	for deadline := time.Now().Add(activeGrace); err == nil && exists && info.ActivePID != 0 && time.Now().Before(deadline); {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		info, exists, err = replication.LookupSlot(ctx, conn, cfg.Slot)
	}
	if err != nil {
		return err
	}
	if exists && info.ActivePID != 0 {
		return fmt.Errorf("slot %s is in use by pid %d: stop the relay first", cfg.Slot, info.ActivePID)
	}
	if exists && !info.Invalidated() {
		// A usable slot: only a timeline fork needs consent, and the slot stays.
		in := replication.GuardInput{Server: server, Slot: cfg.Slot, Info: info, Exists: true, First: true,
			History: func(ctx context.Context) ([]replication.TimelineSwitch, error) {
				return replication.TimelineHistory(ctx, rconn, server.Timeline)
			}}
		_, _, derr := guard.Decide(ctx, in)
		if derr == nil {
			// The slot was read before the checkpoint, which only grows.
			derr = guard.Ahead(ctx, in)
		}
		var gapErr *checkpoint.GapError
		if !errors.As(derr, &gapErr) || gapErr.Fork == nil && gapErr.Ahead == 0 {
			if derr != nil {
				return derr
			}
			return &relay.ConfigError{Msg: fmt.Sprintf("slot %s exists and is usable (confirmed %s, wal_status %s): there is no gap to accept; start the relay with cdc-relay run", cfg.Slot, info.Confirmed, info.WALStatus)}
		}
		last := guard.Last()
		gap, err := guard.Accept(ctx, server, info.Confirmed, info.Confirmed, "slot recreate", reason)
		if err != nil {
			return err
		}
		if gapErr.Fork != nil {
			fmt.Fprintf(stdout, "kept slot %s (confirmed %s on timeline %d): the server's timeline forked off timeline %d at %s, before the checkpoint at %s\n",
				cfg.Slot, info.Confirmed, server.Timeline, gapErr.Fork.TLI, gapErr.Fork.Switch, gapErr.Checkpoint.LSN)
			printGap(stdout, cfg, gap)
			return nil
		}
		// Dropping a slot that is ahead would widen the gap: keep it.
		fmt.Fprintf(stdout, "kept slot %s (confirmed %s): it is ahead of the checkpoint at %s, so it was made or moved outside the relay; dropping it would widen the gap\n",
			cfg.Slot, info.Confirmed, gapErr.Checkpoint.LSN)
		printGap(stdout, cfg, gap)
		printNext(stdout, last)
		return nil
	}
	last := guard.Last()
	from := info.Confirmed
	if exists {
		if _, err := conn.Exec(ctx, `SELECT pg_catalog.pg_drop_replication_slot($1)`, cfg.Slot); err != nil {
			return fmt.Errorf("drop invalidated slot %s: %w", cfg.Slot, err)
		}
		fmt.Fprintf(stdout, "dropped invalidated slot %s (confirmed %s)\n", cfg.Slot, info.Confirmed)
	}
	if _, err := replication.EnsurePublication(ctx, conn, cfg.Publication, relay.TableNames(cfg.Tables), replication.PublicationOptions{AllowExtraTables: cfg.AllowExtraTables, Logger: log}); err != nil {
		return err
	}
	created, _, err := replication.EnsureSlot(ctx, conn, cfg.Slot, true, failover)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "created slot %s at %s (pgoutput, failover %t)\n", cfg.Slot, created.Confirmed, failover)
	if last == nil && from == 0 {
		from = created.Confirmed
	}
	gap, err := guard.Accept(ctx, server, from, created.Confirmed, "slot recreate", reason)
	if err != nil {
		return err
	}
	printGap(stdout, cfg, gap)
	printNext(stdout, last)
	return nil
}

// printNext says what to do after a gap was accepted: start the relay and
// replay from the last checkpoint's commit time (less the margin).
func printNext(w io.Writer, last *checkpoint.Record) {
	since := "TIME"
	if last != nil {
		since = checkpoint.ReplaySince(last).Format(time.RFC3339)
	}
	fmt.Fprintf(w, "next: start the relay (cdc-relay run, same settings), and publish the events of the gap: cdc-relay replay --since %s (same settings)\n", since)
}

func printGap(w io.Writer, cfg *relay.Config, gap *checkpoint.Record) {
	from := gap.Gap.FromLSN
	if gap.Gap.FromCommitTime != nil {
		from += " (last commit at " + gap.Gap.FromCommitTime.UTC().Format(time.RFC3339Nano) + ")"
	}
	where := cfg.CheckpointTopic
	if cfg.RabbitMQ() {
		where = "stream " + cfg.RabbitMQCheckpointStream + ".gaps"
	}
	fmt.Fprintf(w, "gap recorded in %s under key %s: from %s to %s, accepted by %s at %s, reason %q\n",
		where, gap.Key(), from, gap.Gap.ToLSN, gap.Gap.AcceptedBy, gap.Gap.AcceptedAt.Format(time.RFC3339), gap.Gap.Reason)
}
