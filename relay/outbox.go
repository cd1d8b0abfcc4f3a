package relay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	recordpkg "github.com/cdc-relay/cdc-relay/record"
	"github.com/cdc-relay/cdc-relay/replication"
	"github.com/cdc-relay/cdc-relay/schemaregistry"
)

// ParseTime reads a TIME setting (--since, --until) named flagName: RFC 3339, or a duration back from now.
func ParseTime(flagName, s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC(), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return time.Time{}, ConfigErr(flagName, "%q is neither an RFC 3339 time (2026-12-01T10:00:00Z) nor a duration back from now (90m, 36h)", s)
	}
	if d < 0 {
		return time.Time{}, ConfigErr(flagName, "%q is a negative duration: give how long ago, e.g. 90m", s)
	}
	return now.Add(-d).UTC(), nil
}

// ConnectOutbox opens the connection replay and dlq redrive read the
// outbox tables and the catalog with. Its results are
// text (the simple protocol), under DateStyle ISO and TimeZone UTC, as the
// replication connection sets them: the values are the bytes pgoutput
// sends for the same row.
func ConnectOutbox(ctx context.Context, url string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, ConfigErr("pg-url", "%s", RedactErr(err))
	}
	cfg.RuntimeParams["DateStyle"] = "ISO"
	cfg.RuntimeParams["TimeZone"] = "UTC"
	if cfg.RuntimeParams["application_name"] == "" {
		cfg.RuntimeParams["application_name"] = replication.AppName + " replay"
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = 10 * time.Second
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	return conn, nil
}

// Typmods reads the type modifiers of the table's columns from the catalog:
// the ones pgoutput's Relation message carries (a timestamp's precision).
func Typmods(ctx context.Context, conn *pgx.Conn, oid uint32) (map[string]int32, error) {
	rows, err := conn.Query(ctx, `SELECT attname, atttypmod FROM pg_catalog.pg_attribute
		WHERE attrelid = $1::int8::oid AND attnum > 0 AND NOT attisdropped`, int64(oid))
	if err != nil {
		return nil, fmt.Errorf("read column type modifiers: %w", err)
	}
	m := map[string]int32{}
	var name string
	var mod int32
	_, err = pgx.ForEachRow(rows, []any{&name, &mod}, func() error { m[name] = mod; return nil })
	if err != nil {
		return nil, fmt.Errorf("read column type modifiers: %w", err)
	}
	return m, nil
}

// Token prints bytes greppably: as they are when they are printable text
// without spaces or quotes, else Go-quoted.
func Token(b []byte) string {
	if len(b) > 0 && utf8.Valid(b) && !strings.ContainsFunc(string(b), func(r rune) bool {
		return r <= ' ' || r == '"' || r == 0x7f || r == utf8.RuneError
	}) {
		return string(b)
	}
	return strconv.Quote(string(b))
}

// FailExit reports err in one line on stderr and returns its exit code: 2
// for a setting, an incompatible schema or a flag that does not fit the
// table, else 1 (prefix, then what failed).
func FailExit(stderr io.Writer, prefix, what string, err error) int {
	var cerr *ConfigError
	var ferr *recordpkg.FlagError
	var incompatible *schemaregistry.IncompatibleError
	if errors.As(err, &cerr) || errors.As(err, &ferr) || errors.As(err, &incompatible) {
		fmt.Fprintf(stderr, "cdc-relay: %s\n", Redact(err.Error()))
		return ExitConfig
	}
	if what != "" {
		what += ": "
	}
	fmt.Fprintf(stderr, "%s%s%s\n", prefix, what, Redact(err.Error()))
	return ExitFailed
}
