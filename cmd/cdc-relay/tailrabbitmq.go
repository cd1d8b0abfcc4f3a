package main

import (
	"strconv"
	"strings"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/config"
	recordpkg "github.com/cdc-relay/cdc-relay/record"
	"github.com/cdc-relay/cdc-relay/tail"
)

// newRabbitTail checks the settings of `cdc-relay tail --rabbitmq-url`: it
// follows --rabbitmq-exchange with --pattern, or reads the one STREAM
// argument. c holds the broker toolBroker resolved.
func newRabbitTail(c *Config, v *config.Values, now time.Time) (*tail.RabbitMQConfig, error) {
	c.SchemaRegistryURL = config.SchemaRegistryURL.From(v)
	c.RegistryCAFile = config.SchemaRegistryCAFile.From(v)
	exchange := config.RabbitMQExchange.From(v)
	rt := &tail.RabbitMQConfig{URL: c.RabbitMQURL, TLS: c.RabbitMQTLSConfig(), Pretty: config.FlagPretty.From(v), KeyFormat: recordpkg.KeyString,
		// The exchange stands for the topic in the subjects' names (run's
		// Avro under RabbitMQ); a message of the default exchange (a dead
		// letter) was published to --rabbitmq-exchange first.
		Subject: func(ex, _ string) string {
			if ex == "" {
				return exchange
			}
			return ex
		}}
	switch args := v.Args(); len(args) {
	case 0:
		rt.Exchange = exchange
	case 1:
		rt.Stream = strings.TrimSpace(args[0])
		if rt.Stream == "" {
			return nil, cfgErr("stream", "the STREAM argument is empty")
		}
	default:
		return nil, cfgErr("stream", "tail reads one stream with RabbitMQ, and %d were given: run one tail per stream", len(args))
	}
	if p, given := config.FlagPattern.From(v); given {
		if rt.Pattern = strings.TrimSpace(p); rt.Pattern == "" {
			return nil, cfgErr("pattern", "is empty: use # for every routing key, or e.g. order.*")
		}
		if rt.Stream != "" {
			return nil, cfgErr("pattern", "binds tail's queue to the exchange, and a STREAM argument reads a stream: give one of them")
		}
	}
	w, err := newTailWindow(v, now, func(s string) (err error) {
		if rt.Offset, err = strconv.ParseInt(strings.TrimSpace(s), 10, 64); err != nil || rt.Offset < 0 {
			return cfgErr("offset", "%q is not an offset in the stream: with RabbitMQ give one whole number, e.g. 42", s)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	rt.Start, rt.Since, rt.Count, rt.Follow = w.start, w.since, w.count, w.follow
	return rt, nil
}
