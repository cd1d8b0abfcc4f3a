// Command cdc-relay publishes outbox rows from a PostgreSQL pgoutput slot to
// Kafka (--kafka-brokers) or RabbitMQ (--rabbitmq-url), confirming WAL only
// after the broker has acknowledged it.
package main

import (
	"fmt"
	"io"
	"os"

	relaypkg "github.com/cdc-relay/cdc-relay/relay"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// The packages name the version in metrics, logs and the checkpoint.
func init() { relaypkg.Version = version }

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1 // a runtime failure: a halt, a lost slot, an unusable slot; at once: an error no retry fixes (credentials, privileges, missing database, wal_level)
	exitConfig = 2 // a bad or missing setting, schema or command line
	exitGap    = 3 // events may be missing from the broker (Kafka or RabbitMQ): the slot is gone or invalidated (docs/OPERATIONS.md)
)

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitConfig
	}
	switch args[0] {
	case "run":
		return runRelay(args[1:], getenv, stdout, stderr)
	case "status":
		return status(args[1:], getenv, stdout, stderr)
	case "replay":
		return replay(args[1:], getenv, stdout, stderr)
	case "check":
		return check(args[1:], getenv, stdout, stderr)
	case "schemas":
		return schemasCommand(args[1:], getenv, stdout, stderr)
	case "slot":
		return slotCommand(args[1:], getenv, stdout, stderr)
	case "dlq":
		return dlqCommand(args[1:], getenv, stdout, stderr)
	case "healthcheck":
		return healthcheck(args[1:], getenv, stdout, stderr)
	case "tail":
		return tailCommand(args[1:], getenv, stdout, stderr)
	case "version", "--version", "-version":
		if len(args) > 1 && (args[1] == "-h" || args[1] == "--help" || args[1] == "-help" || args[1] == "help") {
			fmt.Fprint(stdout, versionUsage)
			return exitOK
		}
		fmt.Fprintln(stdout, "cdc-relay", version)
		return exitOK
	case "help", "-h", "--help":
		usage(stdout)
		return exitOK
	}
	fmt.Fprintf(stderr, "cdc-relay: unknown command %q: use run, check, status, tail, schemas, slot, replay, dlq, healthcheck or version\n", args[0])
	return exitConfig
}

const versionUsage = `Usage: cdc-relay version

Prints the version ("cdc-relay VERSION") on stdout and exits 0. It takes no
flags and reads no settings.
`

func usage(w io.Writer) {
	fmt.Fprint(w, `cdc-relay publishes outbox rows from a PostgreSQL logical replication slot to Kafka or RabbitMQ.

Usage:
  cdc-relay run [flags]   stream until SIGTERM or SIGINT
  cdc-relay check [flags] preflight: check PostgreSQL, the slot, the table, Kafka or RabbitMQ, the registry and the schemas
  cdc-relay schemas check test local .avsc files against the registry's compatibility, registering nothing
  cdc-relay slot recreate --accept-gap
                          after the slot was lost: create it again and record the accepted gap in the checkpoint (topic, or RabbitMQ streams)
  cdc-relay replay        re-publish outbox rows chosen by --since or --from-id, to repair a gap (cdc-relay replay -h)
  cdc-relay dlq stats     count the dead letters by error kind, event type and age
  cdc-relay dlq redrive   send dead letters on once their cause is fixed (cdc-relay dlq redrive -h)
  cdc-relay status        print the slot's state and lag from pg_replication_slots (--json)
  cdc-relay tail [TOPIC...]
                          print the records of the relay's topics and the DLQ (RabbitMQ: its exchange, or a STREAM) as JSON lines, values decoded
  cdc-relay version       print the version
  cdc-relay healthcheck   exit 0 when the relay on --metrics-addr answers /healthz (for Docker HEALTHCHECK)

cdc-relay COMMAND --help lists a command's flags, their defaults and env names.
--kafka-brokers or --rabbitmq-url names the broker.
Every setting is a flag, an env var CDC_RELAY_<NAME> (or CDC_RELAY_<NAME>_FILE)
and a --config YAML key; precedence: flag > env > YAML > default.
`)
}
