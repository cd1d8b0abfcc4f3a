// Package rabbitmq publishes records to RabbitMQ so that nothing acked is
// lost, and acknowledges them as a contiguous prefix, as package publisher
// does for Kafka.
//
// In: Messages carrying the stream's sequence numbers, an exchange and a
// routing key. Out: Config.Acked calls for a contiguous prefix of sequence
// numbers, each covering only messages the broker confirmed as routed.
//
// One channel in confirm mode publishes every message with `mandatory` and
// streaming (deferred) confirmations, bounded in events and bytes: it never
// waits for one confirm before sending the next. What the broker answers:
//   - ack: delivered, unless a basic.return for the message came first.
//     Returns carry no delivery tag, so they are matched by message id, and
//     every return received is applied before the confirm that follows it.
//   - return, then ack: unroutable (no queue bound for the routing key). The
//     message goes to Config.Unroutable, which gives the dead letter to
//     publish in its place; the sequence number is acked when that dead
//     letter is confirmed.
//   - nack: refused (a full queue with overflow=reject-publish, or any queue
//     of several). Only nacked messages are sent again, after a backoff:
//     this is backpressure, never a dead letter. A re-sent message can land
//     behind later ones in the queues that refused it, and again in the
//     queues that took it; consumers dedupe by message id.
//   - the channel or the connection closes: the publisher reconnects with
//     backoff (amqp091-go's own recovery stays off), declares again, and
//     sends everything unconfirmed again, in sequence order, on the new
//     channel.
//   - connection.blocked (a memory or disk alarm): publishing pauses until
//     connection.unblocked; Health says since when.
//
// Sink is the relay's record sink on top of it: one Session (one Publisher,
// one connection) per replication session, each publisher.Record a
// message as Format says (the exchange, the --routing-key key, message_id,
// type, timestamp, content_type, app_id, the record's headers plus
// aggregate_id and aggregate_type), dead letters to a stream through the
// default exchange.
//
// Owns: the connection, its channel and the window of unconfirmed messages.
//
// For the operator tools: ReadStream reads a stream without consuming it,
// to an end marker it publishes with confirms, and Confirmer publishes a
// batch with mandatory and confirms and tells each message's fate.
package rabbitmq
