// Package kafkatest runs a real single-node Apache Kafka broker (KRaft,
// combined broker and controller) on random loopback ports for tests.
//
// It starts the jars that scripts/setup.sh resolves from Maven Central into
// $CDC_RELAY_CACHE/kafka-<Version>/libs (CDC_RELAY_KAFKA_LIBS overrides the
// directory) with the java on PATH. A Broker owns its java process, its data
// directory and its log file; nothing else in the project starts Kafka.
// Start fails, never skips, when the broker cannot be started.
package kafkatest
