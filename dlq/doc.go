// Package dlq is `cdc-relay dlq`: the operator's tools for the dead-letter
// topic (--dlq-topic).
//
// In: a relay.Config parsed and checked by the command line, the Filters
// of its action flags, and a consumer group that marks what is done.
// Out: CountLetters counts the pending letters by error kind, event type
// and age (dlq stats); Retirer marks letters handled with a reason kept in
// --dlq-retired-topic (dlq retire); Redrive builds each letter again
// through today's row → record step and sends it on, or back to the
// dead-letter topic, committing the group's offsets after Kafka
// acknowledged a batch (dlq redrive). Redrive returns the command's exit
// code and prints its lines and its failure on the writers it is given.
// Owns: its Kafka clients, the retirement record's format, and redrive's
// own decoder of messages and unconfigured_table letters.
//
// With RabbitMQ (RabbitMQConfig): CountRabbitMQ, RabbitRetirer and
// RedriveRabbitMQ read the dead-letter stream without consuming it, and
// keep what they redrove or retired in a positions stream (RabbitPosition),
// in place of the group and the retired topic. RedriveRabbitMQ sends
// unroutable letters as they were published and builds the others again
// through the same row → record step as Redrive (rowStep), publishing them
// as run does; a letter that still fails stays pending in place. With
// Follow it reconnects after a lost connection and reads on after the last
// letter it handled (rabbitmqfollow.go).
package dlq
