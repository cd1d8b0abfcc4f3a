package main

// The Debezium side-by-side drain (--debezium): Kafka Connect standalone
// with the Debezium PostgreSQL connector and its Outbox Event Router drains
// a third slot of the same backlog into the same broker; latency.go runs
// the same worker in the latency scenario. The jars come from
// scripts/debezium.sh (make bench-debezium runs it).

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/debeziumtest"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	// debeziumVersion and connectVersion are the releases
	// scripts/debezium.sh installs (internal/debeziumtest checks them
	// against scripts/debezium/pom.xml).
	debeziumVersion = debeziumtest.Version
	connectVersion  = debeziumtest.ConnectVersion
	// debeziumTopic is where the EventRouter's default routing
	// (outbox.event.${routedByValue}, routed by the aggregate type) sends
	// the benchmark's rows, whose aggregate_type is Order.
	debeziumTopic = "outbox.event.Order"
	// debeziumConverter names the value converter in the report: no Avro
	// converter that talks to a Confluent-compatible registry resolves
	// from Maven Central (Confluent's is not served; Apicurio's speaks
	// only Apicurio's own registry API).
	debeziumConverter = "org.apache.kafka.connect.json.JsonConverter (schemas.enable=false)"
	// debeziumFlushInterval is offset.flush.interval.ms: how often Connect
	// commits the task's offsets, which is when Debezium confirms LSNs to
	// PostgreSQL (Connect's default is 60 s).
	debeziumFlushInterval = time.Second
	// debeziumConfirmGrace is how long the drain waits, once every record
	// is in Kafka, for the slot's confirmed_flush_lsn to reach the end.
	debeziumConfirmGrace = 5*debeziumFlushInterval + 5*time.Second
	// kafkaPoll is how often the Debezium drain lists the topic's end
	// offsets.
	kafkaPoll = 50 * time.Millisecond
	// connectorName is the connector's name in Connect.
	connectorName = "bench-debezium"
	// connectStopWithin bounds Connect's shutdown after SIGTERM.
	connectStopWithin = 60 * time.Second
)

// debeziumInfo describes the Debezium set-up in the report.
type debeziumInfo struct {
	Version          string   `json:"version"`
	ConnectVersion   string   `json:"connect_version"`
	Converter        string   `json:"converter"`
	JVMOptions       []string `json:"jvm_options"`
	OffsetFlushMs    int64    `json:"offset_flush_interval_ms"`
	Topic            string   `json:"topic"`
	ConnectorOptions []string `json:"connector_options"`
}

// newDebeziumInfo describes the set-up o asks for.
func newDebeziumInfo(o options) *debeziumInfo {
	props := connectorProperties("bench_dbz_N", 0, dbName, o.debeziumOpts)
	var opts []string
	for _, kv := range props {
		if strings.HasPrefix(kv[0], "database.") || kv[0] == "name" {
			continue
		}
		opts = append(opts, kv[0]+"="+kv[1])
	}
	return &debeziumInfo{Version: debeziumVersion, ConnectVersion: connectVersion, Converter: debeziumConverter,
		JVMOptions: o.debeziumJVM, OffsetFlushMs: debeziumFlushInterval.Milliseconds(), Topic: debeziumTopic,
		ConnectorOptions: opts}
}

// debeziumLibs returns the directory holding Connect's and Debezium's jars
// (--debezium-libs, or where scripts/debezium.sh puts them).
func debeziumLibs(flagDir string) (string, error) {
	dir, err := debeziumtest.LibsDir(flagDir)
	if err != nil {
		return "", fmt.Errorf("--debezium: %w", err)
	}
	return dir, nil
}

// connector is the Debezium connector of the benchmark: pgoutput on its
// own slot and the benchmark's publication, no snapshot, and the
// EventRouter with its default routing, told the outbox table's column
// names (docs/outbox.sql), with extra (--debezium-connector-opts) replacing
// properties of the same key or added at the end.
func connector(slot string, pgPort int, db string, extra [][2]string) debeziumtest.Connector {
	return debeziumtest.Connector{
		Name: connectorName, PGPort: pgPort, Database: db, Table: "public.outbox",
		TopicPrefix: "bench_dbz", Slot: slot, Publication: publication,
		PublicationAutocreate: "disabled", SnapshotMode: "no_data",
		// The relay's headers besides id; created_at (timestamptz) cannot be
		// the record timestamp: the EventRouter takes only integer
		// Debezium timestamps, so records carry Debezium's processing time.
		AdditionalPlacement: "event_type:header:event_type,aggregate_type:header:aggregate_type",
		Extra:               extra,
	}
}

// connectorProperties is connector's configuration (pgPort 0 and a
// missing database are allowed, for the report).
func connectorProperties(slot string, pgPort int, db string, extra [][2]string) [][2]string {
	c := connector(slot, pgPort, db, extra)
	if c.PGPort == 0 {
		c.PGPort = 1 // only the report's listing, which leaves database.* out
	}
	props, err := c.Properties()
	if err != nil {
		panic(err) // Name and Database are constants here
	}
	return props
}

