package jsontext

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestCheck: the strict rules, text by text, each invalid one with its
// cause and where the fault is; encoding/json agrees on every text whose
// fault is in the grammar.
func TestCheck(t *testing.T) {
	valid := []string{
		`0`, `-0`, `1`, `-12`, `0.5`, `0.5e-3`, `1E+2`, `1e2`, `123456789012345678901234567890`,
		`true`, `false`, `null`, `""`, `"é€🚀"`, `"\ud83d\ude80"`, `"\u00e9\"\\\/\b\f\n\r\t"`, `"\u0000"`,
		`[]`, `{}`, ` [ 1 , [ ] , { } ] `, "\t{\"a\" :\r\n1}\n", `{"a":1,"a":2}`, `{"":""}`,
		strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth),
	}
	for _, in := range valid {
		if err := Check([]byte(in)); err != nil {
			t.Errorf("Check(%.40q) = %v, want nil", in, err)
		}
		if !json.Valid([]byte(in)) {
			t.Fatalf("encoding/json refuses %.40q", in)
		}
	}
	invalid := []struct {
		in     string
		cause  error
		offset int
		msg    string
	}{
		{`{"n":007}`, ErrSyntax, 5, "leading zero in number"},
		{`-01`, ErrSyntax, 1, "leading zero in number"},
		{`{"n":0x1.8p1}`, ErrSyntax, 6, "invalid character 'x', want ',' or '}'"},
		{`NaN`, ErrSyntax, 0, "invalid character 'N', want a value"},
		{`[Infinity]`, ErrSyntax, 1, "invalid character 'I', want a value"},
		{`-Infinity`, ErrSyntax, 1, "invalid character 'I', want a digit"},
		{`+1`, ErrSyntax, 0, "invalid character '+'"},
		{`.5`, ErrSyntax, 0, "invalid character '.'"},
		{`1.`, ErrSyntax, 2, "unexpected end of input"},
		{`1.e5`, ErrSyntax, 2, "want a digit after the decimal point"},
		{`1e`, ErrSyntax, 2, "unexpected end of input"},
		{`1e+x`, ErrSyntax, 3, "want a digit in the exponent"},
		{`[1,]`, ErrSyntax, 3, "invalid character ']', want a value"},
		{`{"a":1,}`, ErrSyntax, 7, "want a member name"},
		{`[1 2]`, ErrSyntax, 3, "want ',' or ']'"},
		{`{'a':1}`, ErrSyntax, 1, "invalid character '\\'', want a member name"},
		{`{"a" 1}`, ErrSyntax, 5, "want ':'"},
		{`{a:1}`, ErrSyntax, 1, "want a member name"},
		{"\"a\tb\"", ErrSyntax, 2, "control character in string"},
		{`"\x"`, ErrSyntax, 1, "invalid escape in string"},
		{`"\u12"`, ErrSyntax, 1, `invalid \u escape`},
		{`"\ud800"`, ErrSurrogate, 1, `unpaired \u surrogate`},
		{`"\udc00\ud800"`, ErrSurrogate, 1, `unpaired \u surrogate`},
		{`"\ud800\u0041"`, ErrSurrogate, 1, `unpaired \u surrogate`},
		{`"\ud800\uzzzz"`, ErrSyntax, 7, `invalid \u escape`},
		{"\"\xff\"", ErrBadUTF8, 1, "invalid UTF-8"},
		{"\"ab\xc3\"", ErrBadUTF8, 3, "invalid UTF-8"},
		{"\"\xc0\xaf\"", ErrBadUTF8, 1, "invalid UTF-8"},
		{"\"\xed\xa0\x80\"", ErrBadUTF8, 1, "invalid UTF-8"}, // a surrogate in UTF-8
		{"\"" + strings.Repeat("x", 40) + "\xe9" + strings.Repeat("y", 40) + "\"", ErrBadUTF8, 41, "invalid UTF-8"},
		{"\xef\xbb\xbf{}", ErrSyntax, 0, `invalid byte "\xef"`}, // a byte order mark
		{`{} x`, ErrSyntax, 3, "want the end after the value"},
		{`1 2`, ErrSyntax, 2, "want the end after the value"},
		{`tru`, ErrSyntax, 0, "invalid literal, want true"},
		{`nulll`, ErrSyntax, 4, "want the end after the value"},
		{`"abc`, ErrSyntax, 4, "unexpected end of input"},
		{``, ErrSyntax, 0, "unexpected end of input"},
		{`/* c */ 1`, ErrSyntax, 0, "invalid character '/'"},
		{strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1), ErrSyntax, MaxDepth, "nesting deeper than 1000"},
	}
	for _, tc := range invalid {
		err := Check([]byte(tc.in))
		var se *SyntaxError
		if !errors.As(err, &se) || !errors.Is(err, ErrSyntax) || !errors.Is(err, tc.cause) || se.Offset != tc.offset || !strings.Contains(se.Msg, tc.msg) {
			t.Errorf("Check(%.40q) = %v; want %v at offset %d saying %q", tc.in, err, tc.cause, tc.offset, tc.msg)
		}
		if tc.cause == ErrSyntax && !strings.Contains(tc.msg, "nesting") && json.Valid([]byte(tc.in)) {
			t.Errorf("encoding/json accepts %.40q", tc.in)
		}
		if Valid([]byte(tc.in)) {
			t.Errorf("Valid(%.40q) = true", tc.in)
		}
	}
}

