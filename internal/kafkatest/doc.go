// Package kafkatest runs a real single-node Apache Kafka broker (KRaft,
// combined broker and controller) on random loopback ports for tests.
//
// It starts the jars that scripts/setup.sh resolves from Maven Central into
// $CDC_RELAY_CACHE/kafka-<Version>/libs (CDC_RELAY_KAFKA_LIBS overrides the
// directory) with the java on PATH. A Broker owns its java process, its data
// directory and its log file; nothing else in the project starts Kafka.
// Start fails, never skips, when the broker cannot be started; in a test,
// it refuses (testtier.ErrOff) while the service tier is off.
//
// Every broker has a PLAINTEXT listener (Addr), also used between broker and
// controller. Options.SASLUsers adds a SASL_PLAINTEXT listener (SASLAddr)
// taking PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512; Options.TLS adds an SSL
// listener (SSLAddr, mutual TLS with TLS.ClientAuth) and, with users, a
// SASL_SSL listener (SASLSSLAddr). Certificates are PEM, as Go makes them.
//
// In a test (testtier.Lean) a broker maps its classes from the
// class-data-sharing archive that make setup writes beside the jars
// (WriteArchive, run by the archive command): its start costs about a
// third less CPU. Without the archive it starts as before.
package kafkatest
