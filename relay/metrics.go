package relay

import (
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/cdc-relay/cdc-relay/checkpoint"
	"github.com/cdc-relay/cdc-relay/publisher"
	"github.com/cdc-relay/cdc-relay/replication"
)

// metrics lives in a private registry served on --metrics-addr.
type Metrics struct {
	reg       *prometheus.Registry
	published *prometheus.CounterVec
	bytes     prometheus.Counter
	dlq       *prometheus.CounterVec
	skipped   *prometheus.CounterVec
	// unconfigured counts rows of tables the publication publishes but
	// --table does not name (dead letters of kind unconfigured_table).
	unconfigured *prometheus.CounterVec
	latency      prometheus.Histogram
	errors       *prometheus.CounterVec
	// stages times a sample of the events from commit to acknowledgement:
	// commit_to_read per transaction, read_to_produce and produce_to_ack
	// per sampled record.
	stages                                    *prometheus.HistogramVec
	commitToRead, readToProduce, produceToAck prometheus.Observer
	// Kafka transactions (--delivery exactly-once): how many ended, by
	// result, their records, how long each was open before its commit was
	// decided, and how long the commit took (last acks, then EndTxn).
	txns                         *prometheus.CounterVec
	txnCommitted, txnAbort       prometheus.Counter
	txnRecords                   prometheus.Histogram
	txnOpen, txnCommit, txnAwait prometheus.Observer
	txnSeconds                   *prometheus.HistogramVec
	// registryRequests counts HTTP requests to the schema registry by status
	// class; registryCache counts encoder lookups by result (hit or miss).
	registryRequests *prometheus.CounterVec
	registryCache    *prometheus.CounterVec
	cacheHit         prometheus.Counter
	cacheMiss        prometheus.Counter
	// unknown counts payload fields the schemas lack (UnknownField).
	unknown *unknownFields
	// rabbit counts RabbitMQ's nacks and returns (--rabbitmq-url).
	rabbit rabbitMetrics
	// ready decides the degraded state for /readyz and cdc_relay_degraded;
	// Run sets its kafka and checkpoint (SetHealth) once they exist.
	ready *readiness
}

// roles are the values of the role label of cdc_relay_role.
var roles = []string{"active", "standby"}

// NewMetrics are the metrics of a relay that publishes to Kafka.
func NewMetrics(stats *replication.Stats, lag *LagRate) *Metrics {
	return newMetrics(stats, lag, checkpoint.Kafka)
}

// metricHelp is the help of the metrics that name the broker, Kafka's
// or under RabbitMQ RabbitMQ's.
type metricHelp struct {
	published, bytes, stages, degraded string
	broker, acked                      string // "Kafka", "acknowledged by Kafka"
}

func helpFor(b checkpoint.Broker) metricHelp {
	if b == checkpoint.RabbitMQ {
		return metricHelp{
			published: "Messages RabbitMQ confirmed, under the exchange's name in the topic label (dead letters included).",
			bytes:     "Bytes of records acknowledged; RabbitMQ's confirms are not counted in bytes, so it stays 0.",
			stages: "Time an event spends in each stage, sampled: commit_to_read (the commit time to the relay reading the transaction's first row); " +
				"read_to_produce and produce_to_ack are not timed under RabbitMQ.",
			degraded: "1 while /readyz answers 503 degraded: streaming, but RabbitMQ has blocked publishing (connection.blocked) or connecting has failed for over 10 s, " +
				"checkpoint writes have failed for over 10 s, or the oldest in-flight event has waited over 30 s.",
			broker: "RabbitMQ", acked: "confirmed by RabbitMQ",
		}
	}
	return metricHelp{
		published: "Records Kafka acknowledged, by topic (dead letters included under the DLQ topic).",
		bytes:     "Bytes of records Kafka acknowledged.",
		stages:    "Time an event spends in each stage, sampled: commit_to_read (the commit time to the relay reading the transaction's first row), read_to_produce (to handing its record to the Kafka client) and produce_to_ack (to the broker's acknowledgement).",
		degraded:  "1 while /readyz answers 503 degraded: streaming, but produce requests have failed for over 10 s or the oldest in-flight event has waited over 30 s.",
		broker:    "Kafka", acked: "acknowledged by Kafka",
	}
}

