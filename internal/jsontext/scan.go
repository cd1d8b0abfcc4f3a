package jsontext

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth bounds the nesting of arrays and objects.
const MaxDepth = 1000

// MaxExp bounds Number.Exp: larger exponents are clamped to ±MaxExp.
const MaxExp = 1_000_000

// Causes of a SyntaxError.
var (
	// ErrSyntax means the text is not valid JSON. Every *SyntaxError
	// matches it.
	ErrSyntax = errors.New("not valid JSON")
	// ErrBadUTF8 means a string is not valid UTF-8.
	ErrBadUTF8 = errors.New("string is not valid UTF-8")
	// ErrSurrogate means a \u escape is half of a surrogate pair without
	// the other half.
	ErrSurrogate = errors.New(`string has an unpaired \u surrogate`)
)

// SyntaxError says where and why text is not valid JSON.
type SyntaxError struct {
	// Offset is the index in the text where the fault was found.
	Offset int
	// Msg says what is wrong there: "leading zero in number", ...
	Msg string
	// Err is the cause: ErrSyntax, ErrBadUTF8 or ErrSurrogate.
	Err error
}

func (e *SyntaxError) Error() string { return e.Msg + " at offset " + strconv.Itoa(e.Offset) }

// Unwrap returns the cause.
func (e *SyntaxError) Unwrap() error { return e.Err }

// Is reports whether target is ErrSyntax: every SyntaxError is one.
func (e *SyntaxError) Is(target error) bool { return target == ErrSyntax }

// syntaxError is a SyntaxError at b[i], or the end of input past it.
func syntaxError(b []byte, i int, msg string) error {
	if i >= len(b) {
		return &SyntaxError{Offset: len(b), Msg: "unexpected end of input", Err: ErrSyntax}
	}
	return &SyntaxError{Offset: i, Msg: msg, Err: ErrSyntax}
}

// badChar is a SyntaxError naming the unexpected byte at b[i].
func badChar(b []byte, i int, want string) error {
	if i >= len(b) {
		return syntaxError(b, i, "")
	}
	msg := "invalid character " + strconv.QuoteRune(rune(b[i]))
	if b[i] >= 0x80 {
		msg = "invalid byte " + strconv.Quote(string(b[i:i+1]))
	}
	if want != "" {
		msg += ", want " + want
	}
	return &SyntaxError{Offset: i, Msg: msg, Err: ErrSyntax}
}

// Valid reports whether b is one JSON value, with white space around it
// allowed.
func Valid(b []byte) bool { return Check(b) == nil }

// Check returns nil if b is one JSON value (white space around it
// allowed), else a *SyntaxError.
func Check(b []byte) error {
	end, err := SkipValue(b, SkipSpace(b, 0))
	if err != nil {
		return err
	}
	if end = SkipSpace(b, end); end != len(b) {
		return badChar(b, end, "the end after the value")
	}
	return nil
}

// SkipSpace returns the index of the first non-space byte at or after i.
func SkipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// SkipValue checks the JSON value that starts at b[i] (no white space
// before it) and returns the index after it.
func SkipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, syntaxError(b, i, "")
	}
	switch c := b[i]; {
	case c == '"':
		end, _, err := ScanString(b, i)
		return end, err
	case c == '-' || isDigit(c):
		return skipNumber(b, i)
	}
	return skipNested(b, i)
}

