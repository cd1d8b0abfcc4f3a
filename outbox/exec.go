package outbox

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// The transaction is checked by the compiler: Write and WriteBatch take a
// pgx.Tx, WriteSQL and WriteBatchSQL a *sql.Tx. A *pgxpool.Pool, a
// *pgx.Conn or a *sql.DB has no Commit of its own transaction and does not
// compile in their place: each statement it ran would commit on its own,
// outside the business change, which is what the outbox exists to prevent.

// execer runs one statement in the caller's transaction.
type execer func(ctx context.Context, query string, args []any) error

// pgxExec runs statements in tx.
func pgxExec(tx pgx.Tx) (execer, error) {
	if tx == nil {
		return nil, fmt.Errorf("%w: got a nil pgx.Tx", ErrNotTx)
	}
	return func(ctx context.Context, query string, args []any) error {
		_, err := tx.Exec(ctx, query, args...)
		return err
	}, nil
}

// sqlExec runs statements in tx.
func sqlExec(tx *sql.Tx) (execer, error) {
	if tx == nil {
		return nil, fmt.Errorf("%w: got a nil *sql.Tx", ErrNotTx)
	}
	return func(ctx context.Context, query string, args []any) error {
		_, err := tx.ExecContext(ctx, query, args...)
		return err
	}, nil
}