// newMetrics are the metrics of a relay that publishes to broker: their
// help names it and its destinations.
func newMetrics(stats *replication.Stats, lag *LagRate, broker checkpoint.Broker) *Metrics {
	reg := prometheus.NewRegistry()
	help := helpFor(broker)
	deadLetters, _ := deadLetterPlace(broker)
	m := &Metrics{
		reg:   reg,
		ready: &readiness{stats: stats, broker: broker},
		published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cdc_relay_events_published_total", Help: help.published,
		}, []string{"topic"}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cdc_relay_published_bytes_total", Help: help.bytes,
		}),
		dlq: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cdc_relay_dlq_events_total", Help: "Invalid events sent to " + deadLetters + ", by reason.",
		}, []string{"reason"}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cdc_relay_skipped_rows_total", Help: "Inserted rows of tables other than the outbox tables that the publication published and the relay skipped (--allow-extra-tables), by table.",
		}, []string{"table"}),
		unconfigured: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cdc_relay_unconfigured_rows_total", Help: "Rows of tables the publication publishes but --table does not name, sent to " + deadLetters + " as unconfigured_table, by table.",
		}, []string{"table"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "cdc_relay_produce_latency_seconds", Help: "Latency of one produce request, from writing it to reading the answer.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cdc_relay_produce_errors_total", Help: "Failed produce attempts, by kind.",
		}, []string{"kind"}),
		stages: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "cdc_relay_stage_seconds", Help: help.stages,
			Buckets: prometheus.ExponentialBuckets(0.00025, 1.5, 30),
		}, []string{"stage"}),
	}
	m.commitToRead, m.readToProduce, m.produceToAck = m.stages.WithLabelValues("commit_to_read"), m.stages.WithLabelValues("read_to_produce"), m.stages.WithLabelValues("produce_to_ack")
	m.txns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cdc_relay_kafka_transactions_total", Help: "Kafka transactions ended by this instance (--delivery exactly-once), by result: committed or aborted.",
	}, []string{"result"})
	m.txnCommitted, m.txnAbort = m.txns.WithLabelValues("committed"), m.txns.WithLabelValues("aborted")
	m.txnRecords = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "cdc_relay_kafka_transaction_records", Help: "Records in each committed Kafka transaction, its checkpoint record included.",
		Buckets: prometheus.ExponentialBuckets(2, 2, 14),
	})
	m.txnSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "cdc_relay_kafka_transaction_seconds", Help: "Each committed Kafka transaction by phase: await (its first record waiting for the coordinator to complete the commit before it), open (its first record to the decision to commit) and commit (waiting for the last acknowledgements, then EndTxn).",
		Buckets: prometheus.ExponentialBuckets(0.00025, 1.5, 30),
	}, []string{"phase"})
	m.txnOpen, m.txnCommit, m.txnAwait = m.txnSeconds.WithLabelValues("open"), m.txnSeconds.WithLabelValues("commit"), m.txnSeconds.WithLabelValues("await")
	m.registryRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cdc_relay_schema_registry_requests_total", Help: "HTTP requests to the schema registry, by result (2xx, 4xx, 5xx, error).",
	}, []string{"result"})
	m.registryCache = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cdc_relay_schema_cache_lookups_total", Help: "Schema id lookups per event, by result: hit (cached, no registry request) or miss.",
	}, []string{"result"})
	m.cacheHit, m.cacheMiss = m.registryCache.WithLabelValues("hit"), m.registryCache.WithLabelValues("miss")
	m.unknown = newUnknownFields(reg, deadLetters)
	m.rabbit = newRabbitMetrics(reg, m.ready)
	reg.MustRegister(m.published, m.bytes, m.dlq, m.skipped, m.unconfigured, m.latency, m.errors, m.stages, m.txns, m.txnRecords, m.txnSeconds, m.registryRequests, m.registryCache,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cdc_relay_backpressure", Help: "1 while the reader waits for in-flight room: " + help.broker + " is slower than the WAL and PostgreSQL holds the WAL."}, func() float64 {
			return boolFloat(stats.Backpressure())
		}),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cdc_relay_build_info", Help: "Build information.", ConstLabels: prometheus.Labels{"version": Version}}, func() float64 { return 1 }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cdc_relay_events_read_total", Help: "Outbox rows read from the slot."}, func() float64 { return float64(stats.RowsRead()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cdc_relay_confirmed_lsn", Help: "LSN last confirmed to PostgreSQL (flush position)."}, func() float64 { return float64(stats.Confirmed()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cdc_relay_server_wal_end_lsn", Help: "Newest WAL end reported by the server."}, func() float64 { return float64(stats.ServerWALEnd()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cdc_relay_slot_lag_bytes", Help: "Server WAL end minus confirmed LSN, from the replication protocol."}, func() float64 { return float64(stats.LagBytes()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cdc_relay_inflight_events", Help: "Events read and not yet " + help.acked + "."}, func() float64 { e, _ := stats.InFlight(); return float64(e) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cdc_relay_inflight_bytes", Help: "Bytes of those events."}, func() float64 { _, b := stats.InFlight(); return float64(b) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cdc_relay_last_status_update_timestamp_seconds", Help: "When the last status update was sent."}, func() float64 { return unixSeconds(stats.LastStatus()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cdc_relay_last_keepalive_timestamp_seconds", Help: "When the last keepalive arrived."}, func() float64 { return unixSeconds(stats.LastKeepalive()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cdc_relay_active", Help: "1 when this instance streams from the slot, 0 as a standby or otherwise."}, func() float64 {
			if stats.State() == replication.StateStreaming {
				return 1
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cdc_relay_slot_lag_growth_bytes_per_second", Help: "Growth of the slot lag over the last minute (negative while it shrinks)."}, lag.BytesPerSecond),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cdc_relay_replication_delay_seconds", Help: "Now minus the commit time of the newest acknowledged transaction; 0 when nothing is in flight."}, func() float64 {
			return replicationDelay(stats, time.Now()).Seconds()
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cdc_relay_oldest_in_flight_seconds", Help: "How long the oldest event read from the slot and not yet " + help.acked + " has waited; 0 when nothing is in flight."}, func() float64 {
			return stats.OldestInFlight(time.Now()).Seconds()
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cdc_relay_degraded", Help: help.degraded}, func() float64 {
			return boolFloat(m.ready.degraded(time.Now()) != "")
		}),
		&stateCollector{stats: stats},
		&slotCollector{stats: stats},
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cdc_relay_slot_failover", Help: "1 when the slot is a failover slot (PostgreSQL 17+), which a standby with sync_replication_slots = on keeps through a promotion."}, func() float64 {
			return boolFloat(stats.SlotFailover())
		}),
	)
	return m
}

