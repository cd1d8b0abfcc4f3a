package main

import (
	"io"
	"log/slog"

	"github.com/cdc-relay/cdc-relay/decoder"
	relaypkg "github.com/cdc-relay/cdc-relay/relay"
)

// The names below keep check, status and slot recreate building while their
// files wait to move out of package main (they call them by these names).

// tableNames is relaypkg.TableNames.
func tableNames(tables []decoder.Table) []string { return relaypkg.TableNames(tables) }

// newLogger is relaypkg.NewLogger.
func newLogger(cfg *Config, w io.Writer) *slog.Logger { return relaypkg.NewLogger(cfg, w) }
