package relay

import (
	"errors"
	"fmt"
	"regexp"

	"github.com/cdc-relay/cdc-relay/checkpoint"
	"github.com/cdc-relay/cdc-relay/internal/config"
	recordpkg "github.com/cdc-relay/cdc-relay/record"
	"github.com/cdc-relay/cdc-relay/replication"
)

// The process exit codes of cdc-relay. Only main exits; the packages return
// errors that ExitCode maps, or (the operator tools) these codes.
const (
	ExitOK     = 0
	ExitFailed = 1 // a runtime failure: a halt, a lost slot, an unusable slot; at once: an error no retry fixes (credentials, privileges, missing database, wal_level)
	ExitConfig = 2 // a bad or missing setting, schema or command line
	ExitGap    = 3 // events may be missing from Kafka: the slot is gone or invalidated (docs/OPERATIONS.md)
)

// ConfigError is a bad or missing setting, naming it; the process exits
// with code 2.
type ConfigError = config.Error

// ConfigErr is a *ConfigError for the setting key (its flag name, without
// dashes).
func ConfigErr(key, format string, args ...any) error {
	return &ConfigError{Key: key, Msg: fmt.Sprintf(format, args...)}
}

// IsConfigExit reports whether a fatal error of the stream is a
// configuration error: run exits 2 on it, naming the setting to fix.
func IsConfigExit(err error) bool {
	_, ok := ConfigExit(err)
	return ok
}

// ConfigExit is what run prints for a configuration error (the error, or
// for a server too old or a publication that does not fit, just that), and
// false for any other error.
func ConfigExit(err error) (string, bool) {
	var cerr *ConfigError
	var ferr *recordpkg.FlagError
	var perr *checkpoint.PolicyError
	var merr *checkpoint.MismatchError
	var tooOld *replication.ServerTooOldError
	var pubErr *replication.PublicationError
	switch {
	case errors.As(err, &cerr) || errors.As(err, &ferr) || errors.As(err, &perr) || errors.As(err, &merr):
		return Redact(err.Error()), true
	case errors.As(err, &tooOld):
		return tooOld.Error(), true
	case errors.As(err, &pubErr):
		return pubErr.Error(), true
	}
	return "", false
}

// IsGap reports whether err means events may be missing from Kafka: the
// slot is gone or invalidated, or Kafka holds events of a timeline the
// server no longer has. The relay exits 3 then; only an operator can decide
// how to go on (docs/OPERATIONS.md, "The slot is gone").
func IsGap(err error) bool {
	var gap *checkpoint.GapError
	return errors.As(err, &gap) || errors.Is(err, replication.ErrSlotDropped) || errors.Is(err, replication.ErrSlotLost)
}

// passwordInURL matches the password part of a URL's userinfo.
var passwordInURL = regexp.MustCompile(`(://[^:/@\s]*:)[^@\s]*@`)

// passwordInDSN matches password=... in a keyword/value DSN.
var passwordInDSN = regexp.MustCompile(`(password\s*=\s*)('[^']*'|\S+)`)

// Redact hides passwords in URLs and DSNs before they are logged.
func Redact(s string) string {
	s = passwordInURL.ReplaceAllString(s, "${1}xxxxx@")
	return passwordInDSN.ReplaceAllString(s, "${1}xxxxx")
}

// RedactErr is err's text, Redact-ed.
func RedactErr(err error) string { return Redact(err.Error()) }
