package record

import (
	"fmt"
	"strconv"

	"github.com/cdc-relay/cdc-relay/internal/civil"
)

// Type oids of the column types the relay converts (pg_type.oid; stable
// across PostgreSQL versions).
const (
	oidBool        = 16
	oidName        = 19
	oidInt8        = 20
	oidInt2        = 21
	oidInt4        = 23
	oidText        = 25
	oidJSON        = 114
	oidBpchar      = 1042
	oidVarchar     = 1043
	oidDate        = 1082
	oidTimestamp   = 1114
	oidTimestamptz = 1184
	oidUUID        = 2950
	oidJSONB       = 3802
	oidNumeric     = 1700
)

// headerConv appends a column's header text in Debezium's form. typmod is
// the column's type modifier (a timestamp's precision; -1 when none).
type headerConv func(dst, text []byte, typmod int32) ([]byte, error)

// headerConverter returns the converter for a column of the base type oid,
// or nil when the type has no header form.
func headerConverter(oid uint32) headerConv {
	switch oid {
	case oidText, oidVarchar, oidBpchar, oidName, oidUUID, oidInt2, oidInt4, oidInt8, oidJSON, oidJSONB, oidNumeric:
		// pgoutput's text is already Debezium's: uuids in lowercase,
		// integers in decimal, json as its text, numeric with its scale
		// (decimal.handling.mode=precise: 12.50).
		return appendAsIs
	case oidBool:
		return appendBool
	case oidTimestamptz:
		return appendZonedTimestamp
	case oidTimestamp:
		return appendMicroTimestamp
	case oidDate:
		return appendEpochDay
	}
	return nil
}

// HeaderTypes lists the types --header-columns supports, for messages.
const HeaderTypes = "text, varchar, char, name, uuid, smallint, integer, bigint, numeric, boolean, json, jsonb, timestamptz, timestamp or date"

// TimestampTypes lists the types --timestamp-column supports, for messages.
const TimestampTypes = "timestamptz, timestamp (read as UTC) or bigint (epoch milliseconds)"

func appendAsIs(dst, text []byte, _ int32) ([]byte, error) { return append(dst, text...), nil }

func appendBool(dst, text []byte, _ int32) ([]byte, error) {
	switch string(text) {
	case "t":
		return append(dst, "true"...), nil
	case "f":
		return append(dst, "false"...), nil
	}
	return dst, fmt.Errorf("%q is not a boolean", text)
}

// appendZonedTimestamp writes a timestamptz as Debezium's ZonedTimestamp:
// RFC 3339 in UTC with a "Z", with as many fraction digits as the column's
// precision (6 without one), zero-padded.
func appendZonedTimestamp(dst, text []byte, typmod int32) ([]byte, error) {
	t, err := parseTimestamp(text, true)
	if err != nil {
		return dst, err
	}
	digits := 6
	if typmod >= 0 && typmod < 6 {
		digits = int(typmod)
	}
	return t.appendRFC3339(dst, digits), nil
}

// appendMicroTimestamp writes a timestamp without time zone, read as UTC,
// as Debezium's adaptive time precision does: MicroTimestamp (epoch
// microseconds) for a precision of 4 to 6 or none, Timestamp (epoch
// milliseconds) for a precision of 0 to 3.
func appendMicroTimestamp(dst, text []byte, typmod int32) ([]byte, error) {
	t, err := parseTimestamp(text, false)
	if err != nil {
		return dst, err
	}
	if typmod >= 0 && typmod <= 3 {
		return strconv.AppendInt(dst, t.millis(), 10), nil
	}
	return strconv.AppendInt(dst, t.micros(), 10), nil
}

// appendEpochDay writes a date as Debezium's Date: days since the epoch.
func appendEpochDay(dst, text []byte, _ int32) ([]byte, error) {
	d, ok := civil.Date(text)
	if !ok || len(text) != 10 {
		return dst, fmt.Errorf("%q is not a date Kafka Connect can represent", text)
	}
	return strconv.AppendInt(dst, d, 10), nil
}

// timestampColumn converts a --timestamp-column value to epoch milliseconds.
type timestampColumn func(text []byte) (int64, error)

// timestampConverter returns the converter for a base type oid, or nil.
func timestampConverter(oid uint32) timestampColumn {
	switch oid {
	case oidTimestamptz:
		return func(text []byte) (int64, error) {
			t, err := parseTimestamp(text, true)
			return t.millis(), err
		}
	case oidTimestamp:
		return func(text []byte) (int64, error) {
			t, err := parseTimestamp(text, false)
			return t.millis(), err
		}
	case oidInt8:
		return func(text []byte) (int64, error) {
			ms, err := strconv.ParseInt(string(text), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%q is not epoch milliseconds", text)
			}
			return ms, nil
		}
	}
	return nil
}

// isInteger reports whether a base type oid is an integer type (its JSON
// key is a number, not a string).
func isInteger(oid uint32) bool { return oid == oidInt2 || oid == oidInt4 || oid == oidInt8 }
