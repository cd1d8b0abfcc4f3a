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
	rf := replaypkg.Flags{DryRun: v.ActionBool("dry-run")}
	for name, dst := range map[string]*string{"since": &rf.Since, "until": &rf.Until, "from-id": &rf.FromID, "to-id": &rf.ToID} {
		if val, given := v.Action(name); given {
			if *dst = strings.TrimSpace(val); *dst == "" {
				return rf, cfgErr(name, "is empty")
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
