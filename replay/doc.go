// Package replay is `cdc-relay replay`: it reads outbox rows back from
// their tables, chosen by creation time (--since, --until) or by id
// (--from-id, --to-id), and publishes them again through the relay's own
// row → record step, so that a gap in Kafka can be repaired with the same
// record bytes run would have written.
//
// In: a relay.Config parsed and checked by the command line, and the
// Flags of the command's action flags.
// Out: the records in Kafka (at least once), a line per acknowledged event
// on stdout, the command's exit code from Run. Initial is the same engine
// as the relay's --initial-replay (relay.Options.InitialReplay).
// Owns: its PostgreSQL connection (a REPEATABLE READ, read-only
// transaction and a cursor), the window of rows and its SQL, and a
// publisher session of its own.
package replay
