package main

// The Debezium Server side of the RabbitMQ drain (--broker rabbitmq
// --debezium-server, make bench-debezium BROKER=rabbitmq): Debezium
// Server's rabbitmq sink with the Debezium PostgreSQL connector and its
// Outbox Event Router drains a slot of its own of the same backlog into the
// same exchange and queue, and the bench's consumer counts its messages as
// it counts the relay's. The distribution and the Java 21+ that runs it
// come from scripts/debezium-server.sh.

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/cdc-relay/cdc-relay/internal/freeport"
)

const (
	// debeziumServerVersion is the release scripts/debezium-server.sh
	// unpacks (a test checks the two agree).
	debeziumServerVersion = "3.6.0.Final"
	// debeziumServerMain is the class its run.sh starts.
	debeziumServerMain = "io.debezium.server.Main"
	// debeziumServerIDHeader is the header the Outbox Event Router gives
	// the event id (table.field.event.id): the sink sets no message_id.
	debeziumServerIDHeader = "id"
)

// debeziumServerDist is an unpacked Debezium Server and the java to run it.
type debeziumServerDist struct {
	Home string // the debezium-server directory: the runner jar, lib/, config/
	Java string // a java of release 21 or later
}

// findDebeziumServer returns the distribution in dir (--debezium-server-dir),
// or by default where scripts/debezium-server.sh unpacks it, and the java
// to run it: CDC_RELAY_JAVA21, else the one the script found and wrote
// next to the distribution.
func findDebeziumServer(dir string) (debeziumServerDist, error) {
	var d debeziumServerDist
	fix := "run bash scripts/debezium-server.sh (make bench-debezium BROKER=rabbitmq does)"
	top := dir
	if top == "" {
		cache := os.Getenv("CDC_RELAY_CACHE")
		if cache == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return d, fmt.Errorf("--debezium-server: find the cache dir (set CDC_RELAY_CACHE): %w", err)
			}
			cache = filepath.Join(home, ".cache", "cdc-relay")
		}
		top = filepath.Join(cache, "debezium-server-"+debeziumServerVersion)
		if _, err := os.Stat(filepath.Join(top, ".complete")); err != nil {
			return d, fmt.Errorf("--debezium-server: Debezium Server %s is not unpacked in %s: %s", debeziumServerVersion, top, fix)
		}
	}
	d.Home = filepath.Join(top, "debezium-server")
	if _, err := os.Stat(filepath.Join(d.Home, runnerJar)); err != nil {
		return d, fmt.Errorf("--debezium-server: no %s in %s: %s", runnerJar, d.Home, fix)
	}
	d.Java = os.Getenv("CDC_RELAY_JAVA21")
	if d.Java == "" {
		b, err := os.ReadFile(filepath.Join(top, "java"))
		if err != nil {
			return d, fmt.Errorf("--debezium-server: which java runs it (Java 21+): %w: %s, or set CDC_RELAY_JAVA21", err, fix)
		}
		d.Java = strings.TrimSpace(string(b))
	}
	return d, nil
}

// runnerJar is the distribution's Quarkus runner.
const runnerJar = "debezium-server-dist-" + debeziumServerVersion + "-runner.jar"

// debeziumServerArgs are java's arguments: jvm, then the classpath run.sh
// builds (runner jar, config/lib, lib/*) and the main class.
func (d debeziumServerDist) args(jvm []string) []string {
	cp := strings.Join([]string{filepath.Join(d.Home, runnerJar), filepath.Join(d.Home, "config", "lib"), filepath.Join(d.Home, "lib", "*")}, ":")
	return append(append([]string{}, jvm...), "-cp", cp, debeziumServerMain)
}

// debeziumServerTunables are the batching and polling settings of the
// benchmark's Debezium Server, before --debezium-connector-opts. The sink
// publishes a batch, then waits for every confirm of it. Debezium's
// default batches (2048, from a queue of 8192) are kept: batches of 4096
// and 8192 (queues of 16384 and 32768) drained no faster here, Debezium
// Server being short of CPU, and took twice the memory. The poll interval
// is 10 ms instead of 500, as the Kafka comparison tuned the connector, so
// that the last, partial batch does not wait; offsets are flushed every
// second, as there.
var debeziumServerTunables = [][2]string{
	{"debezium.source.max.batch.size", "2048"},
	{"debezium.source.max.queue.size", "8192"},
	{"debezium.source.poll.interval.ms", "10"},
	{"debezium.source.offset.flush.interval.ms", strconv.FormatInt(debeziumFlushInterval.Milliseconds(), 10)},
}

// debeziumServerSink are the rabbitmq sink's settings besides the
// connection: the bench's exchange, the routing key taken from the
// EventRouter's topic (outbox.event.<event_type>: the queue is bound with
// "#"), persistent messages and the default confirm timeout.
var debeziumServerSink = [][2]string{
	{"debezium.sink.type", "rabbitmq"},
	{"debezium.sink.rabbitmq.exchange", rabbitExchange},
	{"debezium.sink.rabbitmq.routingKey.source", "topic"},
	{"debezium.sink.rabbitmq.deliveryMode", "2"},
	{"debezium.sink.rabbitmq.ackTimeout", "30000"},
}

