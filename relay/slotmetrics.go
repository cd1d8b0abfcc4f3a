package relay

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cdc-relay/cdc-relay/replication"
)

// slotCollector exports the slot poller's newest reading of
// pg_replication_slots (every --slot-poll-interval). A metric whose value
// is unknown is left out, not reported as 0: no sample yet, no
// max_slot_wal_keep_size, a lag that is not growing, a server before 14.
type slotCollector struct {
	stats *replication.Stats
}

// walStatuses are the values of pg_replication_slots.wal_status.
var walStatuses = []string{"reserved", "extended", "unreserved", "lost"}

var (
	safeWALDesc = prometheus.NewDesc("cdc_relay_slot_safe_wal_size_bytes",
		"WAL that can still be written before the slot is in danger of losing WAL it needs (pg_replication_slots.safe_wal_size); absent when max_slot_wal_keep_size is unset.", nil, nil)
	walStatusDesc = prometheus.NewDesc("cdc_relay_slot_wal_status",
		"1 for the slot's wal_status: reserved, extended, unreserved (WAL will be removed at the next checkpoint) or lost.", []string{"status"}, nil)
	exhaustionDesc = prometheus.NewDesc("cdc_relay_slot_exhaustion_seconds",
		"Estimated seconds until the slot loses WAL: safe WAL size divided by the slot lag's growth rate; present only while the lag grows and max_slot_wal_keep_size is set.", nil, nil)
	spillBytesDesc = prometheus.NewDesc("cdc_relay_slot_spill_bytes_total",
		"Bytes the slot's decoding spilled to disk for transactions larger than logical_decoding_work_mem (pg_stat_replication_slots, PostgreSQL 14+).", nil, nil)
	spillTxnsDesc = prometheus.NewDesc("cdc_relay_slot_spill_txns_total",
		"Transactions the slot's decoding spilled to disk (pg_stat_replication_slots, PostgreSQL 14+).", nil, nil)
)

// slotMetricNames are the families slotCollector may export.
var slotMetricNames = []string{"cdc_relay_slot_safe_wal_size_bytes", "cdc_relay_slot_wal_status", "cdc_relay_slot_exhaustion_seconds",
	"cdc_relay_slot_spill_bytes_total", "cdc_relay_slot_spill_txns_total"}

func (c *slotCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- safeWALDesc
	ch <- walStatusDesc
	ch <- exhaustionDesc
	ch <- spillBytesDesc
	ch <- spillTxnsDesc
}

func (c *slotCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats.SlotSample()
	if s == nil {
		return
	}
	if s.SafeWALSize != nil {
		ch <- prometheus.MustNewConstMetric(safeWALDesc, prometheus.GaugeValue, float64(*s.SafeWALSize))
	}
	if s.WALStatus != "" {
		for _, st := range walStatuses {
			ch <- prometheus.MustNewConstMetric(walStatusDesc, prometheus.GaugeValue, boolFloat(st == s.WALStatus), st)
		}
	}
	if secs, ok := s.ExhaustionSeconds(); ok {
		ch <- prometheus.MustNewConstMetric(exhaustionDesc, prometheus.GaugeValue, secs)
	}
	if s.SpillBytes != nil {
		ch <- prometheus.MustNewConstMetric(spillBytesDesc, prometheus.CounterValue, float64(*s.SpillBytes))
		ch <- prometheus.MustNewConstMetric(spillTxnsDesc, prometheus.CounterValue, float64(*s.SpillTxns))
	}
}