// skipNested is SkipValue for a literal or a value that nests.
func skipNested(b []byte, i int) (int, error) {
	var objects [MaxDepth/64 + 1]uint64 // bit d set: level d is an object
	depth := 0
	var err error
	for {
		// A value starts at b[i].
		if i >= len(b) {
			return 0, syntaxError(b, i, "")
		}
		switch c := b[i]; c {
		case '{', '[':
			if depth == MaxDepth {
				return 0, syntaxError(b, i, "nesting deeper than "+strconv.Itoa(MaxDepth))
			}
			closer := byte(']')
			if c == '{' {
				closer = '}'
			}
			i = SkipSpace(b, i+1)
			if i < len(b) && b[i] == closer {
				i++
				break
			}
			bit := uint64(1) << (uint(depth) % 64)
			if c == '{' {
				objects[uint(depth)/64] |= bit
				if i, err = memberName(b, i); err != nil {
					return 0, err
				}
			} else {
				objects[uint(depth)/64] &^= bit
			}
			depth++
			continue
		case '"':
			if j := quickPlain(b, i+1); j < len(b) && b[j] == '"' {
				i = j + 1 // a string without escapes: most of them
			} else if i, _, err = ScanString(b, i); err != nil {
				return 0, err
			}
		case 't':
			if i, err = literal(b, i, "true"); err != nil {
				return 0, err
			}
		case 'f':
			if i, err = literal(b, i, "false"); err != nil {
				return 0, err
			}
		case 'n':
			if i, err = literal(b, i, "null"); err != nil {
				return 0, err
			}
		default:
			if c != '-' && (c < '0' || c > '9') {
				return 0, badChar(b, i, "a value")
			}
			if i, err = skipNumber(b, i); err != nil {
				return 0, err
			}
		}
		// After a value: the next one of the enclosing array or object,
		// or its end.
	after:
		for {
			if depth == 0 {
				return i, nil
			}
			i = SkipSpace(b, i)
			object := objects[uint(depth-1)/64]&(1<<(uint(depth-1)%64)) != 0
			switch {
			case i >= len(b):
				return 0, syntaxError(b, i, "")
			case b[i] == ',':
				i = SkipSpace(b, i+1)
				if object {
					if i, err = memberName(b, i); err != nil {
						return 0, err
					}
				}
				break after
			case object && b[i] == '}', !object && b[i] == ']':
				i++
				depth--
			case object:
				return 0, badChar(b, i, "',' or '}'")
			default:
				return 0, badChar(b, i, "',' or ']'")
			}
		}
	}
}

// memberName checks a member's name and colon at b[i] and returns the
// index of its value.
func memberName(b []byte, i int) (int, error) {
	if i >= len(b) || b[i] != '"' {
		return 0, badChar(b, i, "a member name")
	}
	if j := quickPlain(b, i+1); j < len(b) && b[j] == '"' {
		i = j + 1
	} else {
		var err error
		if i, _, err = ScanString(b, i); err != nil {
			return 0, err
		}
	}
	if i = SkipSpace(b, i); i >= len(b) || b[i] != ':' {
		return 0, badChar(b, i, "':'")
	}
	return SkipSpace(b, i+1), nil
}

// literal checks the literal lit (true, false or null) at b[i].
func literal(b []byte, i int, lit string) (int, error) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return 0, syntaxError(b, i, "invalid literal, want "+lit)
	}
	return i + len(lit), nil
}

// ScanString checks the JSON string that starts at b[i] (a quote) and
// returns the index after its closing quote and whether it has escapes
// (without them, b[i+1:end-1] is its content, valid UTF-8).
func ScanString(b []byte, i int) (end int, escaped bool, err error) {
	j := quickPlain(b, i+1)
	for j < len(b) {
		switch c := b[j]; {
		case c == '"':
			return j + 1, escaped, nil
		case c == '\\':
			escaped = true
			n, err := escape(b, j)
			if err != nil {
				return 0, false, err
			}
			j = skipPlain(b, j+n)
		case c < 0x20:
			return 0, false, syntaxError(b, j, "control character in string")
		case c < 0x80:
			j++
		default:
			// A run of non-ASCII bytes holds whole UTF-8 sequences, if
			// valid: no sequence has an ASCII byte.
			k := j + 1
			for k < len(b) && b[k] >= 0x80 {
				k++
			}
			if !utf8.Valid(b[j:k]) {
				return 0, false, &SyntaxError{Offset: j, Msg: "invalid UTF-8 in string", Err: ErrBadUTF8}
			}
			j = skipPlain(b, k)
		}
	}
	return 0, false, syntaxError(b, j, "")
}

