package outbox

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// Tx is the caller's open transaction, the one that also holds the
// business change: a pgx.Tx or a *sql.Tx (database/sql with the pgx stdlib
// driver or any PostgreSQL driver). Anything with pgx's
// Exec(ctx, sql, args...) (pgconn.CommandTag, error) or database/sql's
// ExecContext(ctx, query, args...) (sql.Result, error) is accepted, except a
// *sql.DB, which would commit the event on its own.
type Tx any

type pgxExecer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

type sqlExecer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// exec runs one statement in tx.
func exec(ctx context.Context, tx Tx, query string, args []any) error {
	switch t := tx.(type) {
	case *sql.DB:
		return fmt.Errorf("%w: got *sql.DB, which commits each statement on its own; pass the *sql.Tx of the business change", ErrNotTx)
	case pgxExecer:
		_, err := t.Exec(ctx, query, args...)
		return err
	case sqlExecer:
		_, err := t.ExecContext(ctx, query, args...)
		return err
	case nil:
		return fmt.Errorf("%w: got nil", ErrNotTx)
	default:
		return fmt.Errorf("%w: got %T", ErrNotTx, tx)
	}
}
