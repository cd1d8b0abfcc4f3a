package main

import (
	"context"
	"fmt"
	"io"
	"os/signal"
	"strings"
	"syscall"

	"github.com/cdc-relay/cdc-relay/internal/config"
	relaypkg "github.com/cdc-relay/cdc-relay/relay"
	replaypkg "github.com/cdc-relay/cdc-relay/replay"
)

// replayActions reads the action flags; a valued one given empty is an error.
func replayActions(v *config.Values) (replaypkg.Flags, error) {
	rf := replaypkg.Flags{DryRun: config.FlagDryRun.From(v)}
	for _, a := range []struct {
		flag config.TextAction
		dst  *string
	}{{config.FlagSince, &rf.Since}, {config.FlagUntil, &rf.Until}, {config.FlagFromID, &rf.FromID}, {config.FlagToID, &rf.ToID}} {
		if val, given := a.flag.From(v); given {
			if *a.dst = strings.TrimSpace(val); *a.dst == "" {
				return rf, cfgErr(a.flag.Name(), "is empty")
			}
		}
	}
	return rf, nil
}

// replay is `cdc-relay replay`: re-publish outbox rows chosen by time or id.
func replay(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cfg, v, code, ok := commandConfig(config.Replay, args, getenv, stdout, stderr)
	if !ok {
		return code
	}
	rf, err := replayActions(v)
	if err != nil {
		fmt.Fprintf(stderr, "cdc-relay: %v\n", err)
		return exitConfig
	}
	// With several tables configured, replay reads each of them, in
	// --table order, with the same window.
	if len(cfg.Tables) == 0 {
		fmt.Fprintln(stderr, "cdc-relay: --table: is empty (a table-less outbox of logical messages): such events are kept in no table, so there is nothing to read back; replay needs an outbox table (--table schema.table)")
		return exitConfig
	}
	log := relaypkg.NewLogger(cfg, stderr)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return replaypkg.Run(ctx, cfg, rf, log, stdout, stderr)
}
