// Package relay joins the stages of cdc-relay: replication (the slot),
// record (row → record), publisher (Kafka) and checkpoint.
//
// In: a Config, already parsed and checked by the command line
// (cmd/cdc-relay), which names the flags in its errors.
// Out: errors only; the exit codes they map to (ExitConfig for a
// *ConfigError and the other errors ConfigExit names, ExitGap for IsGap)
// are the caller's to apply. The package installs no signal handler and
// never exits the process.
// Owns: the Config type and the error classification shared by the
// relay and its operator tools.
package relay
