package replication

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The SQLSTATEs no retry fixes.
const (
	codeInvalidPassword      = "28P01" // invalid_password
	codeInvalidAuthorization = "28000" // invalid_authorization_specification: no such role, no LOGIN, pg_hba.conf
	codeInvalidCatalogName   = "3D000" // invalid_catalog_name: no such database
	codeInsufficientPrivs    = "42501" // insufficient_privilege: no REPLICATION, no CONNECT, not the table's owner
)

// pgURLSetting names where the connection string comes from, for fixes.
const pgURLSetting = "--pg-url (CDC_RELAY_PG_URL or CDC_RELAY_PG_URL_FILE)"

// CheckWALLevel returns an *UnrecoverableError unless the server's
// wal_level is logical. The relay runs it on a primary before it creates
// anything: on wal_level = replica the slot could not be created, and a
// publication created first would be left behind.
func CheckWALLevel(ctx context.Context, conn *pgx.Conn) error {
	var level string
	if err := conn.QueryRow(ctx, `SELECT pg_catalog.current_setting('wal_level')`).Scan(&level); err != nil {
		return fmt.Errorf("read wal_level: %w", err)
	}
	if level == "logical" {
		return nil
	}
	return &UnrecoverableError{
		Cause: fmt.Sprintf("wal_level is %q: logical decoding needs wal_level = logical", level),
		Fix:   "set wal_level = logical in postgresql.conf (or ALTER SYSTEM SET wal_level = logical) and restart PostgreSQL",
	}
}

// Unrecoverable returns err as an *UnrecoverableError when it is, or wraps,
// the server's answer that no retry fixes: SQLSTATE 28P01, 28000, 3D000 or
// 42501; nil otherwise. user and database name the role and the database
// in the fix when err does not (a query's error); a failed connection
// names its own.
//
// A failed connection counts only when every attempt it made ended with
// such an answer, apart from the refused TLS attempts of sslmode=prefer
// that a plain one follows. pgconn tries a multi-host URL's hosts in turn
// and stops at 28P01, 3D000 and 42501, which come from the catalog that
// physical standbys share with their primary; it goes on after a 28000,
// which may come from one server's own pg_hba.conf. So a host that was
// unreachable, timed out or is a standby keeps the relay retrying (or
// waiting for a promotion), however the other hosts answered.
func Unrecoverable(err error, user, database string) *UnrecoverableError {
	var u *UnrecoverableError
	if errors.As(err, &u) {
		return u
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		var answer *pgconn.PgError
		for _, a := range connectAttempts(ce) {
			var pgErr *pgconn.PgError
			switch {
			case errors.As(a, &pgErr) && unrecoverableCode(pgErr.Code):
				answer = pgErr
			case refusedTLS(a):
			default:
				return nil
			}
		}
		if answer == nil {
			return nil
		}
		if ce.Config != nil {
			user, database = ce.Config.User, ce.Config.Database
		}
		return &UnrecoverableError{Cause: pgCause(answer), Fix: pgFix(answer, user, database, true), Err: err}
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && unrecoverableCode(pgErr.Code) {
		return &UnrecoverableError{Cause: pgCause(pgErr), Fix: pgFix(pgErr, user, database, false), Err: err}
	}
	return nil
}

func unrecoverableCode(code string) bool {
	switch code {
	case codeInvalidPassword, codeInvalidAuthorization, codeInvalidCatalogName, codeInsufficientPrivs:
		return true
	}
	return false
}

func pgCause(e *pgconn.PgError) string {
	return fmt.Sprintf("PostgreSQL answered: %s (SQLSTATE %s)", e.Message, e.Code)
}

// pgFix says what to do about an unrecoverable answer, to connecting
// (connect) or to a query. The server's messages are English unless
// lc_messages says otherwise: the distinctions by message fall back to a
// fix that lists every cause.
func pgFix(e *pgconn.PgError, user, database string, connect bool) string {
	role, db := quoteIdent(user), quoteIdent(database)
	if role == "" {
		role = "<role>"
	}
	if db == "" {
		db = "<database>"
	}
	msg := strings.ToLower(e.Message)
	switch e.Code {
	case codeInvalidPassword:
		return "check the password in " + pgURLSetting + ", or set the role's password to it: ALTER ROLE " + role + " PASSWORD '...'"
	case codeInvalidCatalogName:
		return "create the database, or correct the database name in " + pgURLSetting
	case codeInvalidAuthorization:
		switch {
		case strings.Contains(msg, "does not exist"):
			return "correct the user in " + pgURLSetting + ", or create the role: CREATE ROLE " + role + " LOGIN REPLICATION PASSWORD '...'"
		case strings.Contains(msg, "not permitted to log in"):
			return "ALTER ROLE " + role + " LOGIN, or correct the user in " + pgURLSetting
		case strings.Contains(msg, "pg_hba.conf"):
			return "add a line for this host, user and database to pg_hba.conf on the server and reload it (SELECT pg_reload_conf()), or correct " + pgURLSetting
		}
		return "check the user in " + pgURLSetting + ": the role must exist and have LOGIN, and pg_hba.conf must allow this host, user and database"
	}
	switch {
	case strings.Contains(msg, "replication") || strings.Contains(msg, "wal sender") || strings.Contains(msg, "walsender"):
		return "give the role the REPLICATION attribute: ALTER ROLE " + role + " WITH REPLICATION"
	case strings.Contains(msg, "must be owner"):
		return "creating the publication needs ownership of the outbox tables: make " + role + " their owner, or have an admin run CREATE PUBLICATION ... FOR TABLE ... WITH (publish = 'insert', publish_via_partition_root = true) and keep --publication (docs/OPERATIONS.md, \"Security\")"
	case strings.Contains(msg, "for database") && connect:
		return "GRANT CONNECT ON DATABASE " + db + " TO " + role
	case strings.Contains(msg, "for database"):
		return "creating the publication needs CREATE on the database: GRANT CREATE ON DATABASE " + db + " TO " + role +
			", or have an admin run CREATE PUBLICATION ... FOR TABLE ... WITH (publish = 'insert', publish_via_partition_root = true) and keep --publication (docs/OPERATIONS.md, \"Security\")"
	}
	return "grant " + role + " what the relay needs: REPLICATION (ALTER ROLE " + role + " WITH REPLICATION), CONNECT on the database, and ownership of the outbox tables to create the publication; cdc-relay check lists what is missing"
}

var plainIdent = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// quoteIdent quotes a role name only when SQL needs it.
func quoteIdent(name string) string {
	if name == "" || plainIdent.MatchString(name) {
		return name
	}
	return pgx.Identifier{name}.Sanitize()
}

// connectAttempts lists the attempts of a failed connection, one error
// each, in the order pgconn made them: per host, with sslmode=prefer, a
// TLS attempt and then a plain one.
func connectAttempts(ce *pgconn.ConnectError) []error {
	inner := ce.Unwrap()
	if inner == nil {
		return nil
	}
	for e := inner; e != nil; e = errors.Unwrap(e) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			return j.Unwrap()
		}
	}
	return []error{inner}
}

