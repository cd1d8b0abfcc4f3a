// Package pgtest starts private PostgreSQL 15 clusters for tests: initdb into
// a temporary directory, wal_level=logical, a random port on 127.0.0.1, the
// server run by the unprivileged postgres user when the test runs as root.
//
// A package shares one cluster, started by its first test that needs it
// (relaytest.NewLazy) and stopped by TestMain, and gives every test its own
// database, slot, publication and table names.
//
// In a test, Start and StartStandby refuse (testtier.ErrOff) while the
// service tier is off: plain `go test` starts no PostgreSQL.
package pgtest
