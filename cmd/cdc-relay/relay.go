package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/cdc-relay/cdc-relay/internal/config"
	"github.com/cdc-relay/cdc-relay/internal/procs"
	relaypkg "github.com/cdc-relay/cdc-relay/relay"
	replaypkg "github.com/cdc-relay/cdc-relay/replay"
	"github.com/cdc-relay/cdc-relay/replication"
)

// runRelay is `cdc-relay run`: configure, build, stream, shut down.
func runRelay(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cfg, _, code, ok := commandConfig(config.Run, args, getenv, stdout, stderr)
	if !ok {
		return code
	}
	log := relaypkg.NewLogger(cfg, stderr)
	setMemoryLimit(cfg, getenv, log)

	ctx, stop := signalContext(log)
	defer stop()
	if getenv("GOMAXPROCS") == "" {
		go procs.Run(ctx, procs.Default, log)
	}
	err := relaypkg.Run(ctx, cfg, relaypkg.Options{Logger: log, Getenv: getenv, InitialReplay: replaypkg.Initial,
		Halted: func(err error) { fmt.Fprintf(stderr, "cdc-relay: halted: %s\n", Redact(err.Error())) }})
	return runExit(err, stderr, log)
}

// runExit is the exit code of run's error, which it reports on stderr
// unless Run did (a halt) or the stream logged it (an unrecoverable error).
func runExit(err error, stderr io.Writer, log *slog.Logger) int {
	var start *relaypkg.StartError
	var unrecoverable *replication.UnrecoverableError
	var halt *relaypkg.HaltError
	if err == nil {
		return exitOK
	}
	if errors.As(err, &start) {
		fmt.Fprintf(stderr, "cdc-relay: %v\n", err)
		if start.Refused {
			log.Error("refusing to start: incompatible schema", "err", start.Err.Error())
		}
		return exitConfig
	}
	if text, ok := relaypkg.ConfigExit(err); ok {
		fmt.Fprintf(stderr, "cdc-relay: %s\n", text)
		return exitConfig
	}
	if errors.As(err, &unrecoverable) {
		// The stream logged the cause and the fix. Exit at once, no
		// --halt-linger: a supervisor's restarts show the crash loop.
		return exitFailed
	}
	if errors.As(err, &halt) {
		if relaypkg.IsGap(err) {
			return exitGap
		}
		return exitFailed
	}
	fmt.Fprintf(stderr, "cdc-relay: %v\n", err)
	return exitFailed
}

// setMemoryLimit gives the Go runtime a soft memory limit that follows the
// in-flight bound, unless GOMEMLIMIT sets one: the heap is mostly the events
// in flight (at most --max-in-flight-bytes), and without a limit the
// collector lets it grow to twice its live size while draining large
// events. It then collects more often instead.
func setMemoryLimit(cfg *Config, getenv func(string) string, log *slog.Logger) {
	if getenv("GOMEMLIMIT") != "" {
		return
	}
	limit := cfg.MaxInFlightBytes + cfg.MaxInFlightBytes/4 + memoryOverhead
	debug.SetMemoryLimit(limit)
	log.Debug("memory limit", "bytes", limit)
}

// memoryOverhead is what the relay needs besides the events in flight:
// produce requests being encoded, read buffers, the runtime.
const memoryOverhead = 48 << 20

// signalContext is cancelled by the first SIGTERM or SIGINT; a second one
// exits at once.
func signalContext(log *slog.Logger) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		sig := <-ch
		log.Info("shutdown requested: draining", "signal", sig.String())
		cancel()
		sig = <-ch
		log.Warn("second signal: exiting at once", "signal", sig.String())
		os.Exit(exitFailed)
	}()
	return ctx, func() { signal.Stop(ch); cancel() }
}
