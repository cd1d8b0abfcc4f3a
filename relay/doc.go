// Package relay joins the stages of cdc-relay: replication (the slot),
// record (row → record), publisher (Kafka) and checkpoint.
//
// In: a Config, already parsed and checked by the command line
// (cmd/cdc-relay), which names the flags in its errors.
// Out: NewSetup builds from it what run, replay and dlq redrive share (the
// schemas, the router, the registry client, the metrics, the Kafka TLS and
// SASL, the publisher); KafkaOptions are the options every other Kafka
// client of the relay starts from. Errors only, never an exit: the exit
// codes they map to (ExitConfig for a *ConfigError and the other errors
// ConfigExit names, ExitGap for IsGap) are the caller's to apply. The
// package installs no signal handler.
// Owns: the Config type, the error classification shared by the relay and
// its operator tools, the metrics registry and the HTTP server of
// /metrics, /healthz and /readyz.
package relay