func TestScanNumber(t *testing.T) {
	for _, tc := range []struct {
		in         string
		neg        bool
		ip, fp     string
		exp        int
		integer    bool
		end        int
		wantErrMsg string
	}{
		{in: "0", ip: "0", integer: true, end: 1},
		{in: "-12.50e+3,", neg: true, ip: "12", fp: "50", exp: 3, end: 9},
		{in: "7E-2]", ip: "7", exp: -2, end: 4},
		{in: "1e99999999999", ip: "1", exp: MaxExp, end: 13},
		{in: "007", wantErrMsg: "leading zero"},
	} {
		n, end, err := ScanNumber([]byte(tc.in), 0)
		if tc.wantErrMsg != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErrMsg) {
				t.Errorf("ScanNumber(%q) = %v, want %q", tc.in, err, tc.wantErrMsg)
			}
			continue
		}
		if err != nil || end != tc.end || n.Neg != tc.neg || string(n.Int) != tc.ip || string(n.Frac) != tc.fp || n.Exp != tc.exp ||
			n.IsInteger() != tc.integer || string(n.Raw) != tc.in[:tc.end] {
			t.Errorf("ScanNumber(%q) = %+v, %d, %v", tc.in, n, end, err)
		}
	}
}

// TestScanString: the content of a string without escapes is the text
// between the quotes; the escaped flag is set by any escape.
func TestScanString(t *testing.T) {
	for _, tc := range []struct {
		in      string
		end     int
		escaped bool
	}{
		{`"plain" `, 7, false},
		{`"` + strings.Repeat("long ", 20) + `é"`, 104, false},
		{`"a\"b",`, 6, true},
		{`"\ud83d\ude80"`, 14, true},
	} {
		end, escaped, err := ScanString([]byte(tc.in), 0)
		if err != nil || end != tc.end || escaped != tc.escaped {
			t.Errorf("ScanString(%q) = %d, %v, %v; want %d, %v", tc.in, end, escaped, err, tc.end, tc.escaped)
		}
	}
}

// TestNoAllocs: checking valid text allocates nothing.
func TestNoAllocs(t *testing.T) {
	doc := []byte(`{"order_id": "7c4f7d6e", "items": [{"sku": "a", "q": 1.5e3}, null, true], "s": "\u00e9\ud83d\ude80 é", "n": -0}`)
	if n := testing.AllocsPerRun(100, func() {
		if err := Check(doc); err != nil {
			t.Fatal(err)
		}
		o, _, _ := OpenObject(doc)
		for {
			if _, _, ok, err := o.Next(); !ok || err != nil {
				break
			}
		}
	}); n != 0 {
		t.Errorf("%v allocations, want 0", n)
	}
}

// FuzzCheck: what Check accepts, encoding/json accepts, and it is UTF-8;
// what encoding/json accepts and Check refuses is refused for a rule
// encoding/json does not have (UTF-8, surrogates, depth). An object Check
// accepts iterates to its end without an error, and each member's value
// is valid on its own.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{`{"a": [1, -0.5e3, "x\u00e9"], "b": {"c": null}}`, `{"n":007}`, `[1,]`, `"\ud800"`,
		"\"\xff\"", `0x1.8p1`, `-0.5e+7`, `01`, `1.e3`, `-`, ` true `, `[[[]]]`, `{"a":1,"a":2}`, `"\ud83d\ude80"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// SkipValue checks numbers with skipNumber, which must agree with
		// ScanNumber, at any start.
		for i := range min(len(b), 3) {
			_, end1, err1 := ScanNumber(b, i)
			end2, err2 := skipNumber(b, i)
			if (err1 == nil) != (err2 == nil) || (err1 == nil && end1 != end2) {
				t.Fatalf("%q at %d: ScanNumber %d, %v; skipNumber %d, %v", b, i, end1, err1, end2, err2)
			}
		}
		err := Check(b)
		if err == nil {
			if !json.Valid(b) || !utf8.Valid(b) {
				t.Fatalf("Check accepts %q, encoding/json or UTF-8 does not", b)
			}
		} else {
			var se *SyntaxError
			if !errors.As(err, &se) || se.Offset < 0 || se.Offset > len(b) {
				t.Fatalf("Check(%q) = %v (%T)", b, err, err)
			}
			if json.Valid(b) && se.Err == ErrSyntax && !strings.HasPrefix(se.Msg, "nesting") {
				t.Fatalf("encoding/json accepts %q, Check refuses it: %v", b, err)
			}
		}
		o, _, oerr := OpenObject(b)
		for oerr == nil {
			_, raw, ok, err := o.Next()
			if err != nil {
				oerr = err
				break
			}
			if !ok {
				break
			}
			if cerr := Check(raw); cerr != nil {
				t.Fatalf("%q: member value %q: %v", b, raw, cerr)
			}
		}
		trimmed := b[SkipSpace(b, 0):]
		if (err == nil) != (oerr == nil) && len(trimmed) > 0 && trimmed[0] == '{' {
			t.Fatalf("%q: Check says %v, the object iteration %v", b, err, oerr)
		}
	})
}
