// Package checkpoint is the relay's memory outside the replication slot: a
// compacted Kafka topic (--checkpoint-topic) holding, under the relay id, the
// LSN last confirmed to PostgreSQL, its timeline and commit time, and a
// record of every gap an operator accepted.
//
// The slot alone cannot tell a first start from a slot that was dropped,
// lost in a failover or invalidated: both look like "no slot". The
// checkpoint can. Guard implements replication.Guard from it, so that a
// missing or invalidated slot with a history halts the relay (exit 3)
// instead of being silently recreated after a gap, and Guard.Run keeps the
// checkpoint current while the relay streams.
//
// A checkpoint record is one keyed JSON value, so that an exactly-once relay
// can write it inside the same Kafka transaction as the events it covers;
// the topic is read with read_committed isolation for that reason. The
// store reaches Kafka through franz-go only: kgo writes and reads the
// topic, kadm creates it and lists its configuration and offsets.
package checkpoint
