// Package slot is the operator's view of the relay's replication slot:
// `cdc-relay status` (the slot's row of pg_replication_slots, its lag, and
// what run would do with a slot that is missing or lost) and `cdc-relay
// slot recreate --accept-gap` (a new slot after the old one was lost, with
// the accepted gap recorded in the checkpoint topic).
//
// In: a relay.Config (or for status the part that reaches the checkpoint
// topic), parsed and checked by the command line, and connections it
// opens itself.
// Out: lines on the writers it is given; errors, never an exit.
// Owns: nothing beyond one call: status reads catalogs and the checkpoint
// and changes nothing; Recreate changes only the slot, the publication and
// the checkpoint's gap record.
package slot
