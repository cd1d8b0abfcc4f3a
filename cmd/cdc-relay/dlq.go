package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/signal"
	"strings"
	"syscall"
	"time"

	dlqpkg "github.com/cdc-relay/cdc-relay/dlq"
	"github.com/cdc-relay/cdc-relay/internal/config"
	relaypkg "github.com/cdc-relay/cdc-relay/relay"
	"github.com/cdc-relay/cdc-relay/router"
)

const dlqUsage = `Usage: cdc-relay dlq stats [flags]
       cdc-relay dlq redrive [--dry-run] [--id ID] [--event-type T] [--kind K] [--since TIME] [--follow] [flags]
       cdc-relay dlq retire --reason TEXT [--dry-run] [--id ID] [--event-type T] [--kind K] [--since TIME] [flags]

Verbs:
  stats     count the dead letters in --dlq-topic (with RabbitMQ, the stream
            --rabbitmq-dlq-stream) by error kind, event type and age
            (cdc-relay dlq stats --help)
  redrive   send the dead letters on through today's row → record step, in the
            consumer group --group (with RabbitMQ, positions kept in the
            stream <dlq stream>.positions) (cdc-relay dlq redrive --help)
  retire    mark pending dead letters handled, with a reason kept in Kafka
            (--dlq-retired-topic) or in RabbitMQ (<dlq stream>.positions),
            when the only fix is to write the event again
            (cdc-relay dlq retire --help)
`

// dlqCommand is `cdc-relay dlq`: stats, redrive and retire.
func dlqCommand(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help" || args[0] == "help") {
		fmt.Fprint(stdout, dlqUsage)
		return exitOK
	}
	if len(args) > 0 {
		switch args[0] {
		case "stats":
			return dlqStats(args[1:], getenv, stdout, stderr)
		case "redrive":
			return dlqRedrive(args[1:], getenv, stdout, stderr)
		case "retire":
			return dlqRetire(args[1:], getenv, stdout, stderr)
		}
	}
	fmt.Fprint(stderr, "cdc-relay dlq: want a verb: stats or redrive, or retire\n\n"+dlqUsage)
	return exitConfig
}

// dlqKafkaConfig resolves the settings of a command that only reads the
// dead-letter topic (config.DLQStats): brokers, topic, TLS, SASL, logs.
func dlqKafkaConfig(v *config.Values) (*Config, error) {
	c := &Config{KafkaBrokers: config.KafkaBrokers.Items(v), DLQTopic: config.DLQTopic.From(v), LogFormat: config.LogFormat.From(v), LogLevel: config.LogLevel.From(v)}
	if err := relaypkg.ToolBroker(c, v); err != nil {
		return nil, err
	}
	if c.RabbitMQ() {
		c.RabbitMQDLQStream = config.RabbitMQDLQStream.From(v)
		return c, dlqRabbitOnly(v)
	}
	if err := router.ValidTopic(c.DLQTopic); err != nil {
		return nil, cfgErr("dlq-topic", "%v", err)
	}
	if err := kafkaSecurity(c, v); err != nil {
		return nil, err
	}
	return c, nil
}

// dlqRabbitOnly refuses the dlq settings that only Kafka has: with
// RabbitMQ the positions are kept in the stream <dlq stream>.positions.
func dlqRabbitOnly(v *config.Values) error {
	return relaypkg.Explicit(v, config.Names(config.Group, config.DLQRetiredTopic), "is a Kafka setting of the dlq tools, and --rabbitmq-url names RabbitMQ: "+
		"with RabbitMQ no consumer group reads the dead-letter stream, and what was redriven or retired is kept in the stream <--rabbitmq-dlq-stream>.positions; remove it")
}

// dlqRabbitConfig is the dead-letter stream of cfg for the dlq tools.
func dlqRabbitConfig(cfg *Config) dlqpkg.RabbitMQConfig {
	return dlqpkg.RabbitMQConfig{URL: cfg.RabbitMQURL, TLS: cfg.RabbitMQTLSConfig(), Stream: cfg.RabbitMQDLQStream, Exchange: cfg.RabbitMQExchange}
}

// dlqKafkaCommand loads the settings of a dlq verb that needs only Kafka
// (stats, retire); ok is false when the command is to exit with code.
func dlqKafkaCommand(cmd *config.Command, args []string, getenv func(string) string, stdout, stderr io.Writer) (v *config.Values, cfg *Config, code int, ok bool) {
	v, code, ok = loadValues(cmd, args, getenv, stdout, stderr)
	if !ok {
		return nil, nil, code, false
	}
	cfg, err := dlqKafkaConfig(v)
	if err != nil {
		fmt.Fprintf(stderr, "cdc-relay: %s\n", Redact(err.Error()))
		return nil, nil, exitConfig, false
	}
	return v, cfg, 0, true
}

// dlqContext is the context of a dlq verb that reads Kafka: it ends on
// SIGTERM or SIGINT, or after 10 minutes.
func dlqContext(cfg *Config, stderr io.Writer) (context.Context, context.CancelFunc) {
	ctx, stop := signalContext(relaypkg.NewLogger(cfg, stderr))
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	return ctx, func() { cancel(); stop() }
}

