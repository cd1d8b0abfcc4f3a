package inbox

import (
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
)

// txn is one database transaction of the consumer, pgx or database/sql.
type txn[T any] interface {
	// mark inserts the marks of ids (distinct) and returns those that were
	// new: their handlers run, the others are duplicates.
	mark(ctx context.Context, ids []string) (map[string]bool, error)
	// exec runs a statement and returns the rows it affected.
	exec(ctx context.Context, query string, args ...any) (int64, error)
	handle(ctx context.Context, ev *Event[T]) error
	commit(ctx context.Context) error
	rollback(ctx context.Context)
}

// begin starts a transaction with Config.TxOptions.
func (c *Consumer[T]) begin(ctx context.Context) (txn[T], error) {
	if c.cfg.SQLDB != nil {
		tx, err := c.cfg.SQLDB.BeginTx(ctx, &sql.TxOptions{Isolation: sqlIsolation(c.cfg.TxOptions.IsoLevel)})
		if err != nil {
			return nil, err
		}
		return &sqlTxn[T]{c: c, tx: tx}, nil
	}
	tx, err := c.cfg.DB.BeginTx(ctx, c.cfg.TxOptions)
	if err != nil {
		return nil, err
	}
	return &pgxTxn[T]{c: c, tx: tx}, nil
}

func sqlIsolation(l pgx.TxIsoLevel) sql.IsolationLevel {
	switch l {
	case pgx.Serializable:
		return sql.LevelSerializable
	case pgx.RepeatableRead:
		return sql.LevelRepeatableRead
	case pgx.ReadCommitted:
		return sql.LevelReadCommitted
	case pgx.ReadUncommitted:
		return sql.LevelReadUncommitted
	}
	return sql.LevelDefault
}

type pgxTxn[T any] struct {
	c  *Consumer[T]
	tx pgx.Tx
}

func (t *pgxTxn[T]) mark(ctx context.Context, ids []string) (map[string]bool, error) {
	fresh := make(map[string]bool, len(ids))
	if len(ids) == 1 {
		tag, err := t.tx.Exec(ctx, t.c.markSQL, t.c.cfg.Consumer, ids[0])
		if err != nil {
			return nil, err
		}
		if tag.RowsAffected() == 1 {
			fresh[ids[0]] = true
		}
		return fresh, nil
	}
	// One statement for the batch, in a fixed order so that two batches
	// with common ids lock them alike.
	sorted := slices.Sorted(slices.Values(ids))
	rows, err := t.tx.Query(ctx, t.c.markBatchSQL, t.c.cfg.Consumer, sorted)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		fresh[id] = true
	}
	return fresh, rows.Err()
}

func (t *pgxTxn[T]) exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := t.tx.Exec(ctx, query, args...)
	return tag.RowsAffected(), err
}

func (t *pgxTxn[T]) handle(ctx context.Context, ev *Event[T]) error {
	return t.c.cfg.Handler(ctx, t.tx, ev)
}

func (t *pgxTxn[T]) commit(ctx context.Context) error { return t.tx.Commit(ctx) }
func (t *pgxTxn[T]) rollback(ctx context.Context)     { t.tx.Rollback(context.WithoutCancel(ctx)) }

type sqlTxn[T any] struct {
	c  *Consumer[T]
	tx *sql.Tx
}

// mark runs one INSERT per id: any database/sql driver takes it, where an
// array parameter would need the driver's support.
func (t *sqlTxn[T]) mark(ctx context.Context, ids []string) (map[string]bool, error) {
	fresh := make(map[string]bool, len(ids))
	for _, id := range slices.Sorted(slices.Values(ids)) {
		n, err := t.exec(ctx, t.c.markSQL, t.c.cfg.Consumer, id)
		if err != nil {
			return nil, err
		}
		if n == 1 {
			fresh[id] = true
		}
	}
	return fresh, nil
}

func (t *sqlTxn[T]) exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := t.tx.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("rows affected: %w", err)
	}
	return n, nil
}

func (t *sqlTxn[T]) handle(ctx context.Context, ev *Event[T]) error {
	return t.c.cfg.SQLHandler(ctx, t.tx, ev)
}

func (t *sqlTxn[T]) commit(context.Context) error { return t.tx.Commit() }
func (t *sqlTxn[T]) rollback(context.Context)     { t.tx.Rollback() }
