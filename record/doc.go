// Package record is the relay's row → record step: it turns one outbox row
// (a decoder.Row and its transaction's commit time) into the Kafka record
// the publisher sends, or into a dead letter when the row is invalid.
//
// What comes in: the row's columns as pgoutput text, the commit time.
// What goes out: a *publisher.Record with topic (router), key
// (--key-format: the bytes of Kafka Connect's String, JSON or Avro
// converter), value (--value-format: Avro in the Confluent wire format, or
// the payload's compact JSON; nil for a tombstone), headers (the builtin
// id, event_type and aggregate_type, --header-columns in Debezium's text
// forms, the headers jsonb) and timestamp (the commit time, or
// --timestamp-column). With --cloudevents the record is also a CloudEvent:
// ce_* headers (binary mode) or the application/cloudevents+json envelope
// as the value (structured mode). What only it owns: the byte formats of keys,
// values, header columns and timestamps, and the dead-letter record, with
// what it keeps of the row (HeaderRow) and how a dead letter is read back
// into its row (Rebuild) for cdc-relay dlq redrive. It also reports the
// payload fields an Avro schema lacks (UnknownFieldObserver) and, under
// UnknownDLQ, makes such an event a dead letter.
package record
