package config

// RelaySettings are the settings of cdc-relay run, which check, replay and
// slot recreate take too: every declared setting but the ones of other
// commands (aggregate-types, group, dlq-retired-topic).
func RelaySettings() []string {
	var names []string
	for _, s := range Relay.Settings() {
		if s != AggregateTypes.Setting && s != Group.Setting && s != DLQRetiredTopic.Setting {
			names = append(names, s.Name)
		}
	}
	return names
}

// relayRequired are the settings run cannot start without, besides one
// broker (brokerOneOf).
var relayRequired = names(PGURL)

// brokerOneOf is the broker: exactly one of --kafka-brokers and
// --rabbitmq-url.
var brokerOneOf = names(KafkaBrokers, RabbitMQURL)

// Run is cdc-relay run.
var Run = &Command{
	Name: "cdc-relay run",
	Usage: `Usage: cdc-relay run [flags]

Streams the outbox from the PostgreSQL slot to Kafka (--kafka-brokers) or
RabbitMQ (--rabbitmq-url) until SIGTERM or SIGINT.`,
	Settings: RelaySettings(), Required: relayRequired, OneOf: brokerOneOf, Registry: Relay,
}

// Check is cdc-relay check.
var Check = &Command{
	Name: "cdc-relay check",
	Usage: `Usage: cdc-relay check [flags]

Preflight with the settings of cdc-relay run: checks PostgreSQL (wal_level,
the role, the publication, the slot, the tables' columns), Kafka, the
registry and the .avsc files, reading only catalogs and changing nothing.
With --rabbitmq-url it checks RabbitMQ instead of Kafka: the connection,
the vhost permissions (declare, publish), the exchange's type and
durability, and the checkpoint and dead-letter streams.
One line per check (ok, WARN, FAIL with the fix); exit 1 on any failure.`,
	Settings: RelaySettings(), Required: relayRequired, OneOf: brokerOneOf, Registry: Relay,
}

// Status is cdc-relay status.
var Status = &Command{
	Name: "cdc-relay status",
	Usage: `Usage: cdc-relay status [flags]

Prints the slot's row of pg_replication_slots (a catalog query, never the
outbox table) and its lag in bytes. Exit 1 when the slot is missing or lost.
For a missing or lost slot it says what cdc-relay run does: with
--kafka-brokers it reads the checkpoint topic (creating nothing), and a
checkpoint for the slot means run exits 3, with the repair (slot recreate
--accept-gap, then replay --since); no checkpoint means a first start.
With --rabbitmq-url it reads the checkpoint streams
(--rabbitmq-checkpoint-stream) instead.`,
	Settings: append(names(ConfigFile, PGURL, Slot, KafkaBrokers, CheckpointTopic, RelayID, KafkaTLS, KafkaTLSCAFile, KafkaTLSCertFile, KafkaTLSKeyFile, KafkaSASLMechanism, KafkaSASLUsername, KafkaSASLPassword,
		RabbitMQURL, RabbitMQCheckpointStream), RabbitMQTLSSettings...),
	Required: names(PGURL),
	Actions:  []Action{FlagJSON.With("print JSON on stdout ({\"slot\": ..., \"exists\": false} for a missing slot)")},
	Registry: Relay,
}

// SchemasCheck is cdc-relay schemas check.
var SchemasCheck = &Command{
	Name: "cdc-relay schemas check",
	Usage: `Usage: cdc-relay schemas check [flags]

A CI gate: tests the local .avsc files against the registry's compatibility
rules, registering nothing. Exit 1 naming each incompatible subject.`,
	Settings: names(ConfigFile, SchemaRegistryURL, SchemasDir, SubjectStrategy, TopicTemplate, AggregateTypes, SchemaRegistryCAFile),
	Required: names(SchemaRegistryURL, SchemasDir),
	Registry: Relay,
}

// Healthcheck is cdc-relay healthcheck.
var Healthcheck = &Command{
	Name: "cdc-relay healthcheck",
	Usage: `Usage: cdc-relay healthcheck [flags]

Exits 0 when the relay serving on --metrics-addr answers /healthz (for a
Docker HEALTHCHECK in an image without a shell); 1 otherwise.`,
	Settings: names(ConfigFile, MetricsAddr), Registry: Relay,
}

