package schemaregistry

import (
	"bytes"
	"encoding/binary"
	"strconv"
)

// Avro's complex types from JSON: records, arrays, maps and unions.

// record reads a JSON object as a record.
func (e *enc) record(n *node) *PayloadError {
	if e.twoPass {
		return e.recordTwoPass(n)
	}
	return e.recordOnePass(n)
}

// recordOnePass encodes each member's value as it reads it, noting where
// in dst each field's encoding lies (two spans per field: its start + 1,
// 0 while absent, and its end), then puts the fields in the schema's
// order, with the defaults of those absent. PostgreSQL's jsonb writes
// members shortest name first, seldom the schema's order, and moving the
// encoded fields (a copy of the record's Avro bytes) costs less than
// reading the JSON twice.
//
// It hands over to the two-pass walk (restart) where that one decides
// differently or reports to a sink: a member the schema lacks while there
// is a sink, and nesting deeper than jsontext.MaxDepth. Any other failure
// is one the two-pass walk fails as well; only its error differs, and
// appendBody reports the two-pass one.
func (e *enc) recordOnePass(n *node) *PayloadError {
	e.pos++ // '{'
	start := len(e.dst)
	base := len(e.spans)
	for range n.fields {
		e.spans = append(e.spans, 0, 0)
	}
	fail := func(err *PayloadError) *PayloadError {
		e.spans = e.spans[:base]
		return err
	}
	want := 0 // the field that comes next if the members are in schema order
	e.ws()
	if e.pos < len(e.data) && e.data[e.pos] == '}' {
		e.pos++
	} else {
		next := 0 // the position in n.jsonbOrder of the member expected next
		for {
			i, known := e.expectedMember(n, &next, want)
			if !known {
				key, err := e.memberKey()
				if err != nil {
					return fail(err)
				}
				i, known = n.lookup(key, &next)
				if known && e.spans[base+2*i] != 0 {
					return fail(&PayloadError{Reason: "duplicate field " + strconv.Quote(string(key))})
				}
				if err := e.expect(':', "':'"); err != nil {
					return fail(err)
				}
			} else if e.spans[base+2*i] != 0 {
				return fail(&PayloadError{Reason: "duplicate field " + strconv.Quote(n.fields[i].name)})
			}
			e.ws()
			switch {
			case known:
				at := len(e.dst)
				if err := e.value(n.fields[i].typ); err != nil {
					return fail(err)
				}
				e.spans[base+2*i], e.spans[base+2*i+1] = at+1, len(e.dst)
				if i == want {
					want++
				} else {
					want = -1
				}
			case e.sink != nil:
				return fail(e.restart("a member the schema lacks, with a sink"))
			default:
				if err := e.skip(); err != nil {
					return fail(err)
				}
			}
			if more, err := e.more('}'); err != nil {
				return fail(err)
			} else if more {
				continue
			}
			break
		}
	}
	if want == len(n.fields) { // every field, in schema order: in place already
		e.spans = e.spans[:base]
		return nil
	}
	body := len(e.dst)
	for i, f := range n.fields {
		if at := e.spans[base+2*i]; at > 0 {
			e.dst = append(e.dst, e.dst[at-1:e.spans[base+2*i+1]]...)
			continue
		}
		if !f.hasDef {
			return fail(&PayloadError{Reason: "missing required field " + strconv.Quote(f.name)})
		}
		if !f.defReady {
			return fail(e.restart("a default not compiled yet"))
		}
		e.dst = append(e.dst, f.def...)
	}
	k := copy(e.dst[start:], e.dst[body:])
	e.dst = e.dst[:start+k]
	e.spans = e.spans[:base]
	return nil
}

// restart gives up the one-pass walk: the payload is encoded again in
// two passes (appendBody), which decides. Unions do not try another
// branch after it.
func (e *enc) restart(why string) *PayloadError {
	e.restarted = true
	return &PayloadError{Reason: "one pass cannot encode this payload: " + why}
}

// expectedMember consumes the name and colon of the member at e.pos (after
// white space) if it is one of the two expected there: the next in the
// order jsonb writes (n.jsonbOrder[*next]), or the next in the schema's
// (want, -1 once the members left it). It moves next on. Such a name has
// no escapes, so the bytes compared are the whole string; a member it
// does not recognise is left to memberKey and lookup.
func (e *enc) expectedMember(n *node, next *int, want int) (int, bool) {
	e.ws()
	rest := e.data[e.pos:]
	if *next < len(n.jsonbOrder) {
		i := n.jsonbOrder[*next]
		if q := n.fields[i].quoted; len(q) > 0 && bytes.HasPrefix(rest, q) {
			e.pos += len(q)
			*next++
			return i, true
		}
	}
	if want >= 0 && want < len(n.fields) {
		f := n.fields[want]
		if q := f.quoted; len(q) > 0 && bytes.HasPrefix(rest, q) {
			e.pos += len(q)
			*next = f.jsonbPos + 1
			return want, true
		}
	}
	return 0, false
}

