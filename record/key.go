package record

import (
	"encoding/binary"

	"github.com/cdc-relay/cdc-relay/catalog"
	"github.com/cdc-relay/cdc-relay/internal/debeziumjson"
)

// keyEncoder writes the Kafka key for an aggregate id in one KeyFormat.
type keyEncoder struct {
	format  KeyFormat
	integer bool   // the aggregate_id column is an integer type: JSON number
	schema  []byte // KeyJSONSchema: the envelope up to the payload
}

// newKeyEncoder returns the encoder for format, given what the catalog says
// of the aggregate_id column (nil when unknown: a non-null text column).
func newKeyEncoder(format KeyFormat, col *catalog.Column) *keyEncoder {
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
	return debeziumjson.AppendString(dst, id)
}