// Replay is cdc-relay replay.
var Replay = &Command{
	Name: "cdc-relay replay",
	Usage: `Usage: cdc-relay replay --since TIME [--until TIME] [flags]
       cdc-relay replay --from-id ID [--to-id ID] [flags]

Re-publishes rows of the outbox table to Kafka, to repair a gap (a lost or
recreated slot). It reads the table with SELECT (the only command that does;
run never reads it), never touches the slot, and turns each row into the
record run would have published: the same topic, key, partition, headers,
id and value bytes. Invalid rows go to the dead-letter topic as in run. It
exits 0 once Kafka acknowledged every record. With --rabbitmq-url it
publishes to the exchange as run does, and exits 0 once RabbitMQ
confirmed every message.

TIME is RFC 3339 (2026-12-01T10:00:00Z) or a duration back from now (90m, 36h).
--since or --from-id is required; given together, a row must match both.
Rows are published in created_at then id order (id order without --since).
created_at defaults to now(), the transaction's start: start --since a
margin (e.g. 15m) before the last commit you trust.

The record timestamp is the --timestamp-column, else created_at (run uses
the commit time, which the table does not keep); so is ce_time.

Every setting is one of cdc-relay run and resolves as there. With several
tables configured, it reads each of them in --table order, with the same
window, in one snapshot; give it --table to read one of them.

Prints one line per acknowledged event ("published id=... topic=... key=..."
or "dead-lettered id=... topic=... key=... reason=..."; with --rabbitmq-url
"published id=... exchange=... routing_key=..." or "dead-lettered id=...
dlq_stream=... reason=...") and a summary line per table (with several
tables, then their total).
Exit codes: 0 done, 1 a runtime failure, 2 bad settings.`,
	Settings: RelaySettings(), Required: relayRequired, OneOf: brokerOneOf, Registry: Relay,
	Actions: []Action{
		FlagSince.With("rows whose created_at column (columns: created_at:) is at or after TIME"),
		FlagUntil.With("and before TIME (default: no end)"),
		FlagFromID.With("rows whose id is at least ID (an integer, or a UUIDv7: random v4 uuids have no order and are refused)"),
		FlagToID.With("and at most ID (default: no end)"),
		FlagDryRun.With("build every record, print what would be published, publish nothing"),
	},
}

// SlotRecreate is cdc-relay slot recreate.
var SlotRecreate = &Command{
	Name: "cdc-relay slot recreate",
	Usage: `Usage: cdc-relay slot recreate --accept-gap [--reason TEXT] [flags]

Creates the relay's slot again after it was dropped, lost in a failover or
invalidated, and records the accepted gap in the checkpoint topic: from the
last confirmed LSN and commit time to the new slot's start, with when, by
whom and why. Events committed in between were never read from the slot:
publish them again with cdc-relay replay --since TIME. Then start the relay
(cdc-relay run) as usual. Every setting is one of cdc-relay run and
resolves as there; the relay must be stopped, so that the slot is not in use.
With --rabbitmq-url the gap is recorded in the checkpoint streams
(--rabbitmq-checkpoint-stream).`,
	Settings: RelaySettings(), Required: relayRequired, OneOf: brokerOneOf, Registry: Relay,
	Actions: []Action{
		FlagAcceptGap.With("say that events committed after the last checkpoint may be missing from Kafka until replayed (required)"),
		FlagReason.With("why, recorded with the gap (e.g. an incident id)"),
	},
}

