// Package relaytest runs built binaries (the relay, the example services)
// the way the integration tests and the example programs need them: Build
// compiles packages into a directory, Start runs a binary as a process whose
// output is kept and which is killed at cleanup, Process reads the relay's
// metrics port, WaitFor polls a condition with a deadline, and
// StartServices starts PostgreSQL, Kafka and the schema registry in
// parallel. NewLazy declares them for a test package instead: each starts
// when a test first uses it, so tests that use none (the unit tier, plain
// go test) start none, and one that needs a service skips while the
// service tier is off (testtier).
//
// Start, WaitFor and Need take only the few methods of testing.TB they call
// (T); the lazy registry's REST helpers take a testing.TB, as
// registrytest's do.
package relaytest
