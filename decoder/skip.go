package decoder

import (
	"encoding/binary"
	"fmt"
)

// validateSkipped checks the layout of a message the relay ignores, so that
// a truncated or corrupt one is reported instead of silently skipped. Stream
// and two-phase messages (proto 2 and 3) are not checked: proto 1 never sends
// them.
func validateSkipped(data []byte) error {
	var off int
	var err error
	var what string
	switch data[0] {
	case 'U':
		what = "update"
		// Int32 relation id, optional 'K' or 'O' old tuple, 'N' new tuple.
		off, err = fixed(data, 1, 4, "update")
		if err == nil && off < len(data) && (data[off] == 'K' || data[off] == 'O') {
			off, err = skipTuple(data, off+1, "update")
		}
		if err == nil {
			off, err = tupleAfter(data, off, 'N', "update")
		}
	case 'D':
		what = "delete"
		// Int32 relation id, 'K' or 'O' old tuple.
		off, err = fixed(data, 1, 4, "delete")
		if err == nil {
			if off < len(data) && data[off] == 'O' {
				off, err = skipTuple(data, off+1, "delete")
			} else {
				off, err = tupleAfter(data, off, 'K', "delete")
			}
		}
	case 'T':
		what = "truncate"
		// Int32 relation count, Int8 options, Int32 per relation.
		off, err = fixed(data, 1, 4+1, "truncate")
		if err == nil {
			n := uint64(binary.BigEndian.Uint32(data[1:]))
			if n > uint64(len(data)-off)/4 {
				return short("truncate")
			}
			off += int(n) * 4
		}
	case 'Y':
		what = "type"
		// Int32 type oid, String namespace, String name.
		off, err = fixed(data, 1, 4, "type")
		off, err = skipStrings(data, off, err, 2, "type")
	case 'O':
		what = "origin"
		// Int64 origin commit LSN, String origin name.
		off, err = fixed(data, 1, 8, "origin")
		off, err = skipStrings(data, off, err, 1, "origin")
	case 'M':
		what = "message"
		// Int8 flags, Int64 LSN, String prefix, Int32 length, content.
		off, err = fixed(data, 1, 1+8, "message")
		off, err = skipStrings(data, off, err, 1, "message")
		if err == nil {
			off, err = fixed(data, off, 4, "message")
		}
		if err == nil {
			n := uint64(binary.BigEndian.Uint32(data[off-4:]))
			if n > uint64(len(data)-off) {
				return short("message content")
			}
			off += int(n)
		}
	default:
		return nil
	}
	if err != nil {
		return err
	}
	if off != len(data) {
		return trailing(what, len(data)-off)
	}
	return nil
}

// fixed checks that n bytes follow off and returns off+n.
func fixed(data []byte, off, n int, what string) (int, error) {
	if len(data)-off < n {
		return off, short(what)
	}
	return off + n, nil
}

// skipStrings skips count NUL-terminated strings from off unless err is set.
func skipStrings(data []byte, off int, err error, count int, what string) (int, error) {
	for ; err == nil && count > 0; count-- {
		var ok bool
		if _, off, ok = cstring(data, off); !ok {
			err = short(what)
		}
	}
	return off, err
}

// tupleAfter expects the marker byte at off and skips the TupleData after it.
func tupleAfter(data []byte, off int, marker byte, what string) (int, error) {
	if off >= len(data) {
		return off, short(what)
	}
	if data[off] != marker {
		return off, fmt.Errorf("decode %s: tuple marker 0x%02x, want %q: %w", what, data[off], marker, ErrTupleFormat)
	}
	return skipTuple(data, off+1, what)
}

// skipTuple checks the TupleData at off and returns the offset after it.
func skipTuple(data []byte, off int, what string) (int, error) {
	if len(data)-off < 2 {
		return off, short(what)
	}
	n := int(binary.BigEndian.Uint16(data[off:]))
	off += 2
	for range n {
		if off >= len(data) {
			return off, short(what)
		}
		kind := data[off]
		off++
		switch kind {
		case 'n', 'u':
		case 't', 'b':
			if len(data)-off < 4 {
				return off, short(what)
			}
			l := uint64(binary.BigEndian.Uint32(data[off:]))
			off += 4
			if l > uint64(len(data)-off) {
				return off, short(what)
			}
			off += int(l)
		default:
			return off, fmt.Errorf("decode %s: column kind 0x%02x: %w", what, kind, ErrTupleFormat)
		}
	}
	return off, nil
}
