package jsontext

import (
	"unicode/utf16"
	"unicode/utf8"
)

// Unquote returns the contents of q, a JSON string literal that
// ScanString accepted. Without escapes the contents alias q; with escapes
// they are decoded into a new slice.
func Unquote(q []byte) ([]byte, error) {
	inner := q[1 : len(q)-1]
	for _, c := range inner {
		if c == '\\' {
			return AppendUnescaped(make([]byte, 0, len(inner)), inner)
		}
	}
	return inner, nil
}

// AppendUnquoted appends the contents of the JSON string literal q (quotes
// included) to dst, resolving its escapes (see AppendUnescaped).
func AppendUnquoted(dst, q []byte) ([]byte, error) {
	if len(q) < 2 || q[0] != '"' || q[len(q)-1] != '"' {
		return dst, &SyntaxError{Msg: "not a JSON string", Err: ErrSyntax}
	}
	return AppendUnescaped(dst, q[1:len(q)-1])
}

// AppendUnescaped appends the decoded content of a JSON string, raw being
// what stands between its quotes. It applies ScanString's rules: a control
// character, a bad escape, invalid UTF-8 (ErrBadUTF8) or an unpaired
// surrogate (ErrSurrogate) is a *SyntaxError whose Offset is in raw. It
// allocates nothing beyond dst's growth and copies runs without escapes at
// once.
func AppendUnescaped(dst, raw []byte) ([]byte, error) {
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			j := i
			for j < len(raw) && raw[j] != '\\' {
				if raw[j] < 0x20 {
					return dst, syntaxError(raw, j, "control character in string")
				}
				j++
			}
			if !utf8.Valid(raw[i:j]) {
				return dst, &SyntaxError{Offset: i, Msg: "invalid UTF-8 in string", Err: ErrBadUTF8}
			}
			dst = append(dst, raw[i:j]...)
			i = j
			continue
		}
		n, err := escape(raw, i)
		if err != nil {
			return dst, err
		}
		switch e := raw[i+1]; e {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, _ := Hex4(raw[i+2:])
			if n == 12 {
				r2, _ := Hex4(raw[i+8:])
				r = utf16.DecodeRune(r, r2)
			}
			dst = utf8.AppendRune(dst, r)
		default: // '"', '\\', '/'
			dst = append(dst, e)
		}
		i += n
	}
	return dst, nil
}

// Hex4 reads the four hex digits at the start of b.
func Hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
