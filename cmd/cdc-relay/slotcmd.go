package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/checkpoint"
	"github.com/cdc-relay/cdc-relay/replication"
)

const slotUsage = `Usage: cdc-relay slot recreate --accept-gap [--reason TEXT] [settings]

Creates the relay's slot again after it was dropped, lost in a failover or
invalidated, and records the accepted gap in the checkpoint topic: from the
last confirmed LSN and commit time to the new slot's start, with when, by
whom and why. Events committed in between were never read from the slot:
publish them again with cdc-relay replay --since TIME. Then start the relay
(cdc-relay run) as usual.

Action flags (flags only, never env or YAML):
  --accept-gap    say that events committed after the last checkpoint may be
                  missing from Kafka until replayed (required)
  --reason TEXT   why, recorded with the gap (e.g. an incident id)

Settings: every setting of cdc-relay run (cdc-relay run -h), resolved the
same way (flag > env, _FILE too > --config YAML > default); the relay must
be stopped, so that the slot is not in use.
`

// slotCommand is `cdc-relay slot`: its one verb, recreate.
func slotCommand(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprint(stdout, slotUsage)
		return exitOK
	}
	if len(args) == 0 || args[0] != "recreate" {
		fmt.Fprint(stderr, "cdc-relay slot: want a verb: recreate\n\n"+slotUsage)
		return exitConfig
	}
	rest, act, err := splitActionFlags(args[1:], map[string]bool{"accept-gap": true}, map[string]bool{"reason": true})
	if err != nil {
		fmt.Fprintf(stderr, "cdc-relay slot recreate: %v\n", err)
		return exitConfig
	}
	if act.help {
		fmt.Fprint(stdout, slotUsage)
		return exitOK
	}
	if !act.bools["accept-gap"] {
		fmt.Fprintln(stderr, "cdc-relay slot recreate: --accept-gap is required: a new slot starts now, so events committed after the relay's last checkpoint "+
			"are never read from it and may be missing from Kafka; add --accept-gap to accept that (and --reason TEXT to record why), then publish them again with cdc-relay replay --since TIME")
		return exitConfig
	}
	cfg, code, ok := commandConfig(rest, getenv, stderr)
	if !ok {
		return code
	}
	transport, err := kafkaTransport(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "cdc-relay: --kafka-tls: %v\n", err)
		return exitConfig
	}
	log := newLogger(cfg, stderr)
	ctx, stop := signalContext(log)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	guard := checkpoint.NewGuard(checkpoint.Config{Store: checkpoint.NewStore(cfg.KafkaBrokers, transport, cfg.CheckpointTopic), RelayID: cfg.RelayID,
		Slot: cfg.Slot, Publication: cfg.Publication, Tables: tableNames(cfg.Tables), Version: version, Logger: log})
	if err := recreateSlot(ctx, cfg, guard, act.strings["reason"], stdout, log); err != nil {
		var pe *checkpoint.PolicyError
		var ce *ConfigError
		fmt.Fprintf(stderr, "cdc-relay slot recreate: %s\n", Redact(err.Error()))
		if errors.As(err, &pe) || errors.As(err, &ce) {
			return exitConfig
		}
		return exitFailed
	}
	return exitOK
}

// recreateSlot creates the slot (dropping an invalidated one), or keeps a
// usable one after a timeline fork, and records the gap.
func recreateSlot(ctx context.Context, cfg *Config, guard *checkpoint.Guard, reason string, stdout io.Writer, log *slog.Logger) error {
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
		return &ConfigError{Msg: err.Error()}
	}
	if err := guard.Load(ctx, server); err != nil {
		return err
	}
	info, exists, err := replication.LookupSlot(ctx, conn, cfg.Slot)
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
		var gapErr *checkpoint.GapError
		if !errors.As(derr, &gapErr) || gapErr.Fork == nil {
			if derr != nil {
				return derr
			}
			return &ConfigError{Msg: fmt.Sprintf("slot %s exists and is usable (confirmed %s, wal_status %s): there is no gap to accept; start the relay with cdc-relay run", cfg.Slot, info.Confirmed, info.WALStatus)}
		}
		gap, err := guard.Accept(ctx, server, info.Confirmed, info.Confirmed, "slot recreate", reason)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "kept slot %s (confirmed %s on timeline %d): the server's timeline forked off timeline %d at %s, before the checkpoint at %s\n",
			cfg.Slot, info.Confirmed, server.Timeline, gapErr.Fork.TLI, gapErr.Fork.Switch, gapErr.Checkpoint.LSN)
		printGap(stdout, cfg, gap)
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
	if _, err := replication.EnsurePublication(ctx, conn, cfg.Publication, tableNames(cfg.Tables), replication.PublicationOptions{AllowExtraTables: cfg.AllowExtraTables, Logger: log}); err != nil {
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
	since := "TIME"
	if last != nil {
		since = checkpoint.ReplaySince(last).Format(time.RFC3339)
	}
	fmt.Fprintf(stdout, "next: start the relay (cdc-relay run, same settings), and publish the events of the gap: cdc-relay replay --since %s (same settings)\n", since)
	return nil
}

func printGap(w io.Writer, cfg *Config, gap *checkpoint.Record) {
	from := gap.Gap.FromLSN
	if gap.Gap.FromCommitTime != nil {
		from += " (last commit at " + gap.Gap.FromCommitTime.UTC().Format(time.RFC3339Nano) + ")"
	}
	fmt.Fprintf(w, "gap recorded in %s under key %s: from %s to %s, accepted by %s at %s, reason %q\n",
		cfg.CheckpointTopic, gap.Key(), from, gap.Gap.ToLSN, gap.Gap.AcceptedBy, gap.Gap.AcceptedAt.Format(time.RFC3339), gap.Gap.Reason)
}

// actionFlags are the flags of an action (a subcommand's own, never env or
// YAML).
type actionFlags struct {
	bools   map[string]bool
	strings map[string]string
	help    bool
}

// splitActionFlags takes the action flags (true/false ones in bools,
// valued ones in strs; one or two dashes, --flag=value or --flag value) out
// of args and returns the rest for LoadConfig.
func splitActionFlags(args []string, bools, strs map[string]bool) ([]string, actionFlags, error) {
	act := actionFlags{bools: map[string]bool{}, strings: map[string]string{}}
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "-h" || a == "--help" || a == "-help" {
			act.help = true
			continue
		}
		if !strings.HasPrefix(a, "-") {
			rest = append(rest, a)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch {
		case bools[name]:
			v := "true"
			if hasValue {
				v = value
			} else if i+1 < len(args) && (args[i+1] == "true" || args[i+1] == "false") {
				v = args[i+1]
				i++
			}
			if v != "true" && v != "false" {
				return nil, act, fmt.Errorf("--%s: %q is not true or false", name, v)
			}
			act.bools[name] = v == "true"
		case strs[name]:
			if !hasValue {
				if i+1 >= len(args) {
					return nil, act, fmt.Errorf("--%s needs a value", name)
				}
				value = args[i+1]
				i++
			}
			act.strings[name] = value
		default:
			rest = append(rest, a)
		}
	}
	return rest, act, nil
}
