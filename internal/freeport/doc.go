// Package freeport hands out TCP ports on 127.0.0.1 that were free a moment
// ago, for tests that start real services (PostgreSQL, Kafka, the schema
// registry) on random ports.
//
// A port is found by listening on 127.0.0.1:0 and closing the listener, so
// another process may take it before the caller binds it; callers that fail
// to bind should simply ask again.
package freeport
