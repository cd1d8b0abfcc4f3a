// Package publisher writes records to Kafka in order and acknowledges them in
// sequence order.
//
// In: records carrying the stream's sequence numbers. Out: Tracker acks for a
// contiguous prefix. It partitions keys as the Java client does (murmur2), so
// one aggregate always lands on one partition, and it never lets a later
// batch of a partition go out before an earlier one succeeded: each batch is
// written per partition, retried on retriable errors until it succeeds, and
// only then is the next batch taken. Partition counts are read again every
// Config.MetadataMaxAge (5 min) and after errors meaning a partition moved,
// so partitions added to a topic are used. It uses kafka-go's low-level Client
// rather than its Writer, whose per-partition queue keeps writing later
// batches after one has failed. Publisher.Health tells since when requests
// have failed, for the relay's readiness.
package publisher
