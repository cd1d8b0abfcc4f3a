package outbox

import "errors"

// ErrInvalidEvent is wrapped by every error Write and WriteBatch return for
// an event the relay would not publish: an empty aggregate type, aggregate
// id or event type, a payload that is not a JSON object, a reserved header
// name, or (with Config.Schemas) a payload that does not fit its event
// type's schema or an event type without a schema. Nothing was written.
var ErrInvalidEvent = errors.New("outbox: invalid event")

// ErrNotTx is returned for a nil transaction. Anything but a transaction
// (a pool, a connection, a *sql.DB) is refused by the compiler already:
// Write and WriteBatch take a pgx.Tx, WriteSQL and WriteBatchSQL a *sql.Tx.
var ErrNotTx = errors.New("outbox: tx must be an open pgx.Tx or *sql.Tx")