// connect is a running Kafka Connect standalone worker.
type connect struct {
	*child
	setup *debeziumtest.Setup
}

// rest is the address of the worker's REST API.
func (c *connect) rest() string { return c.setup.REST }

// close kills the worker unless it has exited and removes its directory.
func (c *connect) close() {
	c.kill()
	c.setup.Remove()
}

// startConnect writes the Connect configuration for slot into a temporary
// directory and starts Kafka Connect standalone with the connector, under
// the benchmark's process accounting.
func startConnect(ctx context.Context, o options, svc *services, slot string) (*connect, error) {
	setup, err := debeziumtest.Prepare(debeziumtest.WorkerOptions{
		Libs: o.debeziumLibs, Broker: svc.broker.Addr(),
		KeyConverter: debeziumtest.JSONConverter, ValueConverter: debeziumtest.JSONConverter,
		OffsetFlushInterval: debeziumFlushInterval, JVMOptions: o.debeziumJVM,
		Connectors: []debeziumtest.Connector{connector(slot, svc.pg.Port(), dbName, o.debeziumOpts)},
	})
	if err != nil {
		return nil, fmt.Errorf("write the Connect configuration: %w", err)
	}
	c, err := startChild(ctx, "debezium", "java", setup.Args, nil)
	if err != nil {
		setup.Remove()
		return nil, err
	}
	return &connect{child: c, setup: setup}, nil
}

// drainDebezium runs Kafka Connect standalone with the Debezium connector on
// slot, started after the load like the relay, and times it from process
// start until every row is in Kafka (the sum of debeziumTopic's end offsets
// grew by the row count): d.Seconds, from which the rates follow. It also
// waits up to debeziumConfirmGrace more for the slot's confirmed_flush_lsn
// to reach the load's end (d.ConfirmedSeconds, 0 if it did not), then stops
// Connect with SIGTERM and checks that the new records carry every outbox
// id.
func drainDebezium(ctx context.Context, o options, svc *services, db *database, slot string, load loadInfo) (drainResult, error) {
	d := drainResult{Tool: "debezium", Rows: load.Rows}
	cl, err := kgo.NewClient(kgo.SeedBrokers(svc.broker.Addr()))
	if err != nil {
		return d, err
	}
	defer cl.Close()
	before, err := endOffsets(ctx, cl, debeziumTopic)
	if err != nil {
		return d, err
	}
	broker0, busy0 := cpuOrZero(svc.brokerPID), busySeconds()
	cw, err := startConnect(ctx, o, svc, slot)
	if err != nil {
		return d, err
	}
	defer cw.close()
	c := cw.child
	d.ClientPID = c.pid()
	rss := sampleRSS(c.pid(), rssPoll)
	defer rss.Stop()

	// The CPU figures are read when Kafka holds every record, like the
	// relay's when its slot is confirmed.
	atKafka := func() error { return d.noteCPU(c, svc.brokerPID, broker0, busy0) }
	if err := waitDebezium(ctx, o, db, c, cl, cw.rest(), slot, before, load, atKafka, &d); err != nil {
		return d, err
	}
	if err := d.noteEnd(c, rss, load); err != nil {
		return d, err
	}

	c.signal(syscall.SIGTERM)
	if err := c.wait(ctx, connectStopWithin); err != nil && !exitedOnSignal(err) {
		return d, c.failure("after SIGTERM: %v", err)
	}
	after, err := endOffsets(ctx, cl, debeziumTopic)
	if err != nil {
		return d, err
	}
	from := map[int32]int64{}
	for p := range after {
		from[p] = before[p]
	}
	d.KafkaRecords = sumOffsets(after, before)
	if d.KafkaRecords < int64(load.Rows) {
		return d, fmt.Errorf("topic %s holds %d new records, want at least %d", debeziumTopic, d.KafkaRecords, load.Rows)
	}
	progress("verifying that %s holds every outbox id", debeziumTopic)
	if d.Duplicates, err = verifyIDsFrom(ctx, svc.broker.Addr(), debeziumTopic, from, d.KafkaRecords, load); err != nil {
		return d, err
	}
	return d, nil
}

