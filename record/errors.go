package record

import "errors"

// HaltError is a Build error that no retry can fix: the registry refuses a
// schema as incompatible, or refuses the request itself (credentials, a
// subject it considers invalid). The relay halts with it instead of
// reconnecting; any other Build error is worth a reconnect.
type HaltError struct{ Err error }

func (e *HaltError) Error() string { return e.Err.Error() }
func (e *HaltError) Unwrap() error { return e.Err }

// IsHalt reports whether err, or an error it wraps, is a *HaltError.
func IsHalt(err error) bool {
	var h *HaltError
	return errors.As(err, &h)
}

// halt marks err as one that halts the relay.
func halt(err error) error { return &HaltError{Err: err} }
