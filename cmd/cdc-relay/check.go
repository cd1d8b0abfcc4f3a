package main

import (
	"context"
	"io"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/config"
	"github.com/cdc-relay/cdc-relay/preflight"
)

// check is `cdc-relay check`: a preflight with the same flags as run. It
// reads only catalogs, never the outbox table, and changes nothing.
func check(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cfg, _, code, ok := commandConfig(config.Check, args, getenv, stdout, stderr)
	if !ok {
		return code
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if preflight.Run(ctx, cfg, stdout) > 0 {
		return exitFailed
	}
	return exitOK
}