// waitDebezium polls the slot every 20 ms and the topic's end offsets every
// 50 ms until every row is in Kafka and then until confirmed_flush_lsn
// reaches the end or debeziumConfirmGrace passes, filling in d: the
// startup time and CPU (slot first seen active), the walsender's CPU, when
// the walsender had sent everything, when Kafka held every row (Seconds;
// it calls atKafka then), when the LSN was confirmed and when it last
// moved. Every second
// it asks Connect's REST API at rest whether the task failed (a failed
// task does not end the worker).
func waitDebezium(ctx context.Context, o options, db *database, c *child, cl *kgo.Client, rest, slot string, before map[int32]int64, load loadInfo, atKafka func() error, d *drainResult) error {
	tick := time.NewTicker(slotPoll)
	defer tick.Stop()
	deadline := time.NewTimer(o.timeout)
	defer deadline.Stop()
	var lastKafka, lastStatus, kafkaDone time.Time
	var records int64
	for {
		select {
		case <-c.done:
			return c.failure("exited (%v) with %d of %d records in Kafka (confirmed %s)", c.err, records, load.Rows, d.ConfirmedLSN)
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return c.failure("had %d of %d records in Kafka within %s (confirmed %s)", records, load.Rows, o.timeout, d.ConfirmedLSN)
		case <-tick.C:
		}
		now, err := d.sampleSlot(ctx, db, slot, c, load)
		if err != nil {
			return err
		}
		if kafkaDone.IsZero() && now.Sub(lastKafka) >= kafkaPoll {
			lastKafka = now
			ends, err := endOffsets(ctx, cl, debeziumTopic)
			if err != nil {
				return err
			}
			if records = sumOffsets(ends, before); records >= int64(load.Rows) {
				kafkaDone = time.Now()
				d.Seconds = kafkaDone.Sub(c.start).Seconds()
				if err := atKafka(); err != nil {
					return err
				}
				progress("debezium: every record in Kafka after %.2f s; waiting up to %s for confirmed_flush_lsn", d.Seconds, debeziumConfirmGrace)
			}
		}
		if !kafkaDone.IsZero() && (d.ConfirmedSeconds > 0 || now.Sub(kafkaDone) >= debeziumConfirmGrace) {
			return nil
		}
		if now.Sub(lastStatus) >= time.Second {
			lastStatus = now
			if trace := failedTask(ctx, rest); trace != "" {
				return c.failure("the connector's task failed with %d of %d records in Kafka:\n%s", records, load.Rows, trace)
			}
		}
	}
}

// noteCPU records in d the client's CPU so far, and the broker's and the
// rest of the machine's since they were broker0 and busy0.
func (d *drainResult) noteCPU(c *child, brokerPID int, broker0, busy0 float64) error {
	var err error
	if d.ClientCPUSeconds, err = cpuSeconds(c.pid()); err != nil {
		return c.failure("read CPU time: %v", err)
	}
	d.BrokerCPUSeconds = cpuOrZero(brokerPID) - broker0
	d.OtherCPUSeconds = busySeconds() - busy0 - d.ClientCPUSeconds - d.WalsenderCPUSeconds - d.BrokerCPUSeconds
	return nil
}

// noteEnd records in d how far the slot's confirmed LSN stayed short of
// the load's end and the client's peak RSS (the larger of rss's samples
// and VmHWM), stopping rss.
func (d *drainResult) noteEnd(c *child, rss *rssSampler, load loadInfo) error {
	if d.ConfirmedLSN < load.EndLSN {
		d.ConfirmLagBytes = int64(load.EndLSN - d.ConfirmedLSN)
	}
	hwm, err := statusKB(c.pid(), "VmHWM")
	if err != nil {
		return c.failure("read peak RSS: %v", err)
	}
	d.PeakRSSKB = max(rss.Stop(), hwm)
	return nil
}

// sampleSlot looks at slot once for a drain that confirms LSNs only when
// its offsets are committed (Debezium in Connect or in Debezium Server),
// noting in d the startup, the walsender's CPU, when the walsender had sent
// everything, the confirmed LSN, when it last moved and when it reached
// the load's end. It returns the time of the look.
func (d *drainResult) sampleSlot(ctx context.Context, db *database, slot string, c *child, load loadInfo) (time.Time, error) {
	st, err := db.slot(ctx, slot)
	if err != nil {
		return time.Time{}, err
	}
	now := time.Now()
	if st.confirmed != d.ConfirmedLSN && d.StartupSeconds > 0 {
		d.LastConfirmSeconds = now.Sub(c.start).Seconds()
	}
	d.ConfirmedLSN = st.confirmed
	d.sampleActive(st, c, now)
	if d.SentSeconds == 0 && st.sent >= load.EndLSN {
		d.SentSeconds = now.Sub(c.start).Seconds()
	}
	if d.ConfirmedSeconds == 0 && st.confirmed >= load.EndLSN {
		d.ConfirmedSeconds = now.Sub(c.start).Seconds()
	}
	return now, nil
}

// failedTask asks Connect's REST API for the connector's status and returns
// the trace of a failed connector or task; "" when none failed or the API
// does not answer (yet).
func failedTask(ctx context.Context, rest string) string {
	st, err := debeziumtest.ConnectorStatus(ctx, rest, connectorName)
	if err != nil {
		return ""
	}
	return st.Failure()
}

// exitedOnSignal reports whether err is the exit of a process that a
// signal ended or that exited with 128+SIGTERM, as the JVM does after
// running its shutdown hooks.
func exitedOnSignal(err error) bool { return debeziumtest.ExitedOnSignal(err) }
