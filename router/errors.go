package router

import "errors"

// ErrInvalidTopic means a topic name Kafka would reject.
var ErrInvalidTopic = errors.New("invalid topic name")

// ErrHeadersNotObject means the headers column holds JSON that is not an object.
var ErrHeadersNotObject = errors.New("headers column is not a JSON object")

// ErrBadJSON means the headers column is not valid JSON.
var ErrBadJSON = errors.New("headers column is not valid JSON")

// ErrReservedHeader means the headers column has a top-level key id,
// event_type or aggregate_type. The relay sets those headers from the row;
// a second "id" header would make consumers that read the last header of a
// name (Java's Headers.lastHeader) deduplicate on the row's value instead of
// the outbox id, so such a row is an invalid event.
var ErrReservedHeader = errors.New("a header the relay reserves for the outbox id, event_type and aggregate_type")
