package inbox

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"

	"github.com/jackc/pgx/v5/pgconn"
)

// transientError marks a handler's error as transient; see Transient.
type transientError struct{ err error }

func (e *transientError) Error() string { return e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }

// Transient marks err as transient: the event is retried with backoff and
// the failure does not count toward Config.MaxAttempts, as for a
// serialization failure. Use it for a downstream service's 503, a rate
// limit, a lock timeout. The waiting is bounded by Config.TransientTimeout.
// Transient(nil) is nil.
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return &transientError{err}
}

// errClass is how a failed attempt is retried.
type errClass uint8

const (
	// classCounted: the event failed; the attempt counts toward MaxAttempts.
	classCounted errClass = iota
	// classTransient: retried without counting, for TransientTimeout.
	classTransient
	// classOutage: the database is unreachable; waited out without bound.
	classOutage
)

// classify sorts a failed attempt's error. Lost connections (08xxx,
// 57P01 admin shutdown, 57P03 cannot connect now, a closed or reset
// socket) are outages; 40001 serialization failures, 40P01 deadlocks and
// errors marked with Transient are transient; anything else the handler
// returned counts. dbErr is true for an error of the inbox's own
// statements (begin, mark, commit), which never count: they are not the
// event's fault.
func classify(err error, dbErr bool) errClass {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case len(pe.Code) == 5 && pe.Code[:2] == "08", pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03":
			return classOutage
		case pe.Code == "40001", pe.Code == "40P01":
			return classTransient
		}
	} else if connectionLost(err) {
		return classOutage
	}
	var te *transientError
	if errors.As(err, &te) || dbErr {
		return classTransient
	}
	return classCounted
}

// connectionLost reports an error of a connection that broke or could not
// be made, rather than of a statement.
func connectionLost(err error) bool {
	var ce *pgconn.ConnectError
	var ne net.Error
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	case errors.As(err, &ce), errors.As(err, &ne), pgconn.SafeToRetry(err),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed),
		errors.Is(err, sql.ErrConnDone), errors.Is(err, driver.ErrBadConn):
		return true
	}
	var pgconnErr interface{ SafeToRetry() bool }
	return errors.As(err, &pgconnErr) && pgconnErr.SafeToRetry()
}
