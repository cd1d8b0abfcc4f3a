// Package debeziumjson writes JSON byte for byte as Debezium's outbox
// router does with table.expand.json.payload=true through Kafka Connect's
// JsonConverter (schemas.enable=false): the text a relay must write for
// consumers not to notice a switch from Debezium.
//
// In: a payload's jsonb text as pgoutput sends it (jsonb has already
// ordered the keys and dropped duplicates) or a key's text. Out: the
// bytes, with Jackson's string escaping (AppendString) and Java's
// Double.toString for non-integers (AppendDouble). AppendPayload repeats
// what Debezium's expansion does to a document: null members and empty
// arrays dropped, arrays of objects given the union of their members,
// the jsonb text as a JSON string where Debezium cannot infer a schema,
// and an error where Debezium fails the record. docs/DEBEZIUM-FORMAT.md
// lists the rules; testdata/debezium pins them against a real Debezium.
// It does no I/O and keeps no state.
package debeziumjson