// debeziumServerProperties is the benchmark's application.properties for
// Debezium Server on slot: the connector of the Kafka comparison
// (connector in debezium.go: pgoutput, no snapshot, the EventRouter told
// the outbox columns) routed by event_type, JSON keys, values and headers
// without schemas, the sink above to amqpURL, offsets in offsets, Quarkus
// on httpPort, and extra (--debezium-connector-opts) replacing properties
// of the same key or added at the end.
func debeziumServerProperties(slot string, pgPort int, db, amqpURL, offsets string, httpPort int, extra [][2]string) ([][2]string, error) {
	u, err := url.Parse(amqpURL)
	if err != nil || u.Port() == "" {
		return nil, fmt.Errorf("debezium server: AMQP URL %q has no port", amqpURL)
	}
	vhost := strings.TrimPrefix(u.Path, "/")
	if vhost == "" {
		vhost = "/"
	}
	pass, _ := u.User.Password()
	props := append([][2]string{}, debeziumServerSink...)
	props = append(props, [][2]string{
		{"debezium.sink.rabbitmq.connection.host", u.Hostname()},
		{"debezium.sink.rabbitmq.connection.port", u.Port()},
		{"debezium.sink.rabbitmq.connection.username", u.User.Username()},
		{"debezium.sink.rabbitmq.connection.password", pass},
		{"debezium.sink.rabbitmq.connection.virtual.host", vhost},
	}...)
	src := connector(slot, pgPort, db, [][2]string{{"transforms.outbox.route.by.field", "event_type"}})
	c, err := src.Properties()
	if err != nil {
		return nil, err
	}
	for _, kv := range c {
		switch k := kv[0]; {
		case k == "name" || k == "tasks.max":
		case k == "transforms" || strings.HasPrefix(k, "transforms."):
			props = append(props, [2]string{"debezium." + k, kv[1]})
		default:
			props = append(props, [2]string{"debezium.source." + k, kv[1]})
		}
	}
	props = append(props, [][2]string{
		{"debezium.source.offset.storage.file.filename", offsets},
		{"debezium.format.key", "json"},
		{"debezium.format.key.schemas.enable", "false"},
		{"debezium.format.value", "json"},
		{"debezium.format.value.schemas.enable", "false"},
		{"debezium.format.header", "json"},
		{"debezium.format.header.schemas.enable", "false"},
		{"quarkus.http.port", strconv.Itoa(httpPort)},
		{"quarkus.log.console.json", "false"},
	}...)
	props = append(props, debeziumServerTunables...)
	return mergeProps(props, extra), nil
}

// mergeProps replaces the properties of props that extra names and
// appends the rest of extra.
func mergeProps(props, extra [][2]string) [][2]string {
	for _, kv := range extra {
		if i := slices.IndexFunc(props, func(p [2]string) bool { return p[0] == kv[0] }); i >= 0 {
			props[i][1] = kv[1]
		} else {
			props = append(props, kv)
		}
	}
	return props
}

// debeziumServerSettings lists the properties worth reporting: all but the
// connection, database, offsets file and HTTP port.
func debeziumServerSettings(props [][2]string) []string {
	var s []string
	for _, kv := range props {
		k := kv[0]
		if strings.HasPrefix(k, "debezium.sink.rabbitmq.connection.") || strings.HasPrefix(k, "debezium.source.database.") ||
			k == "debezium.source.offset.storage.file.filename" || k == "quarkus.http.port" || k == "quarkus.log.console.json" {
			continue
		}
		s = append(s, k+"="+kv[1])
	}
	return s
}