// lookup finds the field a member name names; next is the position in
// n.jsonbOrder of the member expected next, which it moves on.
func (n *node) lookup(key []byte, next *int) (int, bool) {
	if *next < len(n.jsonbOrder) && n.fields[n.jsonbOrder[*next]].name == string(key) {
		i := n.jsonbOrder[*next]
		*next++
		return i, true
	}
	i, known := n.index[string(key)]
	if known {
		*next = n.fields[i].jsonbPos + 1
	}
	return i, known
}

// recordTwoPass reads a JSON object: a first pass checks it and notes where
// each schema field's value starts, then the fields are encoded in schema
// order.
func (e *enc) recordTwoPass(n *node) *PayloadError {
	e.pos++ // '{'
	base := len(e.spans)
	for range n.fields {
		e.spans = append(e.spans, 0)
	}
	if err := e.scanFields(n, base); err != nil {
		e.spans = e.spans[:base]
		return err
	}
	end := e.pos
	for i, f := range n.fields {
		if at := e.spans[base+i]; at > 0 {
			e.pos = at - 1
			if e.sink != nil {
				e.path = append(e.path, f.name)
			}
			if err := e.value(f.typ); err != nil {
				e.spans = e.spans[:base]
				return err.under(f.name)
			}
			if e.sink != nil {
				e.path = e.path[:len(e.path)-1]
			}
			continue
		}
		if !f.hasDef {
			e.spans = e.spans[:base]
			return &PayloadError{Reason: "missing required field " + strconv.Quote(f.name)}
		}
		if !f.defReady { // only while compiling defaults that refer to others
			if err := encodeDefault(f); err != nil {
				e.spans = e.spans[:base]
				return &PayloadError{Reason: err.Error()}
			}
		}
		e.dst = append(e.dst, f.def...)
	}
	e.spans = e.spans[:base]
	e.pos = end
	return nil
}

func (e *enc) scanFields(n *node, base int) *PayloadError {
	e.ws()
	if e.pos < len(e.data) && e.data[e.pos] == '}' {
		e.pos++
		return nil
	}
	next := 0 // the position in n.jsonbOrder of the member expected next
	for {
		key, err := e.memberKey()
		if err != nil {
			return err
		}
		i, known := n.lookup(key, &next)
		if known && e.spans[base+i] != 0 {
			return &PayloadError{Reason: "duplicate field " + strconv.Quote(string(key))}
		}
		if err := e.expect(':', "':'"); err != nil {
			return err
		}
		e.ws()
		if known {
			e.spans[base+i] = e.pos + 1
		} else if e.sink != nil && !e.defaults {
			e.sink.UnknownField(e.path, key)
		}
		if err := e.skip(); err != nil {
			return err
		}
		if more, err := e.more('}'); err != nil {
			return err
		} else if more {
			continue
		}
		return nil
	}
}

// insertCount finishes an array or map: Avro writes the item count before
// the items, which are only counted once written, so the count is moved in
// front of them; then the end-of-blocks marker.
func (e *enc) insertCount(start int, count int64) {
	if count == 0 {
		e.dst = append(e.dst, 0)
		return
	}
	var tmp [binary.MaxVarintLen64]byte
	cnt := appendLong(tmp[:0], count)
	k := len(cnt)
	e.dst = append(e.dst, cnt...)
	copy(e.dst[start+k:], e.dst[start:len(e.dst)-k])
	copy(e.dst[start:], cnt)
	e.dst = append(e.dst, 0)
}

func (e *enc) array(n *node) *PayloadError {
	e.pos++ // '['
	start := len(e.dst)
	var count int64
	e.ws()
	if e.pos < len(e.data) && e.data[e.pos] == ']' {
		e.pos++
		e.dst = append(e.dst, 0)
		return nil
	}
	for {
		if err := e.value(n.items); err != nil {
			return err.at(strconv.FormatInt(count, 10))
		}
		count++
		if more, err := e.more(']'); err != nil {
			return err
		} else if more {
			continue
		}
		break
	}
	e.insertCount(start, count)
	return nil
}

