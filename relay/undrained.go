package relay

import (
	"log/slog"
	"time"

	"github.com/cdc-relay/cdc-relay/checkpoint"
	"github.com/cdc-relay/cdc-relay/replication"
)

// LogUndrained runs after a stop on request (SIGTERM, SIGINT): when events
// are still in flight, the drain did not finish, and the relay says so at
// ERROR with the count. The exit code stays 0, a stop on request: nothing
// is lost, as the slot's confirmed LSN (and the checkpoint) stayed before
// those events, which are read and published again at the next start
// (duplicates, which consumers drop by id). broker is the one the events
// wait for (exactly-once is Kafka's only).
func LogUndrained(log *slog.Logger, stats *replication.Stats, timeout time.Duration, exactlyOnce bool, broker checkpoint.Broker) {
	events, bytes := stats.InFlight()
	if events <= 0 {
		return
	}
	log.Error(undrainedMessage(exactlyOnce, broker), "in_flight_events", events, "in_flight_bytes", bytes, "shutdown_timeout", timeout.String(), "confirmed_lsn", stats.Confirmed().String())
}

// undrainedMessage is LogUndrained's message.
func undrainedMessage(exactlyOnce bool, broker checkpoint.Broker) string {
	if exactlyOnce {
		return "stopped on request before every event in flight was committed to Kafka: " +
			"the open Kafka transaction is aborted, and its events are read again from the checkpoint at the next start"
	}
	acked := "Kafka acknowledged"
	if broker == checkpoint.RabbitMQ {
		acked = "RabbitMQ confirmed"
	}
	return "stopped on request before " + acked + " every event in flight (--shutdown-timeout): " +
		"their LSN is not confirmed, so they are read from the slot and published again at the next start"
}
