package schemaregistry

import (
	"math/big"
	"math/bits"
	"strconv"
)

// Parsers for the string forms of Avro logical types. They work on bytes,
// allocate nothing and accept exactly the documented forms.

func digits(b []byte, n int) (int64, bool) {
	if len(b) < n {
		return 0, false
	}
	var v int64
	for _, c := range b[:n] {
		if !isDigit(c) {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	return v, true
}

func isLeap(y int64) bool { return y%4 == 0 && (y%100 != 0 || y%400 == 0) }

func daysIn(y, m int64) int64 {
	switch m {
	case 2:
		if isLeap(y) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysFromCivil returns the days since 1970-01-01 of a proleptic Gregorian
// date.
func daysFromCivil(y, m, d int64) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 {
		era = (y - 399) / 400
	}
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// parseDate parses "YYYY-MM-DD" at the start of b into days since the epoch.
func parseDate(b []byte) (days int64, ok bool) {
	if len(b) < 10 || b[4] != '-' || b[7] != '-' {
		return 0, false
	}
	y, ok1 := digits(b, 4)
	m, ok2 := digits(b[5:], 2)
	d, ok3 := digits(b[8:], 2)
	if !ok1 || !ok2 || !ok3 || m < 1 || m > 12 || d < 1 || d > daysIn(y, m) {
		return 0, false
	}
	return daysFromCivil(y, m, d), true
}

// parseClock parses "HH:MM:SS" with an optional fraction at the start of b
// and returns the nanoseconds since midnight and the bytes consumed.
func parseClock(b []byte) (nanos int64, n int, ok bool) {
	if len(b) < 8 || b[2] != ':' || b[5] != ':' {
		return 0, 0, false
	}
	h, ok1 := digits(b, 2)
	mi, ok2 := digits(b[3:], 2)
	s, ok3 := digits(b[6:], 2)
	if !ok1 || !ok2 || !ok3 || h > 23 || mi > 59 || s > 59 {
		return 0, 0, false
	}
	nanos = ((h*60+mi)*60 + s) * 1e9
	n = 8
	if n < len(b) && b[n] == '.' {
		n++
		start := n
		scale := int64(1e8)
		for n < len(b) && isDigit(b[n]) {
			nanos += int64(b[n]-'0') * scale // digits past nanoseconds add 0
			scale /= 10
			n++
		}
		if n == start {
			return 0, 0, false
		}
	}
	return nanos, n, true
}

// parseTimeOfDay parses "HH:MM:SS[.fraction]".
func parseTimeOfDay(b []byte) (nanos int64, ok bool) {
	nanos, n, ok := parseClock(b)
	return nanos, ok && n == len(b)
}

// parseTimestamp parses an RFC 3339 date-time ("2024-05-01T12:30:00.25Z",
// 't' or ' ' may separate date and time; the offset is Z or ±hh:mm) into
// seconds and nanoseconds since the epoch. hasOffset is false for a local
// date-time without an offset.
func parseTimestamp(b []byte) (sec, nsec int64, hasOffset, ok bool) {
	days, ok := parseDate(b)
	if !ok || len(b) < 11 || (b[10] != 'T' && b[10] != 't' && b[10] != ' ') {
		return 0, 0, false, false
	}
	nanos, n, ok := parseClock(b[11:])
	if !ok {
		return 0, 0, false, false
	}
	rest := b[11+n:]
	var offset int64
	switch {
	case len(rest) == 0:
	case len(rest) == 1 && (rest[0] == 'Z' || rest[0] == 'z'):
		hasOffset = true
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':':
		oh, ok1 := digits(rest[1:], 2)
		om, ok2 := digits(rest[4:], 2)
		if !ok1 || !ok2 || oh > 23 || om > 59 {
			return 0, 0, false, false
		}
		offset = (oh*60 + om) * 60
		if rest[0] == '-' {
			offset = -offset
		}
		hasOffset = true
	default:
		return 0, 0, false, false
	}
	sec = days*86400 + nanos/1e9 - offset
	return sec, nanos % 1e9, hasOffset, true
}

// isUUID reports whether b is a UUID in the 8-4-4-4-12 hex form.
func isUUID(b []byte) bool {
	if len(b) != 36 {
		return false
	}
	for i, c := range b {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}

// appendDecimal appends the big-endian two's complement bytes of the
// unscaled value of n at the given scale. size 0 means minimal length
// (bytes), else the exact size of a fixed. The reason is "" on success.
func (e *enc) appendDecimal(dst []byte, n *number, precision, scale, size int) ([]byte, string) {
	first, last, pow, nonzero := n.significant()
	if !nonzero {
		if size == 0 {
			return append(dst, 0), ""
		}
		for range size {
			dst = append(dst, 0)
		}
		return dst, ""
	}
	pow += scale
	if pow < 0 {
		return dst, string(n.raw) + " has more than " + strconv.Itoa(scale) + " digits after the decimal point"
	}
	nd := last - first + 1 + pow
	if nd > precision {
		return dst, string(n.raw) + " has more than " + strconv.Itoa(precision) + " significant digits (decimal(" +
			strconv.Itoa(precision) + "," + strconv.Itoa(scale) + "))"
	}
	var buf [8]byte
	var b []byte
	if nd <= 18 {
		var m uint64
		for k := first; k <= last; k++ {
			m = m*10 + uint64(n.digit(k))
		}
		for range pow {
			m *= 10
		}
		var k int
		if n.neg {
			k = bits.Len64(m-1)/8 + 1
			m = -m
		} else {
			k = bits.Len64(m)/8 + 1
		}
		for i := range k {
			buf[7-i] = byte(m >> (8 * i))
		}
		b = buf[8-k:]
	} else {
		s := e.scratch[:0]
		for k := first; k <= last; k++ {
			s = append(s, '0'+n.digit(k))
		}
		for range pow {
			s = append(s, '0')
		}
		e.scratch = s
		m, _ := new(big.Int).SetString(string(s), 10)
		if n.neg {
			mm := new(big.Int).Sub(m, big.NewInt(1))
			k := mm.BitLen()/8 + 1
			m.Sub(new(big.Int).Lsh(big.NewInt(1), uint(8*k)), m)
			b = m.FillBytes(make([]byte, k))
		} else {
			b = m.FillBytes(make([]byte, m.BitLen()/8+1))
		}
	}
	if size == 0 {
		dst = appendLong(dst, int64(len(b)))
		return append(dst, b...), ""
	}
	if len(b) > size {
		return dst, string(n.raw) + " does not fit in fixed(" + strconv.Itoa(size) + ")"
	}
	pad := byte(0)
	if n.neg {
		pad = 0xff
	}
	for range size - len(b) {
		dst = append(dst, pad)
	}
	return append(dst, b...), ""
}
