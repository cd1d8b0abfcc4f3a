// Package inbox is the consumer half of the outbox pattern: an idempotent
// Kafka consumer for the topics cdc-relay writes (New), or RabbitMQ
// consumer for the queues its exchange feeds (NewRabbitMQ), with one
// Handler API and the same exactly-once effects.
//
// In: records from a franz-go (kgo) consumer group (explicit commits,
// never auto-commit; the range or roundrobin protocol, which the kafka-go
// members of earlier versions speak too, so a rolling upgrade keeps one
// group), over plain text or TLS, with SASL PLAIN or SCRAM or none, as the
// relay's --kafka-tls and --kafka-sasl-* settings allow (Config.TLS...,
// Config.SASL...; internal/kafkasec builds them for both). read_committed
// by default: franz-go drops the records of aborted Kafka transactions;
// the markers never reach the handler, their offsets are done at once.
// Keys are decoded as the relay's --key-format says (Config.KeyFormat),
// Confluent-framed Avro values with the writer schema that the project's
// schemaregistry package fetches by id (cached), into the caller's Go type
// or a map (hamba/avro).
// Out: one database transaction per event, or per batch of queued events
// (Config.BatchSize), pgx or database/sql, with Config.TxOptions, holding
// the mark INSERT INTO processed_messages (consumer, message_id) ON
// CONFLICT DO NOTHING and, unless the mark was already there, the
// Handler's work; only after that transaction commits is the event done,
// and Kafka offsets are committed only as the contiguous prefix of done
// offsets per partition. At-least-once delivery thus becomes an effect
// applied exactly once per consumer, and a crash never skips an event.
//
// Events are spread over Workers by hash(key) % Workers, so one aggregate's
// events are applied in order. A failing event is retried with backoff and,
// after MaxAttempts (default 5), written to the dead-letter topic with the
// error and its offset moves on; a value that cannot be decoded (bad magic
// byte, unknown schema id) goes there at once. Serialization failures,
// deadlocks, lost connections and errors marked with Transient do not count
// toward MaxAttempts (for at most TransientTimeout per event); database and
// registry outages are waited out, not dead-lettered. Redrive runs the
// consumer's own dead letters again through the same path. Cleanup deletes
// old marks in bounded batches. The DDL is docs/inbox.sql.
//
// RabbitMQ (rabbitmq*.go): one quorum queue, declared with every argument
// explicit (x-delivery-limit 5, x-dead-letter-exchange, at-least-once
// dead-lettering with x-overflow reject-publish, single active consumer)
// and bound to the relay's exchange, or used as it exists (Passive); a
// declare refused with 406 is a *QueueArgumentsError naming both argument
// sets. Values by content_type: JSON, Confluent-framed Avro, CloudEvents.
// The id is the id header or message_id; the redelivered flag is only a
// hint, every delivery is deduplicated by its mark. Prefetch 10, a manual
// ack after the commit; a failed event is retried in place with backoff,
// its aggregate's later events waiting behind it, up to the delivery
// limit (earlier deliveries count), then given back with basic.reject
// until the broker dead-letters it. The connection is the package's own
// (amqp091-go's recovery off): lost, it is made again with backoff and
// the held deliveries come again.
//
// The package owns the group client, the dead-letter producer (or the
// AMQP connection) and its goroutines for the duration of Run; the caller
// owns the DB pool.
package inbox
