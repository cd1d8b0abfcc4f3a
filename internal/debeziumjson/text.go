package debeziumjson

import (
	"math"
	"strconv"
	"unicode/utf8"
)

// hexDigits are Jackson's: uppercase.
const hexDigits = "0123456789ABCDEF"

// AppendString appends s as a JSON string literal the way Jackson (and so
// Kafka Connect's JsonConverter) writes it: `"` and `\` escaped, \b \t \n
// \f \r as two-character escapes, other characters below U+0020 as \u00XX
// with uppercase hex, characters outside the Basic Multilingual Plane as
// an escaped UTF-16 surrogate pair (🚀 is \uD83D\uDE80), everything else
// (U+007F, '/', '<', '>', '&', U+2028, U+2029) as raw UTF-8. Invalid UTF-8
// is written as U+FFFD.
func AppendString(dst []byte, s []byte) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			i++
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c >= 0x20:
				dst = append(dst, c)
			case c == '\b':
				dst = append(dst, '\\', 'b')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\f':
				dst = append(dst, '\\', 'f')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			default:
				dst = appendEscape(dst, rune(c))
			}
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		i += size
		switch {
		case r == utf8.RuneError && size == 1:
			dst = utf8.AppendRune(dst, utf8.RuneError)
		case r > 0xFFFF:
			r -= 0x10000
			dst = appendEscape(dst, 0xD800+(r>>10))
			dst = appendEscape(dst, 0xDC00+(r&0x3FF))
		default:
			dst = utf8.AppendRune(dst, r)
		}
	}
	return append(dst, '"')
}

// appendEscape appends \uXXXX for a UTF-16 code unit.
func appendEscape(dst []byte, u rune) []byte {
	return append(dst, '\\', 'u', hexDigits[u>>12&0xF], hexDigits[u>>8&0xF], hexDigits[u>>4&0xF], hexDigits[u&0xF])
}

// AppendDouble appends f as Java's Double.toString prints it from Java 19
// on (Jackson writes doubles with it): the shortest digits that read back
// as f; plain notation with at least one fractional digit for magnitudes
// in [10^-3, 10^7) ("0.001", "1.0", "1.5"), otherwise d.dddE±n with at
// least one fractional digit ("1.0E7", "1.23456785E7", "1.0E-4"); "0.0",
// "-0.0", "NaN", "Infinity", "-Infinity". Java 17 prints a few values
// with more digits than needed (282879384806159000.0 as
// 2.82879384806159008E17, not 2.82879384806159E17).
func AppendDouble(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, "NaN"...)
	case math.IsInf(f, 1):
		return append(dst, "Infinity"...)
	case math.IsInf(f, -1):
		return append(dst, "-Infinity"...)
	case f == 0:
		if math.Signbit(f) {
			return append(dst, "-0.0"...)
		}
		return append(dst, "0.0"...)
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	// Shortest digits d1.d2d3...e±x from strconv. Java picks from
	// decimals of at least two digits: when one digit would do, the
	// closest two-digit decimal (5e-324 is 4.9E-324; 1e23 is 1.0E23).
	var buf [32]byte
	e := strconv.AppendFloat(buf[:0], f, 'e', -1, 64)
	if len(e) > 1 && e[1] == 'e' {
		e = strconv.AppendFloat(buf[:0], f, 'e', 1, 64)
	}
	mant, exp := e, 0
	for i, c := range e {
		if c == 'e' {
			mant = e[:i]
			exp, _ = strconv.Atoi(string(e[i+1:]))
			break
		}
	}
	digits := make([]byte, 0, len(mant))
	for _, c := range mant {
		if c != '.' {
			digits = append(digits, c)
		}
	}
	for len(digits) > 1 && digits[len(digits)-1] == '0' {
		digits = digits[:len(digits)-1]
	}
	if f >= 1e-3 && f < 1e7 {
		// Plain: the point sits after digit exp (exp in -3..6).
		if exp < 0 {
			dst = append(dst, '0', '.')
			for range -exp - 1 {
				dst = append(dst, '0')
			}
			return append(dst, digits...)
		}
		intLen := exp + 1
		if len(digits) <= intLen {
			dst = append(dst, digits...)
			for range intLen - len(digits) {
				dst = append(dst, '0')
			}
			return append(dst, '.', '0')
		}
		dst = append(dst, digits[:intLen]...)
		dst = append(dst, '.')
		return append(dst, digits[intLen:]...)
	}
	dst = append(dst, digits[0], '.')
	if len(digits) == 1 {
		dst = append(dst, '0')
	} else {
		dst = append(dst, digits[1:]...)
	}
	dst = append(dst, 'E')
	return strconv.AppendInt(dst, int64(exp), 10)
}
