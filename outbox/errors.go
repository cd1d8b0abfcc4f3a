package outbox

import "errors"

// ErrInvalidEvent is wrapped by every error Write and WriteBatch return for
// an event the relay would not publish: an empty aggregate type, aggregate
// id or event type, a payload that is not a JSON object, a reserved header
// name, or (with Config.Schemas) a payload that does not fit its event
// type's schema or an event type without a schema. Nothing was written.
var ErrInvalidEvent = errors.New("outbox: invalid event")

// ErrNotTx is returned when the tx argument is not something Write can run
// a statement in: a pgx.Tx (anything with pgx's Exec method) or a *sql.Tx
// (anything with ExecContext), and not a *sql.DB.
var ErrNotTx = errors.New("outbox: tx must be a pgx.Tx or *sql.Tx")
