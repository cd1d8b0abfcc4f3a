package schemaregistry

import (
	"math/big"

	"github.com/cdc-relay/cdc-relay/internal/civil"
	"math/bits"
	"strconv"
)

// Parsers for the string forms of Avro logical types. They work on bytes,
// allocate nothing and accept exactly the documented forms.

// parseTimeOfDay parses "HH:MM:SS[.fraction]".
func parseTimeOfDay(b []byte) (nanos int64, ok bool) {
	nanos, n, ok := civil.Clock(b)
	return nanos, ok && n == len(b)
}

// parseTimestamp parses an RFC 3339 date-time ("2024-05-01T12:30:00.25Z",
// 't' or ' ' may separate date and time; the offset is Z or ±hh:mm) into
// seconds and nanoseconds since the epoch. hasOffset is false for a local
// date-time without an offset.
func parseTimestamp(b []byte) (sec, nsec int64, hasOffset, ok bool) {
	days, ok := civil.Date(b)
	if !ok || len(b) < 11 || (b[10] != 'T' && b[10] != 't' && b[10] != ' ') {
		return 0, 0, false, false
	}
	nanos, n, ok := civil.Clock(b[11:])
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
		oh, ok1 := civil.Digits(rest[1:], 2)
		om, ok2 := civil.Digits(rest[4:], 2)
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
	if len(b) != 36 || b[8] != '-' || b[13] != '-' || b[18] != '-' || b[23] != '-' {
		return false
	}
	var bad byte
	for _, c := range b[:8] {
		bad |= hexClass[c]
	}
	for _, c := range b[9:13] {
		bad |= hexClass[c]
	}
	for _, c := range b[14:18] {
		bad |= hexClass[c]
	}
	for _, c := range b[19:23] {
		bad |= hexClass[c]
	}
	for _, c := range b[24:] {
		bad |= hexClass[c]
	}
	return bad == 0
}

// hexClass is 0 for the bytes of a hexadecimal digit, 1 for all others.
var hexClass = func() (t [256]byte) {
	for c := range t {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			t[c] = 1
		}
	}
	return t
}()

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
