package inbox

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

func quoteTable(name string) (string, error) {
	parts := strings.Split(name, ".")
	for _, p := range parts {
		if p == "" || len(parts) > 2 {
			return "", &ConfigError{"Table", fmt.Sprintf("%q: want table or schema.table", name)}
		}
	}
	return pgx.Identifier(parts).Sanitize(), nil
}

// Cleanup deletes this consumer's marks older than Config.Retention (or
// olderThan, when positive), Config.CleanupBatch rows per DELETE and
// transaction, until none are left; it never runs one huge DELETE. It
// returns the rows deleted.
func (c *Consumer[T]) Cleanup(ctx context.Context, olderThan time.Duration) (int64, error) {
	if olderThan <= 0 {
		olderThan = c.cfg.Retention
	}
	if olderThan <= 0 {
		return 0, &ConfigError{"Retention", "Cleanup needs a positive age"}
	}
	q := fmt.Sprintf(`DELETE FROM %[1]s WHERE ctid = ANY (ARRAY(
		SELECT ctid FROM %[1]s WHERE consumer = $1 AND processed_at < now() - $2::interval LIMIT $3))`, c.table)
	age := fmt.Sprintf("%d microseconds", olderThan.Microseconds())
	var total int64
	for {
		tx, err := c.begin(ctx)
		if err != nil {
			return total, fmt.Errorf("inbox: cleanup: %w", err)
		}
		n, err := tx.exec(ctx, q, c.cfg.Consumer, age, c.cfg.CleanupBatch)
		if err == nil {
			err = tx.commit(ctx)
		}
		if err != nil {
			tx.rollback(ctx)
			return total, fmt.Errorf("inbox: cleanup: %w", err)
		}
		total += n
		if n < int64(c.cfg.CleanupBatch) {
			return total, nil
		}
	}
}

func (c *Consumer[T]) cleanupLoop(ctx context.Context) {
	t := time.NewTicker(c.cfg.CleanupInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := c.Cleanup(ctx, 0)
		if err != nil && ctx.Err() == nil {
			c.log.Warn("processed_messages cleanup failed", "error", err)
		} else if n > 0 {
			c.log.Info("processed_messages cleaned up", "deleted", n, "older_than", c.cfg.Retention)
		}
	}
}