// replicationDelay is how far behind the commits Kafka has acknowledged are.
func replicationDelay(stats *replication.Stats, now time.Time) time.Duration {
	if events, _ := stats.InFlight(); events == 0 {
		return 0
	}
	ct := stats.AckedCommitTime()
	if ct.IsZero() || now.Before(ct) {
		return 0
	}
	return now.Sub(ct)
}

// stateCollector reports the role, the lifecycle state and reconnects by
// cause, read from the stream's stats at scrape time.
type stateCollector struct {
	stats *replication.Stats
}

var (
	roleDesc       = prometheus.NewDesc("cdc_relay_role", "1 for the role this instance has: active (holds the slot) or standby.", []string{"role"}, nil)
	stateDesc      = prometheus.NewDesc("cdc_relay_state", "1 for the current lifecycle state.", []string{"state"}, nil)
	reconnectsDesc = prometheus.NewDesc("cdc_relay_reconnects_total", "Reconnects to PostgreSQL, by cause.", []string{"cause"}, nil)
	haltedDesc     = prometheus.NewDesc("cdc_relay_halted", "1 once the relay halted on a fatal error.", nil, nil)
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- roleDesc
	ch <- stateDesc
	ch <- reconnectsDesc
	ch <- haltedDesc
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	state := c.stats.State()
	role := "standby"
	if state == replication.StateStreaming {
		role = "active"
	}
	for _, r := range roles {
		ch <- prometheus.MustNewConstMetric(roleDesc, prometheus.GaugeValue, boolFloat(r == role), r)
	}
	for _, s := range []replication.State{replication.StateStarting, replication.StateStreaming, replication.StateStandby,
		replication.StateReconnecting, replication.StateHalted, replication.StateStopped, replication.StateWaiting} {
		ch <- prometheus.MustNewConstMetric(stateDesc, prometheus.GaugeValue, boolFloat(s == state), s.String())
	}
	for cause, n := range c.stats.Reconnects() {
		ch <- prometheus.MustNewConstMetric(reconnectsDesc, prometheus.CounterValue, float64(n), cause)
	}
	ch <- prometheus.MustNewConstMetric(haltedDesc, prometheus.GaugeValue, boolFloat(state == replication.StateHalted))
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func unixSeconds(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixNano()) / 1e9
}

