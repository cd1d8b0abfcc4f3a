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
package preflight