func (e *enc) mapValue(n *node) *PayloadError {
	e.pos++ // '{'
	start := len(e.dst)
	var count int64
	e.ws()
	if e.pos < len(e.data) && e.data[e.pos] == '}' {
		e.pos++
		e.dst = append(e.dst, 0)
		return nil
	}
	for {
		e.ws()
		if e.pos >= len(e.data) || e.data[e.pos] != '"' {
			return e.syntaxError("want object key")
		}
		key, esc, err := e.str()
		if err != nil {
			return err
		}
		if err := e.appendString(key, esc); err != nil {
			return err
		}
		if err := e.expect(':', "':'"); err != nil {
			return err
		}
		if err := e.value(n.items); err != nil {
			return err.at(string(key))
		}
		count++
		if more, err := e.more('}'); err != nil {
			return err
		} else if more {
			continue
		}
		break
	}
	e.insertCount(start, count)
	return nil
}

// union picks the branch for a JSON value: null for null; the Avro JSON
// encoding {"type name": value}; else the first branch the bare value fits.
// A schema default always takes the first branch.
func (e *enc) union(n *node) *PayloadError {
	if e.defaults {
		e.dst = appendLong(e.dst, 0)
		return e.value(n.branches[0])
	}
	c := e.data[e.pos]
	if c == 'n' && n.nullIndex >= 0 {
		e.dst = appendLong(e.dst, int64(n.nullIndex))
		return e.literal("null")
	}
	if c == '{' && e.wrapped(n) {
		return nil
	}
	if e.restarted {
		return e.restart("a wrapped union value")
	}
	k := jsonKind(c)
	if k == 0 {
		return e.syntaxError("invalid character " + strconv.QuoteRune(rune(c)))
	}
	var first *PayloadError
	tried := 0
	for i, b := range n.branches {
		if b.accepts&k == 0 {
			continue
		}
		tried++
		dl, p, sl := len(e.dst), e.pos, len(e.spans)
		e.dst = appendLong(e.dst, int64(i))
		err := e.value(b)
		if err == nil {
			return nil
		}
		e.dst, e.pos, e.spans = e.dst[:dl], p, e.spans[:sl]
		if e.restarted {
			return err
		}
		if first == nil {
			first = err
		}
	}
	if tried == 1 {
		return first
	}
	return e.typeError(n)
}

// wrapped encodes {"type name": value} if the object at e.pos is that and
// the value fits the named branch; otherwise it leaves e unchanged.
func (e *enc) wrapped(n *node) bool {
	p, dl, sl := e.pos, len(e.dst), len(e.spans)
	fail := func() bool {
		e.pos, e.dst, e.spans = p, e.dst[:dl], e.spans[:sl]
		e.depth--
		return false
	}
	if !e.twoPass && e.depth >= maxOnePassDepth {
		e.restarted = true
		return false
	}
	e.depth++
	e.pos++
	e.ws()
	if e.pos >= len(e.data) || e.data[e.pos] != '"' {
		return fail()
	}
	key, esc, err := e.str()
	if err != nil || esc {
		return fail()
	}
	i, ok := n.branchNames[string(key)]
	if !ok || e.expect(':', "") != nil {
		return fail()
	}
	e.dst = appendLong(e.dst, int64(i))
	if e.value(n.branches[i]) != nil {
		return fail()
	}
	e.ws()
	if e.pos >= len(e.data) || e.data[e.pos] != '}' {
		return fail()
	}
	e.pos++
	e.depth--
	return true
}

// more reads what follows a member or item: a comma (true) or closer
// (false), after optional white space.
func (e *enc) more(closer byte) (bool, *PayloadError) {
	e.ws()
	if e.pos < len(e.data) {
		switch e.data[e.pos] {
		case ',':
			e.pos++
			return true, nil
		case closer:
			e.pos++
			return false, nil
		}
	}
	return false, e.syntaxError("want ',' or '" + string(closer) + "'")
}

// memberKey reads an object member's name, unescaped (into e.scratch when
// it has escapes, so valid until the next unescape).
func (e *enc) memberKey() ([]byte, *PayloadError) {
	e.ws()
	if e.pos >= len(e.data) || e.data[e.pos] != '"' {
		return nil, e.syntaxError("want object key")
	}
	key, esc, err := e.str()
	if err != nil || !esc {
		return key, err
	}
	var reason string
	if e.scratch, reason = unescape(e.scratch[:0], key); reason != "" {
		return nil, &PayloadError{Reason: reason}
	}
	return e.scratch, nil
}
