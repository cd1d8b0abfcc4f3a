// Package outbox writes outbox events inside the caller's transaction, the
// producer half of the transactional outbox that cdc-relay publishes.
//
// In: an open transaction (pgx.Tx or *sql.Tx) that also holds the business
// change, and Events. Out: one outbox row per event (ModeTable, one INSERT
// statement per batch), or one transactional logical decoding message per
// event (ModeMessage, the table-less form, same API). The event exists only
// if the caller commits; the relay then publishes it to Kafka, a message
// exactly like a row, so a service switches between the two by changing
// Config.Mode alone.
//
// Every event gets a UUIDv7 id unless it carries one: the relay's `id`
// header and the key consumers deduplicate on. Table mode therefore needs an
// id column that takes a UUID: docs/outbox.sql, the table the relay reads
// by default; Config.Table and Config.Columns name other tables and
// columns, like the relay's `columns:`.
//
// Only a transaction is accepted, and the compiler checks it: Write and
// WriteBatch take a pgx.Tx, WriteSQL and WriteBatchSQL a *sql.Tx. A pool or
// a connection would commit the event on its own, outside the business
// change.
// A Propagator adds traceparent and tracestate from the context without a
// dependency on OpenTelemetry. With Config.Schemas, payloads are checked
// with the relay's own Avro encoder before anything is written, so an event
// the relay would dead-letter fails in the service instead.
//
// The package owns no connection and starts no goroutine.
package outbox
