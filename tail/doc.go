// Package tail is `cdc-relay tail`: it prints the records of the relay's
// topics and its dead-letter topic as a consumer sees them, one JSON line
// each (or --pretty), values decoded through the schema registry.
//
// In: Options, parsed and checked by the command line, and a relay.Config
// holding the Kafka and registry settings.
// Out: lines on the writer Run is given; an error when it cannot read (a
// *relay.ConfigError for a setting). Run ends at the end of each partition
// as of the start, or with Follow when its context ends.
// Owns: its Kafka client, a direct consumer of exact partitions and
// offsets (no group: nothing is committed), and the formatting of a line.
//
// With RabbitMQ (RunRabbitMQ and its RabbitMQConfig), an exchange is
// followed through a temporary exclusive, auto-delete queue bound with a
// pattern and capped in length (the oldest dropped), and a stream is read
// by name without consuming it; the lines have the same members, plus
// exchange, routing_key, stream and the AMQP properties. A following tail
// reconnects after a lost connection (rabbitmqfollow.go).
package tail
