// Package registrytest runs the real AxonOps schema registry (a Confluent
// REST API compatible server, default compatibility BACKWARD) on a random
// loopback port with in-memory storage, for tests.
//
// It runs the binary that scripts/setup.sh builds from tools/go.mod into
// $CDC_RELAY_CACHE/bin/schema-registry (CDC_RELAY_SCHEMA_REGISTRY_BIN
// overrides the path). The process gets a minimal environment, so no KMS or
// other outside service is ever contacted. Start fails, never skips, when the
// registry cannot be started; in a test, Start and StartApicurio refuse
// (testtier.ErrOff) while the service tier is off. One difference from Confluent's registry:
// GET /subjects on an empty registry answers null, not [].
//
// Registry.Do, Register, Versions, LatestID and SetLevel call its REST API
// over plain HTTP for the tests of cmd/cdc-relay and schemaregistry, which
// check through them, not through the relay's own client, what was
// registered.
//
// StartApicurio runs Apicurio Registry (the application scripts/debezium.sh
// unpacks, on Java 21+), the second registry that the registry-facing tests
// run against (relaytest.Lazy.Registries) and the one Debezium's Avro values
// go through with Apicurio's Kafka Connect converter. Apicurio has the same
// REST helpers.
package registrytest
