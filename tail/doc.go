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
package tail
