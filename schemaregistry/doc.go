// Package schemaregistry turns outbox payloads into Kafka values in the
// Confluent Schema Registry wire format.
//
// In: a directory of .avsc files (one per event type, LoadDir), the URL of a
// Confluent-compatible schema registry and a subject name Strategy. Out: per
// (topic, event type) an Encoder that carries the registered schema id and
// appends 0x00, the 4-byte big-endian id and the Avro binary body converted
// from the row's JSON payload.
//
// This package alone talks to the schema registry: it registers subjects
// (which makes the registry check compatibility), owns the id caches and the
// JSON-to-Avro conversion rules. Preflight checks every subject that can be
// known at startup so an incompatible schema stops the relay before it
// produces anything. Encoder and Append are safe for concurrent use; an
// already-seen pair costs no lock and no allocation.
//
// For readers (cdc-relay tail), SchemaByID fetches a writer schema by the
// id a value names, and AppendJSON turns an Avro body back into plain JSON
// by the reverse of the encoder's rules.
package schemaregistry