// escape checks the escape sequence at b[j] (a backslash) and returns its
// length; a surrogate pair is one sequence of 12 bytes.
func escape(b []byte, j int) (int, error) {
	if j+1 >= len(b) {
		return 0, syntaxError(b, j+1, "")
	}
	switch b[j+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2, nil
	case 'u':
	default:
		return 0, syntaxError(b, j, "invalid escape in string")
	}
	r, ok := Hex4(b[j+2:])
	if !ok {
		return 0, syntaxError(b, j, `invalid \u escape`)
	}
	if !utf16.IsSurrogate(r) {
		return 6, nil
	}
	if r >= 0xdc00 || len(b)-j < 12 || b[j+6] != '\\' || b[j+7] != 'u' {
		return 0, &SyntaxError{Offset: j, Msg: `unpaired \u surrogate in string`, Err: ErrSurrogate}
	}
	r2, ok := Hex4(b[j+8:])
	if !ok {
		return 0, syntaxError(b, j+6, `invalid \u escape`)
	}
	if r2 < 0xdc00 || r2 > 0xdfff {
		return 0, &SyntaxError{Offset: j, Msg: `unpaired \u surrogate in string`, Err: ErrSurrogate}
	}
	return 12, nil
}

// plainByte marks the bytes a string holds as they are: neither a quote,
// a backslash, a control character nor part of a non-ASCII character.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// SWAR constants: a byte of ones, and the high bit of every byte.
const (
	swarOnes = 0x0101010101010101
	swarHigh = 0x8080808080808080
)

// special has the high bit of every byte of w that needs a look inside a
// JSON string: a byte below 0x20 sets it in w-0x20…, one above 0x7f has
// it in w, a zero byte of q or bs (a quote or a backslash) sets it in
// q-1… &^ q. A borrow only runs upwards from a byte that is itself
// special, so the lowest bit set is exact.
func special(w uint64) uint64 {
	q := w ^ ('"' * swarOnes)
	bs := w ^ ('\\' * swarOnes)
	return ((w - 0x20*swarOnes) | w | (q-swarOnes)&^q | (bs-swarOnes)&^bs) & swarHigh
}

