// Package debeziumtest runs the real Debezium PostgreSQL connector with its
// Outbox Event Router in Kafka Connect standalone, for tests and for the
// benchmark's side-by-side drain.
//
// The jars are Debezium Version on Kafka Connect ConnectVersion, which
// scripts/debezium.sh resolves from Maven Central into
// $CDC_RELAY_CACHE/debezium-<Version>/libs (CDC_RELAY_DEBEZIUM_LIBS
// overrides the directory); java comes from PATH. WorkerOptions and
// Connector render Connect's worker and connector properties; a Worker owns
// one Connect process, its REST API, its directory (configuration and the
// offsets file) and its log. Connectors are added through the REST API, so
// one worker can run several, each with its own key and value converter.
// A worker started again on the same Dir resumes from the offsets file.
//
// Start fails, never skips, when Connect cannot be started.
package debeziumtest