// writeProperties writes props as a Java properties file. No value here
// holds a character the format would need escaped, except backslashes.
func writeProperties(path string, props [][2]string) error {
	var b strings.Builder
	for _, kv := range props {
		b.WriteString(kv[0] + "=" + strings.ReplaceAll(kv[1], `\`, `\\`) + "\n")
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}

// headerID returns the outbox id a Debezium Server message carries in its
// id header: the header converter's JSON of the column (a number here, or
// a quoted string for a uuid id), as bytes or as a string.
func headerID(d amqp.Delivery) string {
	var s string
	switch v := d.Headers[debeziumServerIDHeader].(type) {
	case []byte:
		s = string(v)
	case string:
		s = v
	default:
		return ""
	}
	return strings.Trim(strings.TrimSpace(s), `"`)
}

// drainDebeziumServer runs Debezium Server on slot, started after the
// load like the relay, and times it from process start until the bench's
// consumer has every row from the queue (d.Seconds). It also waits up to
// debeziumConfirmGrace more for the slot's confirmed_flush_lsn to reach
// the load's end (d.ConfirmedSeconds, 0 if it did not), then stops Debezium
// Server with SIGTERM and checks that no id is missing.
func drainDebeziumServer(ctx context.Context, o options, svc *services, db *database, slot string, load loadInfo) (drainResult, []string, error) {
	d := drainResult{Tool: "Debezium Server", Rows: load.Rows}
	dir, err := os.MkdirTemp("", "cdc-relay-bench-dbzserver-")
	if err != nil {
		return d, nil, err
	}
	defer os.RemoveAll(dir)
	port, err := freeport.Get()
	if err != nil {
		return d, nil, err
	}
	props, err := debeziumServerProperties(slot, svc.pg.Port(), dbName, svc.rabbit.URL(), filepath.Join(dir, "offsets.dat"), port, o.debeziumOpts)
	if err != nil {
		return d, nil, err
	}
	// Quarkus reads config/application.properties under its working
	// directory, as run.sh does from the distribution's.
	if err := os.Mkdir(filepath.Join(dir, "config"), 0o700); err != nil {
		return d, nil, err
	}
	if err := writeProperties(filepath.Join(dir, "config", "application.properties"), props); err != nil {
		return d, nil, err
	}
	col, err := startCollectorID(svc.rabbit.URL(), load.MinID, load.Rows, headerID)
	if err != nil {
		return d, nil, err
	}
	defer col.close()
	broker0, busy0 := cpuOrZero(svc.brokerPID), busySeconds()
	c, err := startChildIn(ctx, "debezium-server", dir, o.debeziumServer.Java, o.debeziumServer.args(o.debeziumJVM), nil)
	if err != nil {
		return d, nil, err
	}
	defer c.kill()
	d.ClientPID = c.pid()
	rss := sampleRSS(c.pid(), rssPoll)
	defer rss.Stop()
	atQueue := func() error { return d.noteCPU(c, svc.brokerPID, broker0, busy0) }
	if err := waitDebeziumServer(ctx, o, db, c, col, slot, load, atQueue, &d); err != nil {
		return d, nil, err
	}
	if err := d.noteEnd(c, rss, load); err != nil {
		return d, nil, err
	}
	c.signal(syscall.SIGTERM)
	if err := c.wait(ctx, connectStopWithin); err != nil && !exitedOnSignal(err) {
		return d, nil, c.failure("after SIGTERM: %v", err)
	}
	d.KafkaRecords, d.Duplicates = col.count.Load(), col.dups.Load()
	if miss, bad := col.missing(), col.bad.Load(); miss > 0 || bad > 0 {
		return d, nil, fmt.Errorf("queue %s: %d ids missing, %d messages without an id of this load", rabbitQueue, miss, bad)
	}
	return d, debeziumServerSettings(props), nil
}

// waitDebeziumServer polls the slot every 20 ms until the consumer has
// every row, then until confirmed_flush_lsn reaches the end or
// debeziumConfirmGrace passes, filling in d as waitDebezium does for
// Connect: startup (slot first seen active), the walsender's CPU, when the
// walsender had sent everything, when the queue held every row (Seconds;
// it calls atQueue then), when the LSN was confirmed and when it last
// moved. Debezium Server exits when its connector or sink fails.
func waitDebeziumServer(ctx context.Context, o options, db *database, c *child, col *collector, slot string, load loadInfo, atQueue func() error, d *drainResult) error {
	tick := time.NewTicker(slotPoll)
	defer tick.Stop()
	deadline := time.NewTimer(o.timeout)
	defer deadline.Stop()
	var queued time.Time
	for {
		select {
		case <-c.done:
			return c.failure("exited (%v) with %d of %d messages consumed (confirmed %s)", c.err, col.count.Load(), load.Rows, d.ConfirmedLSN)
		case <-col.done:
			return fmt.Errorf("the consumer stopped after %d of %d messages: %v", col.count.Load(), load.Rows, col.err)
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return c.failure("%d of %d messages consumed within %s (confirmed %s)", col.count.Load(), load.Rows, o.timeout, d.ConfirmedLSN)
		case <-tick.C:
		}
		now, err := d.sampleSlot(ctx, db, slot, c, load)
		if err != nil {
			return err
		}
		if queued.IsZero() && col.count.Load() >= int64(load.Rows) {
			queued = now
			d.Seconds = now.Sub(c.start).Seconds()
			if err := atQueue(); err != nil {
				return err
			}
			progress("debezium-server: every message consumed after %.2f s; waiting up to %s for confirmed_flush_lsn", d.Seconds, debeziumConfirmGrace)
		}
		if !queued.IsZero() && (d.ConfirmedSeconds > 0 || now.Sub(queued) >= debeziumConfirmGrace) {
			return nil
		}
	}
}

// debeziumServerFlags checks --debezium-server: only with --broker
// rabbitmq and for the drain.
func debeziumServerFlags(o options) error {
	switch {
	case !o.withDebeziumServer:
		return nil
	case o.broker != "rabbitmq":
		return errors.New("--debezium-server drains to RabbitMQ: give --broker rabbitmq (for Kafka, --debezium)")
	case o.latency:
		return errors.New("--debezium-server measures the drain only: leave out --latency")
	}
	return nil
}