// quickPlain is skipPlain for the start of a string: most strings are
// short (names, ids, enums), and their first 16 bytes give the exact index
// of the first byte that needs a look without a call.
func quickPlain(d []byte, i int) int {
	for range 2 {
		if i+8 > len(d) {
			for i < len(d) && plainByte[d[i]] {
				i++
			}
			return i
		}
		if m := special(binary.LittleEndian.Uint64(d[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
		i += 8
	}
	return skipPlain(d, i)
}

// skipPlain returns the index of the first byte at or after i that needs a
// look inside a JSON string (a quote, a backslash, a control character or
// a byte of a non-ASCII character), or a position at most eight bytes
// before it from which the byte loop goes on. Past the first 16 bytes,
// bytes.IndexByte finds the next quote and backslash with vector
// instructions; the other bytes are tested eight at a time. A long plain
// string so costs a fraction of a byte-by-byte scan.
func skipPlain(d []byte, i int) int {
	// Most strings are short (ids, enums, timestamps): test the first 16
	// bytes for all kinds at once, without a call.
	for range 2 {
		if i+8 > len(d) {
			return i
		}
		if special(binary.LittleEndian.Uint64(d[i:])) != 0 {
			return i
		}
		i += 8
	}
	span := d[i:]
	if q := bytes.IndexByte(span, '"'); q >= 0 {
		span = span[:q]
	}
	if b := bytes.IndexByte(span, '\\'); b >= 0 {
		span = span[:b]
	}
	j := 0
	for j+8 <= len(span) {
		w := binary.LittleEndian.Uint64(span[j:])
		if ((w-0x20*swarOnes)|w)&swarHigh != 0 {
			return i + j
		}
		j += 8
	}
	for j < len(span) && span[j] >= 0x20 && span[j] < 0x80 {
		j++
	}
	return i + j
}

// Number is a JSON number split into its parts: its value is
// ±(Int . Frac) × 10^Exp, exactly.
type Number struct {
	// Raw is the number's text.
	Raw []byte
	// Neg is true with a minus sign.
	Neg bool
	// Int holds the integer digits; Frac the fraction digits (nil without
	// a fraction).
	Int, Frac []byte
	// Exp is the exponent (0 without one), clamped to ±MaxExp.
	Exp int
	// HasExp is true when the text has an exponent.
	HasExp bool
}

// IsInteger reports whether the text has neither a fraction nor an
// exponent.
func (n *Number) IsInteger() bool { return n.Frac == nil && !n.HasExp }

// ScanNumber checks the JSON number that starts at b[i] and returns its
// parts and the index after it.
func ScanNumber(b []byte, i int) (n Number, end int, err error) {
	start := i
	if i < len(b) && b[i] == '-' {
		n.Neg = true
		i++
	}
	j := i
	switch {
	case i >= len(b):
		return n, 0, syntaxError(b, i, "")
	case b[i] == '0':
		i++
		if i < len(b) && isDigit(b[i]) {
			return n, 0, syntaxError(b, j, "leading zero in number")
		}
	case isDigit(b[i]):
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	default:
		return n, 0, badChar(b, i, "a digit")
	}
	n.Int = b[j:i]
	if i < len(b) && b[i] == '.' {
		i++
		j = i
		for i < len(b) && isDigit(b[i]) {
			i++
		}
		if i == j {
			return n, 0, badChar(b, i, "a digit after the decimal point")
		}
		n.Frac = b[j:i]
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		n.HasExp = true
		i++
		neg := false
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			neg = b[i] == '-'
			i++
		}
		j = i
		x := 0
		for i < len(b) && isDigit(b[i]) {
			if x < MaxExp {
				x = x*10 + int(b[i]-'0')
			}
			i++
		}
		if i == j {
			return n, 0, badChar(b, i, "a digit in the exponent")
		}
		x = min(x, MaxExp)
		if neg {
			x = -x
		}
		n.Exp = x
	}
	n.Raw = b[start:i]
	return n, i, nil
}

// skipNumber is ScanNumber without the parts: the same grammar, checked
// without building them; ScanNumber says what is wrong.
func skipNumber(b []byte, i int) (int, error) {
	j := i
	if j < len(b) && b[j] == '-' {
		j++
	}
	switch {
	case j >= len(b):
		return scanNumberError(b, i)
	case b[j] == '0':
		j++
	case '1' <= b[j] && b[j] <= '9':
		j++
		for j < len(b) && isDigit(b[j]) {
			j++
		}
	default:
		return scanNumberError(b, i)
	}
	if j < len(b) && b[j] == '.' {
		j++
		k := j
		for j < len(b) && isDigit(b[j]) {
			j++
		}
		if j == k {
			return scanNumberError(b, i)
		}
	}
	if j < len(b) && (b[j] == 'e' || b[j] == 'E') {
		j++
		if j < len(b) && (b[j] == '+' || b[j] == '-') {
			j++
		}
		k := j
		for j < len(b) && isDigit(b[j]) {
			j++
		}
		if j == k {
			return scanNumberError(b, i)
		}
	}
	if j < len(b) && isDigit(b[j]) { // after a leading zero
		return scanNumberError(b, i)
	}
	return j, nil
}

func scanNumberError(b []byte, i int) (int, error) {
	if _, _, err := ScanNumber(b, i); err != nil {
		return 0, err
	}
	return 0, syntaxError(b, i, "invalid number") // never: FuzzCheck compares the two
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
