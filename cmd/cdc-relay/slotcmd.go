package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/cdc-relay/cdc-relay/checkpoint"
	"github.com/cdc-relay/cdc-relay/internal/config"
	relaypkg "github.com/cdc-relay/cdc-relay/relay"
	slotpkg "github.com/cdc-relay/cdc-relay/slot"
)

const slotUsage = `Usage: cdc-relay slot recreate --accept-gap [--reason TEXT] [flags]

Verbs:
  recreate   after the slot was lost: create it again and record the accepted
             gap in the checkpoint topic, or under --rabbitmq-url the
             checkpoint streams (cdc-relay slot recreate --help)
`

// slotCommand is `cdc-relay slot`: its one verb, recreate.
func slotCommand(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help" || args[0] == "help") {
		fmt.Fprint(stdout, slotUsage)
		return exitOK
	}
	if len(args) == 0 || args[0] != "recreate" {
		fmt.Fprint(stderr, "cdc-relay slot: want a verb: recreate\n\n"+slotUsage)
		return exitConfig
	}
	cfg, v, code, ok := commandConfig(config.SlotRecreate, args[1:], getenv, stdout, stderr)
	if !ok {
		return code
	}
	if !config.FlagAcceptGap.From(v) {
		broker := "Kafka"
		if cfg.RabbitMQ() {
			broker = "RabbitMQ"
		}
		fmt.Fprintln(stderr, "cdc-relay slot recreate: --accept-gap is required: a new slot starts now, so events committed after the relay's last checkpoint "+
			"are never read from it and may be missing from "+broker+"; add --accept-gap to accept that (and --reason TEXT to record why), then publish them again with cdc-relay replay --since TIME")
		return exitConfig
	}
	reason, _ := config.FlagReason.From(v)
	sec, err := relaypkg.CheckedKafkaSecurity(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "cdc-relay: --kafka-tls: %v\n", err)
		return exitConfig
	}
	log := relaypkg.NewLogger(cfg, stderr)
	ctx, stop := signalContext(log)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	guard := relaypkg.NewGuard(cfg, sec.Opts, log, false)
	defer guard.Close()
	if err := slotpkg.Recreate(ctx, cfg, guard, reason, stdout, log); err != nil {
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