// Tail is cdc-relay tail.
var Tail = &Command{
	Name: "cdc-relay tail",
	Usage: `Usage: cdc-relay tail [flags] [TOPIC...]

Prints the records of Kafka topics, one JSON object per line: topic,
partition, offset, timestamp (RFC 3339), key, headers (an object; a name
that repeats gets an array of its values), value, schema_id and subject.
A Confluent-framed value (or key) is decoded through the registry to plain
JSON, whatever schema id it names; a JSON value is embedded as JSON; other
UTF-8 is a string; anything else is {"base64": "..."}. schema_id and
subject are the value's (null when it is not framed). Keys are read as
--key-format says the relay writes them: string keys stay strings.

With no TOPIC, it reads every topic of the cluster that --topic-template
can name, and the --dlq-topic. It reads committed records only
(read_committed), joins no consumer group and commits nothing.

It starts at the end of each partition and prints what arrives (as with
--follow), or with --from-beginning, --since or --offset it prints what
the partitions held when it started and exits, unless --follow keeps it
reading. --count N stops after N records. Exit codes: 0 done or
interrupted, 1 Kafka or the registry failed, 2 bad settings.

With --rabbitmq-url and no STREAM, it follows --rabbitmq-exchange through
a temporary exclusive queue bound with --pattern (at most 10,000 messages,
the oldest dropped, so that a slow tail never raises a memory alarm), from
the moment it starts: --from-beginning, --since and --offset are exit 2
there. With a STREAM argument (e.g. the --rabbitmq-dlq-stream) it reads
that stream without consuming it, from where it is told. The lines carry
exchange, routing_key and the AMQP properties too.`,
	Args:     "TOPIC|STREAM",
	Settings: append(names(ConfigFile, KafkaBrokers, KafkaTLS, KafkaTLSCAFile, KafkaTLSCertFile, KafkaTLSKeyFile, KafkaSASLMechanism, KafkaSASLUsername, KafkaSASLPassword, RabbitMQURL, RabbitMQExchange), append(RabbitMQTLSSettings, names(SchemaRegistryURL, SchemaRegistryCAFile, TopicTemplate, DLQTopic, KeyFormat)...)...),
	OneOf:    brokerOneOf,
	Registry: Relay,
	Actions: []Action{
		FlagFromBeginning.With("start at the first record of each partition"),
		FlagSince.With("start at the first record whose timestamp is at or after TIME: RFC 3339 (2026-12-01T10:00:00Z) or a duration back from now (90m)"),
		FlagOffset.With("read only partition P, from offset O (for each TOPIC)"),
		FlagCount.With("stop after N records"),
		FlagFollow.With("keep reading new records (and new topics and partitions) until SIGINT or SIGTERM"),
		FlagPretty.With("a layout for people: a line per record, then its key, headers and indented value"),
		FlagPattern.With("RabbitMQ: the binding pattern of tail's queue on the exchange (default #: every routing key)"),
	},
}

// dlqKafkaSettings are the settings that reach the broker and read the
// DLQ: Kafka's dead-letter topic, or RabbitMQ's dead-letter stream.
var dlqKafkaSettings = append(names(ConfigFile, KafkaBrokers, DLQTopic, KafkaTLS, KafkaTLSCAFile, KafkaTLSCertFile, KafkaTLSKeyFile, KafkaSASLMechanism, KafkaSASLUsername, KafkaSASLPassword,
	RabbitMQURL, RabbitMQDLQStream), append(RabbitMQTLSSettings, names(LogFormat, LogLevel)...)...)

// DLQStats is cdc-relay dlq stats.
var DLQStats = &Command{
	Name: "cdc-relay dlq stats",
	Usage: `Usage: cdc-relay dlq stats [--json] [flags]

Reads the dead-letter topic (--dlq-topic) from its first offset to its end as
of the start, without joining a consumer group (it commits nothing), and
counts the pending dead letters, the ones at or after the committed offsets
of --group (all of them when the group has none), by error kind (the
error_kind header), by event type and by age (the record timestamp, which
is the commit time), and how many of them a redrive re-appended
(redrive_attempts). A letter retired with cdc-relay dlq retire (its record
in --dlq-retired-topic) is not pending: it is counted as retired. Exit 0;
1 when the topic cannot be read. With --rabbitmq-url it reads the
--rabbitmq-dlq-stream, and the tools' positions in <stream>.positions
(--group and --dlq-retired-topic are exit 2 there).`,
	Settings: append(append([]string(nil), dlqKafkaSettings...), names(Group, DLQRetiredTopic)...), OneOf: brokerOneOf, Registry: Relay,
	Actions: []Action{FlagJSON.With("print one JSON object on stdout instead of the table")},
}

