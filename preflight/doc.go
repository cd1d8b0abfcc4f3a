// Package preflight is `cdc-relay check`: it checks, before a first start
// or after a change, what the relay needs of PostgreSQL (the server, the
// role, the slot, the publication, the outbox tables and their ids), of
// the checkpoint topic, of Kafka (reachability, the dead-letter topic's
// retention, the checkpoint's replication, the principal's ACLs) and of
// the schema registry (the .avsc files and their compatibility).
//
// In: a relay.Config parsed and checked by the command line.
// Out: one line per check on the writer Run is given ("ok", "WARN", or
// "FAIL" with the fix) and the number of failed checks; PrintCompat prints
// `cdc-relay schemas check`'s results. Nothing is written anywhere: the
// checkpoint is read only, no topic or subject is created.
// Owns: its connections and Kafka client, for the length of one Run.
//
// RabbitMQ (RabbitMQ and its RabbitMQConfig) checks the connection, the
// exchange, the user's permissions and the checkpoint and dead-letter
// streams. AMQP lists no permissions, so it tries them on a temporary
// exchange and queue of its own, deleted before it returns; it never
// publishes to the relay's exchange.
package preflight
