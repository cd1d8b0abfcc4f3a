// Package relay joins the stages of cdc-relay: replication (the slot),
// record (row → record), publisher (Kafka) and checkpoint. Run is
// `cdc-relay run` as a function that a test can call in-process.
//
// In: a Config, already parsed and checked by the command line
// (cmd/cdc-relay), which names the flags in its errors; Options for what
// only the caller decides (the logger, the environment tracing reads, the
// initial replay's engine, a hook told of a halt).
// Out: Run streams until its context ends and returns an error whose exit
// code the caller applies: nil (0), a *StartError (2), an error ConfigExit
// names (2), a *replication.UnrecoverableError (1), a *HaltError (3 when
// IsGap, else 1). NewSetup builds what run, replay and dlq redrive share
// (the schemas, the router, the registry client, the metrics, the Kafka TLS
// and SASL, the publisher); KafkaOptions and ClientOptions are the options
// every other Kafka client of the relay and its tools starts from. The
// package installs no signal handler and never exits the process.
// Owns: the goroutines of one Run (the stream, the checkpoint writer, the
// slot poller, the lag sampler, the startup ping, the HTTP server of
// /metrics, /healthz and /readyz) and stops them all before Run returns;
// the metrics registry; the handler that turns rows into records and dead
// letters under --on-invalid; the spans of --tracing.
package relay