// DLQRedrive is cdc-relay dlq redrive.
var DLQRedrive = &Command{
	Name: "cdc-relay dlq redrive",
	Usage: `Usage: cdc-relay dlq redrive [--dry-run] [--id ID] [--event-type T] [--kind K] [--since TIME] [--follow] [flags]

Sends dead letters on, once their cause is fixed (a schema deployed, a
setting changed). It reads --dlq-topic in the consumer group --group and
builds each letter again with today's row → record step: today's schemas
and settings, the original key, id, headers and commit-time timestamp, to
the topic its aggregate type routes to. A letter that still fails is
appended to the dead-letter topic again with a redrive_attempts header one
higher, so that the next run sees it again. The group's offset moves past a
letter only after Kafka acknowledged what became of it (the redriven record,
or the re-appended letter): a kill repeats at most the letters in flight.

It stops at the topic's end offsets as they were when it started, unless
--follow. It reads the catalog of the outbox tables as run does (--pg-url),
and takes every setting of cdc-relay run. A letter the filters leave out
is appended to the topic again unchanged (so that a later run without the
filters sees it), then the group's offset moves past it; one that keeps
too little to be built again (or whose table is not in --table) is
appended again unchanged too, so that it stays pending until a later run
builds it or cdc-relay dlq retire retires it. A letter retired with
cdc-relay dlq retire is passed over: the offset moves past it, nothing is
written. All of them are counted as skipped.

An unconfigured_table letter (a row of a table the publication published
but --table did not name) is built as a live row of its table would be,
once the table is in --table; until then it is skipped.

TIME is RFC 3339 (2026-12-01T10:00:00Z) or a duration back from now (90m).
Prints one line per letter and a summary ("redriven N, still failing M,
skipped K"). Exit codes: 0 when nothing still fails, 1 when a letter still
fails or on a runtime failure, 2 bad settings.

With --rabbitmq-url it reads the --rabbitmq-dlq-stream without consuming
it. It publishes each pending unroutable letter again, as it was, an
invalid_routing_key one with the key --routing-key gives it now, and
builds each other letter again through today's row → record step, which
it publishes as run does (--routing-key, the properties and headers,
--value-format); all to --rabbitmq-exchange with mandatory and confirms.
What was redriven is kept in the stream <stream>.positions; a letter
still invalid, returned or nacked stays pending, in place (no
redrive_attempts). --follow keeps reading the stream. --group and
--dlq-retired-topic are exit 2 there.`,
	Settings: append(RelaySettings(), names(Group, DLQRetiredTopic)...), Required: relayRequired, OneOf: brokerOneOf, Registry: Relay,
	Actions: []Action{
		FlagDryRun.With("build every letter and print what would become of it; produce and commit nothing"),
		FlagID.With("only the letters with this id header"),
		FlagEventType.With("only the letters of this event type"),
		FlagKind.With("only the letters whose error_kind is KIND (schema_mismatch, no_schema, unknown_field, ...)"),
		FlagSince.With("only the letters whose timestamp (the commit time) is at or after TIME"),
		FlagFollow.With("keep running after the end offsets of the start, redriving letters as they arrive, until SIGTERM or SIGINT"),
	},
}

// DLQRetire is cdc-relay dlq retire.
var DLQRetire = &Command{
	Name: "cdc-relay dlq retire",
	Usage: `Usage: cdc-relay dlq retire --reason TEXT [--dry-run] [--id ID] [--event-type T] [--kind K] [--since TIME] [flags]

Marks pending dead letters as handled, for those whose only fix is to write
the event again (e.g. with cdc-relay replay, or by hand): it reads
--dlq-topic from the committed offsets of --group to its end as of the
start, without joining the group, and for each letter the filters keep
that is not retired yet writes a retirement record to --dlq-retired-topic
(a compacted topic, created if missing): the letter's topic, topic id,
partition, offset, id, event type, error kind, the reason, when and by
whom. dlq stats counts a retired letter as retired, not pending, and dlq
redrive passes over it. The letters themselves stay in the topic.

TIME is RFC 3339 (2026-12-01T10:00:00Z) or a duration back from now (90m).
Prints one line per letter ("retired id=... partition=... offset=...") and
a summary ("retire: retired N, already retired M"). Exit codes: 0 done,
1 a runtime failure, 2 bad settings. With --rabbitmq-url the retirements
are kept in the stream <--rabbitmq-dlq-stream>.positions.`,
	Settings: append(append([]string(nil), dlqKafkaSettings...), names(Group, DLQRetiredTopic)...), OneOf: brokerOneOf, Registry: Relay,
	Actions: []Action{
		FlagReason.With("why the letters need nothing more (an incident id, \"replayed with cdc-relay replay\"), kept in each retirement record (required)"),
		FlagDryRun.With("print what would be retired; write nothing"),
		FlagID.With("only the letters with this id header"),
		FlagEventType.With("only the letters of this event type"),
		FlagKind.With("only the letters whose error_kind is KIND (schema_mismatch, unconfigured_table, ...)"),
		FlagSince.With("only the letters whose timestamp (the commit time) is at or after TIME"),
	},
}

// Commands are every command that resolves settings, for tests and docs.
func Commands() []*Command {
	return []*Command{Run, Check, Status, SchemasCheck, Healthcheck, Replay, SlotRecreate, Tail, DLQStats, DLQRedrive, DLQRetire}
}
