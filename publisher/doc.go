// Package publisher writes records to Kafka in order and acknowledges them in
// sequence order.
//
// In: records carrying the stream's sequence numbers. Out: Tracker acks for a
// contiguous prefix. It produces with franz-go's kgo client, an idempotent
// producer (transactional with Config.ExactlyOnce), so each partition's
// records stay in order, and are not duplicated, while kgo retries them. It
// partitions keys as the Java client does (murmur2), so one aggregate always
// lands on one partition. kgo retries retriable errors (network, leader
// changes, timeouts) until they succeed; a record it gives up on ends the
// Session: what kgo still holds is dropped, an open transaction is aborted,
// and the stream restarts from the confirmed LSN. Partition counts are read
// again every Config.MetadataMaxAge (5 min) and after errors meaning a
// partition moved, so partitions added to a topic are used. Publisher.Health
// tells since when requests have failed, for the relay's readiness.
package publisher
