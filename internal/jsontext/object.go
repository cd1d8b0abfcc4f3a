package jsontext

import "fmt"

// Object iterates over the members of a JSON object, checking the whole
// text as it goes: the last call to Next has checked all of it.
type Object struct {
	b    []byte
	i    int
	done bool
}

// OpenObject starts iterating over the object b holds (surrounding space
// allowed). null and empty text give an object without members (isNull
// true); another valid JSON value gives an error naming its kind, and
// invalid text a *SyntaxError.
func OpenObject(b []byte) (o Object, isNull bool, err error) {
	i := SkipSpace(b, 0)
	if i == len(b) {
		return Object{done: true}, true, nil
	}
	if b[i] != '{' {
		if err := Check(b); err != nil {
			return Object{done: true}, false, err
		}
		if b[i] == 'n' {
			return Object{done: true}, true, nil
		}
		return Object{done: true}, false, fmt.Errorf("got %s", KindOf(b[i]))
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		if end := SkipSpace(b, i+1); end != len(b) {
			return Object{done: true}, false, badChar(b, end, "the end after the value")
		}
		return Object{done: true}, false, nil
	}
	return Object{b: b, i: i}, false, nil
}

// Next returns the next member: its name, unquoted (aliasing the input
// unless it has escapes), and its raw value text, checked. ok is false
// after the last member, or with err after invalid text.
func (o *Object) Next() (name, raw []byte, ok bool, err error) {
	if o.done {
		return nil, nil, false, nil
	}
	name, raw, err = o.member()
	if err != nil {
		o.done = true
		return nil, nil, false, err
	}
	return name, raw, true, nil
}

func (o *Object) member() (name, raw []byte, err error) {
	b, i := o.b, o.i
	if i >= len(b) || b[i] != '"' {
		return nil, nil, badChar(b, i, "a member name")
	}
	end, escaped, err := ScanString(b, i)
	if err != nil {
		return nil, nil, err
	}
	name = b[i+1 : end-1]
	if escaped {
		if name, err = AppendUnescaped(nil, name); err != nil {
			return nil, nil, err
		}
	}
	if i = SkipSpace(b, end); i >= len(b) || b[i] != ':' {
		return nil, nil, badChar(b, i, "':'")
	}
	i = SkipSpace(b, i+1)
	vEnd, err := SkipValue(b, i)
	if err != nil {
		return nil, nil, err
	}
	raw = b[i:vEnd]
	i = SkipSpace(b, vEnd)
	switch {
	case i >= len(b):
		return nil, nil, syntaxError(b, i, "")
	case b[i] == '}':
		if end := SkipSpace(b, i+1); end != len(b) {
			return nil, nil, badChar(b, end, "the end after the value")
		}
		o.done = true
	case b[i] == ',':
		o.i = SkipSpace(b, i+1)
	default:
		return nil, nil, badChar(b, i, "',' or '}'")
	}
	return name, raw, nil
}

// KindOf names the JSON value starting with c, for messages: "an array",
// "an object", "a string", "a boolean", "null" or "a number".
func KindOf(c byte) string {
	switch c {
	case '[':
		return "an array"
	case '{':
		return "an object"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}
