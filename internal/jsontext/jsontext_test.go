package jsontext

import (
	"errors"
	"strings"
	"testing"
)

func TestObject(t *testing.T) {
	obj, isNull, err := OpenObject([]byte(` {"a": 1, "b\u00e9": {"x": [1, "]"]}, "c": "s\"t"} `))
	if err != nil || isNull {
		t.Fatal(err, isNull)
	}
	var got []string
	for {
		key, raw, ok, err := obj.Next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		got = append(got, string(key)+"="+string(raw))
	}
	if want := `a=1|bé={"x": [1, "]"]}|c="s\"t"`; strings.Join(got, "|") != want {
		t.Errorf("members %q, want %q", strings.Join(got, "|"), want)
	}
	for _, tc := range []struct {
		in     string
		null   bool
		errSub string
	}{
		{"", true, ""}, {"  null ", true, ""}, {"{}", false, ""}, {"[1]", false, "an array"},
		{`"s"`, false, "a string"}, {"{} x", false, "after the value at offset 3"}, {"nul", false, "invalid literal"},
	} {
		o, null, err := OpenObject([]byte(tc.in))
		if null != tc.null || (tc.errSub == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.errSub)) {
			t.Errorf("OpenObject(%q) = null %v, %v", tc.in, null, err)
		}
		if _, _, ok, _ := o.Next(); ok {
			t.Errorf("OpenObject(%q) has a member", tc.in)
		}
	}
	for _, bad := range []string{"{", `{"a" 1}`, `{"a": 1,}`, `{"a": 1 "b": 2}`, `{a: 1}`, `{"a": 1}}`,
		`{"n": 007}`, `{"n": 0x1.8p1}`, `{"a": [1, {"b": NaN}]}`, `{"a": "\ud800"}`, "{\"a\": \"\xff\"}", `{"a": 1} x`} {
		o, _, err := OpenObject([]byte(bad))
		for err == nil {
			var ok bool
			if _, _, ok, err = o.Next(); !ok && err == nil {
				t.Errorf("%s iterated without an error", bad)
				break
			}
		}
		if !errors.Is(err, ErrSyntax) {
			t.Errorf("%s: %v, want a syntax error", bad, err)
		}
	}
}

func TestAppendUnquoted(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		err      error
	}{
		{`"plain"`, "plain", nil},
		{`"a\"b\\c\/d\b\f\n\r\t"`, "a\"b\\c/d\b\f\n\r\t", nil},
		{`"\u00e9\u20AC\ud83d\ude80"`, "é€🚀", nil},
		{`"\ud83d"`, "", ErrSurrogate},
		{`"\ude80\ud83d"`, "", ErrSurrogate},
		{`"\x"`, "", ErrSyntax},
		{`"\u12"`, "", ErrSyntax},
		{"\"a\x01\"", "", ErrSyntax},
		{"\"\xff\"", "", ErrBadUTF8},
		{`noquotes`, "", ErrSyntax},
	} {
		got, err := AppendUnquoted([]byte("p:"), []byte(tc.in))
		if !errors.Is(err, tc.err) || (err == nil && string(got) != "p:"+tc.want) {
			t.Errorf("AppendUnquoted(%s) = %q, %v; want %q, %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}
