package main

import (
	"errors"
	"fmt"
	"io"

	dlqpkg "github.com/cdc-relay/cdc-relay/dlq"
	relaypkg "github.com/cdc-relay/cdc-relay/relay"
)

// The dlq verbs with --rabbitmq-url: the dead letters are in the stream
// --rabbitmq-dlq-stream, read without being consumed, and what was
// redriven or retired is kept in the stream <stream>.positions.

// dlqExit is the exit code of a dlq verb that failed with err: 2 for a
// setting to fix (a stream that is missing or not a stream), else 1.
func dlqExit(err error) int {
	var cerr *ConfigError
	if errors.As(err, &cerr) {
		return exitConfig
	}
	return exitFailed
}

// dlqRetireRabbitMQ is `cdc-relay dlq retire --rabbitmq-url`.
func dlqRetireRabbitMQ(cfg *Config, rf dlqpkg.Filters, reason string, stdout, stderr io.Writer) int {
	rt := &dlqpkg.RabbitRetirer{Config: dlqRabbitConfig(cfg), Filters: rf, Reason: reason, Stdout: stdout}
	ctx, cancel := dlqContext(cfg, stderr)
	defer cancel()
	if err := rt.Run(ctx); err != nil {
		fmt.Fprintf(stdout, "retire incomplete: retired %d, already retired %d, left out by the filters %d from stream %s\n", rt.Retired, rt.Already, rt.Filtered, cfg.RabbitMQDLQStream)
		fmt.Fprintf(stderr, "cdc-relay dlq retire failed: %s\n", Redact(err.Error()))
		return dlqExit(err)
	}
	prefix := "retire"
	if rf.DryRun {
		prefix = "dry run: would have"
	}
	fmt.Fprintf(stdout, "%s: retired %d, already retired %d, left out by the filters %d from stream %s, in %s.positions\n", prefix, rt.Retired, rt.Already, rt.Filtered, cfg.RabbitMQDLQStream, cfg.RabbitMQDLQStream)
	return exitOK
}

// dlqRedriveRabbitMQ is `cdc-relay dlq redrive --rabbitmq-url`: the
// unroutable letters go to --rabbitmq-exchange again as they were, the
// others through today's row → record step as run publishes them; with
// --follow until SIGTERM or SIGINT.
func dlqRedriveRabbitMQ(cfg *Config, rf dlqpkg.Filters, stdout, stderr io.Writer) int {
	log := relaypkg.NewLogger(cfg, stderr)
	ctx, stop := signalContext(log)
	defer stop()
	_, code := dlqpkg.RedriveRabbitMQ(ctx, dlqpkg.RabbitRedriveOptions{Config: dlqRabbitConfig(cfg), Relay: cfg, Filters: rf, Log: log, Stdout: stdout, Stderr: stderr})
	return code
}