// refusedTLS reports whether the attempt failed because the server does
// not do TLS: under sslmode=prefer a plain attempt to the same server
// follows, so the refusal is never the cause.
func refusedTLS(err error) bool {
	return strings.Contains(err.Error(), "server refused TLS connection")
}

// ConnectCause formats a failed connection root cause first: pgconn's own
// message lists the attempts in order, so with sslmode=prefer it begins
// with the refused TLS attempt, whatever the plain attempt after it met.
// ConnectCause puts the last attempt first, then the others from the most
// recent, leaves out the refused TLS attempts that were followed by
// another, and ends with the user and database. Other errors keep their
// message.
func ConnectCause(err error) string {
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) {
		return err.Error()
	}
	attempts := connectAttempts(ce)
	if len(attempts) == 0 {
		return err.Error()
	}
	var parts []string
	for i := len(attempts) - 1; i >= 0; i-- {
		if i < len(attempts)-1 && refusedTLS(attempts[i]) {
			continue
		}
		parts = append(parts, attempts[i].Error())
	}
	msg := strings.Join(parts, "; ")
	if ce.Config != nil {
		msg += fmt.Sprintf(" (user=%s database=%s)", ce.Config.User, ce.Config.Database)
	}
	return msg
}

// connectFailure is a failed connection reported root cause first; it
// wraps pgconn's error for errors.Is and errors.As.
type connectFailure struct {
	what string
	err  error
}

func (e *connectFailure) Error() string { return e.what + ": " + ConnectCause(e.err) }
func (e *connectFailure) Unwrap() error { return e.err }

// errorKey is what tells one error from another for logging: its cause and
// its message without numbers, which differ from attempt to attempt
// (a local port, a pid, a duration).
func errorKey(cause string, err error) string {
	return cause + " " + digits.ReplaceAllString(err.Error(), "#")
}

var digits = regexp.MustCompile(`[0-9]+`)

// maxLoggedErrors bounds the distinct errors Run remembers having logged.
const maxLoggedErrors = 64

// unrecoverable returns err as an *UnrecoverableError (see Unrecoverable),
// having logged it and marked the stream halted; nil for an error to
// retry. A standby's answers (waiting for a promotion, the slot active in
// another process) are never unrecoverable.
func (s *Stream) unrecoverable(err error) *UnrecoverableError {
	if err == nil || errors.Is(err, ErrWaitingPromotion) || errors.Is(err, ErrSlotActive) {
		return nil
	}
	var user, database string
	if cfg, perr := pgconn.ParseConfig(s.cfg.URL); perr == nil {
		user, database = cfg.User, cfg.Database
	}
	u := Unrecoverable(err, user, database)
	if u == nil {
		return nil
	}
	cause := u.Error()
	s.stats.haltCause.Store(&cause)
	s.stats.state.Store(int32(StateHalted))
	s.log.Error("exit: no retry can fix this", "err", cause)
	return u
}
