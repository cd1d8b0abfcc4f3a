// Package decoder turns pgoutput (proto_version 1) messages into what the
// relay needs: transaction boundaries with their LSNs, and the rows inserted
// into the outbox table.
//
// In: the WALData of one XLogData message at a time, in stream order.
// Out: a reused Message whose byte slices alias the input (no copies, no
// allocations for Begin, Commit and Insert in steady state); with
// Config.OtherTables, inserts into other tables too (KindOtherRow), so that
// the relay can account for every row the publication sends.
// Owns: the relation cache that maps the outbox table's columns by name.
//
// The package is pure: no I/O, no logging, no goroutines. A Decoder is not
// safe for concurrent use; the relay owns one per replication stream.
package decoder
