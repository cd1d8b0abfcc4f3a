package record

import (
	"encoding/binary"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/cdc-relay/cdc-relay/replication"
)

// keyEncoder writes the Kafka key for an aggregate id in one KeyFormat.
type keyEncoder struct {
	format  KeyFormat
	integer bool   // the aggregate_id column is an integer type: JSON number
	schema  []byte // KeyJSONSchema: the envelope up to the payload
}

// newKeyEncoder returns the encoder for format, given what the catalog says
// of the aggregate_id column (nil when unknown: a non-null text column).
func newKeyEncoder(format KeyFormat, col *replication.Column) *keyEncoder {
	k := &keyEncoder{format: format}
	typ, optional := uint32(oidText), false
	if col != nil {
		typ, optional = col.BaseOID, !col.NotNull
	}
	k.integer = isInteger(typ)
	if format == KeyJSONSchema {
		k.schema = append(k.schema, `{"schema":{"type":"`...)
		switch typ {
		case oidInt2:
			k.schema = append(k.schema, "int16"...)
		case oidInt4:
			k.schema = append(k.schema, "int32"...)
		case oidInt8:
			k.schema = append(k.schema, "int64"...)
		default:
			k.schema = append(k.schema, "string"...)
		}
		k.schema = append(k.schema, `","optional":`...)
		if optional {
			k.schema = append(k.schema, "true"...)
		} else {
			k.schema = append(k.schema, "false"...)
		}
		if typ == oidUUID {
			k.schema = append(k.schema, `,"name":"io.debezium.data.Uuid","version":1`...)
		}
		k.schema = append(k.schema, `},"payload":`...)
	}
	return k
}

// differs reports whether k and o write keys of different JSON shapes.
func (k *keyEncoder) differs(o *keyEncoder) bool {
	return (k.format == KeyJSON || k.format == KeyJSONSchema) && (k.integer != o.integer || string(k.schema) != string(o.schema))
}

// append appends the key for aggregate id id to dst. avroHeader is the
// 5-byte wire-format header of the key schema (KeyAvro only).
func (k *keyEncoder) append(dst, id []byte, avroHeader *[5]byte) []byte {
	switch k.format {
	case KeyJSON:
		return k.appendJSON(dst, id)
	case KeyJSONSchema:
		dst = append(dst, k.schema...)
		dst = k.appendJSON(dst, id)
		return append(dst, '}')
	case KeyAvro:
		dst = append(dst, avroHeader[:]...)
		dst = binary.AppendVarint(dst, int64(len(id)))
		return append(dst, id...)
	}
	return append(dst, id...)
}

func (k *keyEncoder) appendJSON(dst, id []byte) []byte {
	if k.integer {
		return append(dst, id...)
	}
	return appendJSONString(dst, id)
}

const hexDigits = "0123456789ABCDEF"

// appendJSONString appends s as a JSON string literal the way Jackson (Kafka
// Connect's JsonConverter) writes it: '"' and '\' escaped, the control
// characters below 0x20 as \b \t \n \f \r or \u00XX with upper-case hex,
// characters outside the Basic Multilingual Plane as an escaped UTF-16
// surrogate pair (\uD83D\uDE80), everything else, '/', U+007F and U+2028
// included, as is.
func appendJSONString(dst, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < 0xF0 {
			i++
			continue
		}
		dst = append(dst, s[start:i]...)
		n := 1
		switch {
		case c >= 0xF0: // a four-byte sequence: outside the BMP
			r, size := utf8.DecodeRune(s[i:])
			n = size
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, c) // not UTF-8 (PostgreSQL text always is)
				break
			}
			hi, lo := utf16.EncodeRune(r)
			dst = appendU4(appendU4(dst, hi), lo)
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
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
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
		i += n
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendU4 appends \uXXXX with upper-case hex.
func appendU4(dst []byte, r rune) []byte {
	return append(dst, '\\', 'u', hexDigits[r>>12&0xF], hexDigits[r>>8&0xF], hexDigits[r>>4&0xF], hexDigits[r&0xF])
}
