package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/config"
	recordpkg "github.com/cdc-relay/cdc-relay/record"
	relaypkg "github.com/cdc-relay/cdc-relay/relay"
	"github.com/cdc-relay/cdc-relay/router"
	"github.com/cdc-relay/cdc-relay/tail"
)

// `cdc-relay tail`: read topics the relay writes, as a consumer sees them.
// A direct consumer (no group, so nothing is committed) of exact partitions
// and offsets, resolved up front, so that without --follow it knows where
// each partition ended when it started and stops there.

// tailCommand is `cdc-relay tail`.
func tailCommand(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	v, code, ok := loadValues(config.Tail, args, getenv, stdout, stderr)
	if !ok {
		return code
	}
	var run func(ctx context.Context, log *slog.Logger) error
	rc := &Config{}
	err := relaypkg.ToolBroker(rc, v)
	switch {
	case err != nil:
	case rc.RabbitMQ():
		var rt *tail.RabbitMQConfig
		if rt, err = newRabbitTail(rc, v, time.Now()); err == nil {
			run = func(ctx context.Context, log *slog.Logger) error {
				if rt.Lookup, err = tail.RegistryLookup(rc, log); err != nil {
					return err
				}
				return tail.RunRabbitMQ(ctx, *rt, stdout, log)
			}
		}
	default:
		var o *tail.Options
		if _, given := config.FlagPattern.From(v); given {
			err = cfgErr("pattern", "binds tail's queue to a RabbitMQ exchange, and --kafka-brokers names Kafka: name the topics instead (TOPIC arguments)")
		} else if o, err = newTailOptions(v, time.Now()); err == nil {
			run = func(ctx context.Context, log *slog.Logger) error { return tail.Run(ctx, o, stdout, log) }
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "cdc-relay: %s\n", Redact(err.Error()))
		return exitConfig
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log := slog.New(slog.NewTextHandler(stderr, nil))
	if err := run(ctx, log); err != nil {
		var cerr *ConfigError
		if errors.As(err, &cerr) {
			fmt.Fprintf(stderr, "cdc-relay: %s\n", Redact(err.Error()))
			return exitConfig
		}
		fmt.Fprintf(stderr, "cdc-relay: tail failed: %s\n", Redact(err.Error()))
		return exitFailed
	}
	return exitOK
}

// newTailOptions checks tail's settings, arguments and action flags.
func newTailOptions(v *config.Values, now time.Time) (*tail.Options, error) {
	c := &Config{
		KafkaBrokers:      config.KafkaBrokers.Items(v),
		SchemaRegistryURL: config.SchemaRegistryURL.From(v),
		RegistryCAFile:    config.SchemaRegistryCAFile.From(v),
		TopicTemplate:     config.TopicTemplate.From(v),
		DLQTopic:          config.DLQTopic.From(v),
	}
	if err := kafkaSecurity(c, v); err != nil {
		return nil, err
	}
	if c.RegistryCAFile != "" {
		if _, err := os.Stat(c.RegistryCAFile); err != nil {
			return nil, cfgErr("schema-registry-ca-file", "%v", err)
		}
	}
	o := &tail.Options{Config: c, Topics: v.Args(), Pretty: config.FlagPretty.From(v)}
	var err error
	if o.KeyFormat, err = recordpkg.ParseKeyFormat(config.KeyFormat.From(v)); err != nil {
		return nil, cfgErr("key-format", "%v", err)
	}
	for _, t := range o.Topics {
		if err := router.ValidTopic(t); err != nil {
			return nil, &ConfigError{Msg: fmt.Sprintf("topic argument %q: %v", t, err)}
		}
	}
	if len(o.Topics) == 0 {
		if _, err := router.New(c.TopicTemplate); err != nil {
			return nil, &ConfigError{Msg: err.Error()}
		}
		if err := router.ValidTopic(c.DLQTopic); err != nil {
			return nil, cfgErr("dlq-topic", "%v", err)
		}
		o.Match = tail.MatchTemplate(c.TopicTemplate, c.DLQTopic)
	}
	w, err := newTailWindow(v, now, func(s string) (err error) { o.Offsets, err = tail.ParseOffsets(s); return err })
	if err != nil {
		return nil, err
	}
	o.Start, o.Since, o.Count, o.Follow = w.start, w.since, w.count, w.follow
	return o, nil
}

// tailWindow is where a tail starts (--from-beginning, --since, --offset,
// else the end) and when it stops (--count, --follow).
type tailWindow struct {
	start  tail.Start
	since  time.Time
	count  int64 // 0: no limit
	follow bool
}

// newTailWindow reads tail's action flags: at most one start, a count of
// at least 1, and --follow (the default from the end). offset parses
// --offset, which the broker's tail reads in its own way.
func newTailWindow(v *config.Values, now time.Time, offset func(string) error) (tailWindow, error) {
	var w tailWindow
	var starts []string
	var err error
	if config.FlagFromBeginning.From(v) {
		w.start = tail.FromBeginning
		starts = append(starts, "--from-beginning")
	}
	if s, given := config.FlagSince.From(v); given {
		if w.since, err = relaypkg.ParseTime("since", strings.TrimSpace(s), now); err != nil {
			return w, err
		}
		w.start = tail.FromTime
		starts = append(starts, "--since")
	}
	if s, given := config.FlagOffset.From(v); given {
		if err := offset(s); err != nil {
			return w, err
		}
		w.start = tail.FromOffsets
		starts = append(starts, "--offset")
	}
	if len(starts) > 1 {
		return w, cfgErr(strings.TrimPrefix(starts[1], "--"), "cannot be given with %s: choose where to start", starts[0])
	}
	if s, given := config.FlagCount.From(v); given {
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil || n < 1 {
			return w, cfgErr("count", "%q is not a whole number of at least 1", s)
		}
		w.count = n
	}
	// From the end there is nothing to print but what arrives: follow,
	// unless --follow false says otherwise.
	followGiven := config.FlagFollow.Given(v)
	w.follow = config.FlagFollow.From(v) || (!followGiven && w.start == tail.FromEnd)
	return w, nil
}
