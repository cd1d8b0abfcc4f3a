// Package router turns an outbox row into where and how it is published: the
// topic (from a template, default Debezium's outbox.event.{aggregate_type}),
// the key (aggregate_id) and the headers (id, event_type, aggregate_type and
// every top-level key of the row's headers jsonb). It is pure: no I/O.
// ParseTemplate, the template syntax, also parses RabbitMQ's routing key.
package router