// dlqStats is `cdc-relay dlq stats`.
func dlqStats(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	v, cfg, code, ok := dlqKafkaCommand(config.DLQStats, args, getenv, stdout, stderr)
	if !ok {
		return code
	}
	group := config.Group.From(v)
	ctx, cancel := dlqContext(cfg, stderr)
	defer cancel()
	var counts *dlqpkg.Counts
	var err error
	if cfg.RabbitMQ() {
		counts, err = dlqpkg.CountRabbitMQ(ctx, dlqRabbitConfig(cfg), time.Now())
	} else {
		counts, err = dlqpkg.CountLetters(ctx, cfg, group, config.DLQRetiredTopic.From(v), time.Now())
	}
	if err != nil {
		fmt.Fprintf(stderr, "cdc-relay dlq stats: %s\n", Redact(err.Error()))
		if cfg.RabbitMQ() {
			return dlqExit(err)
		}
		return exitFailed
	}
	if config.FlagJSON.From(v) {
		enc := json.NewEncoder(stdout)
		enc.Encode(counts)
		return exitOK
	}
	dlqpkg.PrintCounts(stdout, counts)
	return exitOK
}

// dlqRetire is `cdc-relay dlq retire`.
func dlqRetire(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	v, cfg, code, ok := dlqKafkaCommand(config.DLQRetire, args, getenv, stdout, stderr)
	if !ok {
		return code
	}
	rf, err := filterActions(v, time.Now())
	if err == nil {
		reason, given := config.FlagReason.From(v)
		if reason = strings.TrimSpace(reason); !given {
			err = cfgErr("reason", "is required: say why the letters need nothing more (e.g. --reason \"replayed with cdc-relay replay, INC-123\")")
		} else if reason == "" {
			err = cfgErr("reason", "is empty")
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "cdc-relay: %v\n", err)
		return exitConfig
	}
	reason, _ := config.FlagReason.From(v)
	if cfg.RabbitMQ() {
		return dlqRetireRabbitMQ(cfg, rf, strings.TrimSpace(reason), stdout, stderr)
	}
	rt := &dlqpkg.Retirer{Config: cfg, Filters: rf, Group: config.Group.From(v), Topic: config.DLQRetiredTopic.From(v), Reason: strings.TrimSpace(reason), Stdout: stdout}
	ctx, cancel := dlqContext(cfg, stderr)
	defer cancel()
	if err := rt.Run(ctx); err != nil {
		fmt.Fprintf(stdout, "retire incomplete: retired %d, already retired %d, left out by the filters %d from %s, group %s\n", rt.Retired, rt.Already, rt.Filtered, cfg.DLQTopic, rt.Group)
		fmt.Fprintf(stderr, "cdc-relay dlq retire failed: %s\n", Redact(err.Error()))
		return exitFailed
	}
	prefix := "retire"
	if rf.DryRun {
		prefix = "dry run: would have"
	}
	fmt.Fprintf(stdout, "%s: retired %d, already retired %d, left out by the filters %d from %s, group %s, in %s\n", prefix, rt.Retired, rt.Already, rt.Filtered, cfg.DLQTopic, rt.Group, rt.Topic)
	return exitOK
}

// dlqRedrive is `cdc-relay dlq redrive`.
func dlqRedrive(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cfg, v, code, ok := commandConfig(config.DLQRedrive, args, getenv, stdout, stderr)
	if !ok {
		return code
	}
	rf, err := redriveActions(v, time.Now())
	if err != nil {
		fmt.Fprintf(stderr, "cdc-relay: %v\n", err)
		return exitConfig
	}
	if cfg.RabbitMQ() {
		if err := dlqRabbitOnly(v); err != nil {
			fmt.Fprintf(stderr, "cdc-relay: %v\n", err)
			return exitConfig
		}
		return dlqRedriveRabbitMQ(cfg, rf, stdout, stderr)
	}
	log := relaypkg.NewLogger(cfg, stderr)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return dlqpkg.Redrive(ctx, dlqpkg.RedriveOptions{Config: cfg, Filters: rf, Group: config.Group.From(v), RetiredTopic: config.DLQRetiredTopic.From(v),
		Log: log, Stdout: stdout, Stderr: stderr})
}

// redriveActions reads the action flags; a valued one given empty is an error.
func redriveActions(v *config.Values, now time.Time) (dlqpkg.Filters, error) {
	rf, err := filterActions(v, now)
	rf.Follow = config.FlagFollow.From(v)
	return rf, err
}

// filterActions reads --dry-run and the filters (--id, --event-type,
// --kind, --since) of dlq redrive and dlq retire.
func filterActions(v *config.Values, now time.Time) (dlqpkg.Filters, error) {
	rf := dlqpkg.Filters{DryRun: config.FlagDryRun.From(v)}
	for _, a := range []struct {
		flag config.TextAction
		dst  *string
		has  *bool
	}{{config.FlagID, &rf.ID, &rf.HasID}, {config.FlagEventType, &rf.EventType, &rf.HasEventType}, {config.FlagKind, &rf.Kind, &rf.HasKind}} {
		if val, given := a.flag.From(v); given {
			if *a.dst = strings.TrimSpace(val); *a.dst == "" {
				return rf, cfgErr(a.flag.Name(), "is empty")
			}
			*a.has = true
		}
	}
	if val, given := config.FlagSince.From(v); given {
		t, err := relaypkg.ParseTime("since", strings.TrimSpace(val), now)
		if err != nil {
			return rf, err
		}
		rf.Since, rf.HasSince = t, true
	}
	return rf, nil
}
