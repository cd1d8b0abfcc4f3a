package record

import (
	"errors"
	"fmt"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/civil"
)

// instant is a point in time parsed from PostgreSQL's text: seconds and
// microseconds since the epoch (UTC), and how many fraction digits the text
// had.
type instant struct {
	sec   int64
	micro int64
}

func (t instant) micros() int64 { return t.sec*1e6 + t.micro }
func (t instant) millis() int64 { return t.sec*1e3 + t.micro/1e3 } // floor: micro ≥ 0

// Time returns t as a time.Time in UTC.
func (t instant) Time() time.Time { return time.Unix(t.sec, t.micro*1e3).UTC() }

var errInfinite = errors.New("infinity has no Kafka timestamp")

// parseTimestamp parses a timestamp or timestamptz as pgoutput writes it
// under DateStyle ISO (the relay sets it on the replication connection):
// "2024-05-01 12:30:00.25" with, for timestamptz (zoned), an offset "+00",
// "+05:30" or "-03:30:17". Years of more than four digits are accepted;
// BC dates and ±infinity are errors.
func parseTimestamp(b []byte, zoned bool) (instant, error) {
	bad := func() (instant, error) {
		return instant{}, fmt.Errorf("%q is not a timestamp Kafka Connect can represent", b)
	}
	switch string(b) {
	case "infinity", "-infinity":
		return instant{}, fmt.Errorf("%q: %w", b, errInfinite)
	}
	// The year may have more than four digits.
	y := 0
	for y < len(b) && b[y] >= '0' && b[y] <= '9' {
		y++
	}
	if y < 4 || y > 9 || len(b) < y+15 || b[y] != '-' || b[y+3] != '-' || b[y+6] != ' ' {
		return bad()
	}
	year, _ := civil.Digits(b, y)
	month, ok1 := civil.Digits(b[y+1:], 2)
	day, ok2 := civil.Digits(b[y+4:], 2)
	if !ok1 || !ok2 || month < 1 || month > 12 || day < 1 || day > civil.DaysIn(year, month) {
		return bad()
	}
	nanos, n, ok := civil.Clock(b[y+7:])
	if !ok {
		return bad()
	}
	rest := b[y+7+n:]
	var offset int64
	if zoned {
		if len(rest) < 3 || (rest[0] != '+' && rest[0] != '-') {
			return bad()
		}
		sign := rest[0]
		h, ok := civil.Digits(rest[1:], 2)
		if !ok {
			return bad()
		}
		offset, rest = h*3600, rest[3:]
		for _, unit := range []int64{60, 1} { // :MM, then :SS
			if len(rest) < 3 || rest[0] != ':' {
				break
			}
			v, ok := civil.Digits(rest[1:], 2)
			if !ok || v > 59 {
				return bad()
			}
			offset, rest = offset+v*unit, rest[3:]
		}
		if sign == '-' {
			offset = -offset
		}
	}
	days := civil.DaysFromCivil(year, month, day)
	if len(rest) != 0 {
		return bad() // " BC", or anything else
	}
	return instant{sec: days*86400 + nanos/1e9 - offset, micro: nanos % 1e9 / 1e3}, nil
}

// appendRFC3339 writes t in UTC with a "Z" and exactly digits fraction
// digits (none, and no dot, for 0), as Debezium's ZonedTimestamp does for
// a column of that precision.
func (t instant) appendRFC3339(dst []byte, digits int) []byte {
	dst = t.Time().AppendFormat(dst, "2006-01-02T15:04:05")
	if digits > 0 {
		var frac [7]byte
		frac[0] = '.'
		v := t.micro
		for i := 6; i >= 1; i-- {
			frac[i] = byte('0' + v%10)
			v /= 10
		}
		dst = append(dst, frac[:1+digits]...)
	}
	return append(dst, 'Z')
}