// Produced implements publisher.Observer.
func (m *Metrics) Produced(topic string, records, bytes int) {
	m.published.WithLabelValues(topic).Add(float64(records))
	m.bytes.Add(float64(bytes))
}

// Stages implements publisher.Observer.
func (m *Metrics) Stages(readToProduce, produceToAck time.Duration) {
	m.readToProduce.Observe(readToProduce.Seconds())
	m.produceToAck.Observe(produceToAck.Seconds())
}

// TxnCommitted implements publisher.Observer.
func (m *Metrics) TxnCommitted(records int, open, commit, await time.Duration) {
	m.txnCommitted.Inc()
	m.txnRecords.Observe(float64(records))
	m.txnOpen.Observe(open.Seconds())
	m.txnCommit.Observe(commit.Seconds())
	m.txnAwait.Observe(await.Seconds())
}

// TxnAborted implements publisher.Observer.
func (m *Metrics) TxnAborted() { m.txnAbort.Inc() }

// ProduceLatency implements publisher.Observer.
func (m *Metrics) ProduceLatency(d time.Duration) { m.latency.Observe(d.Seconds()) }

// ProduceError implements publisher.Observer.
func (m *Metrics) ProduceError(kind string) { m.errors.WithLabelValues(kind).Inc() }

// countRegistryRequests wraps the registry's HTTP client so that every
// request is counted by result.
func (m *Metrics) countRegistryRequests(c *http.Client) *http.Client {
	if c == nil {
		c = &http.Client{}
	}
	next := c.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	out := *c
	out.Transport = roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(req)
		switch {
		case err != nil:
			m.registryRequests.WithLabelValues("error").Inc()
		default:
			m.registryRequests.WithLabelValues(fmt.Sprintf("%dxx", resp.StatusCode/100)).Inc()
		}
		return resp, err
	})
	return &out
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// SchemaLookup counts a per-event schema lookup (record.Observer).
func (m *Metrics) SchemaLookup(hit bool) {
	if hit {
		m.cacheHit.Inc()
	} else {
		m.cacheMiss.Inc()
	}
}

// DeadLetter counts a dead letter of kind in cdc_relay_dlq_events_total.
func (m *Metrics) DeadLetter(kind string) { m.dlq.WithLabelValues(kind).Inc() }

// CommitToRead observes the time from a transaction's commit to the read
// of its first row.
func (m *Metrics) CommitToRead(d time.Duration) { m.commitToRead.Observe(d.Seconds()) }

// Unconfigured counts a row of a table the publication publishes but
// --table does not name.
func (m *Metrics) Unconfigured(table string) { m.unconfigured.WithLabelValues(table).Inc() }

// Skipped counts a row of another table skipped under --allow-extra-tables.
func (m *Metrics) Skipped(table string) { m.skipped.WithLabelValues(table).Inc() }

// SetHealth gives /readyz and cdc_relay_degraded Kafka's side: the
// publisher's Health and the checkpoint writes' (checkpoint.Guard's
// WriteHealth). Call it before the HTTP server starts.
func (m *Metrics) SetHealth(kafka func() publisher.Health, checkpoint func() (error, time.Time)) {
	m.ready.kafka, m.ready.checkpoint = kafka, checkpoint
}

// MetricNames are the metric families the relay exports, those that appear
// only once an event, a reconnect or a slot poll happened included.
func MetricNames() (map[string]bool, error) {
	var stats replication.Stats
	m := NewMetrics(&stats, NewLagRate(stats.LagBytes))
	m.dlq.WithLabelValues("x")
	m.published.WithLabelValues("x")
	m.errors.WithLabelValues("x")
	families, err := m.reg.Gather()
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
	}
	names["cdc_relay_reconnects_total"] = true // emitted once a reconnect happened
	for _, n := range slotMetricNames {        // emitted once the slot poller read the slot
		names[n] = true
	}
	return names, nil
}
