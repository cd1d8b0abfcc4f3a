// Package testtier switches the service tier of the tests on and off.
//
// Plain `go test ./...` runs the unit tier: it starts no PostgreSQL, Kafka,
// schema registry, RabbitMQ or Java process, and every test that would
// start one skips, saying how to run it. Setting CDC_RELAY_TEST_SERVICES=1
// (make test sets it) adds the service tier: those tests start what they
// need and fail, never skip, when it cannot start. make test also fails on
// any skip (internal/noskip), so the gate can never hide a tier.
//
// The starters (pgtest, kafkatest, registrytest, rabbittest and
// debeziumtest's Connect worker) call Check before they start anything; a
// test that starts a service without them calls Need first. Lean tells
// whether the JVMs a test starts (kafkatest's brokers, the Connect worker)
// should spend less of the machine's CPU: QuickJIT gives them C1 alone,
// and kafkatest maps its brokers' classes from a shared archive;
// benchmarks and programs start them as in production.
package testtier
