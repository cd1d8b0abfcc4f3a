package decoder

import (
	"bytes"
	"encoding/binary"
)

// relation is what the decoder remembers of one Relation message.
type relation struct {
	id     uint32
	outbox bool   // namespace and name are those of an outbox table
	table  *table // that table
	// The rest is set only for an outbox table.
	slots   []uint8             // per column: bit set of the fields it feeds
	columns []string            // per column: its name, for errors
	extra   []int16             // per column: index among the extra columns, or -1
	types   []uint32            // per extra column: type oid
	typmods []int32             // per extra column: type modifier
	missing *MissingColumnError // first required column absent, or nil
	// For another table, with Config.OtherTables: its "schema.table" and
	// column names.
	qualified string
	names     []string
}

// minColumnLen is the smallest encoding of a Relation column: flags, an
// empty name's NUL, type oid, type modifier.
const minColumnLen = 1 + 1 + 4 + 4

// decodeRelation decodes 'R' and replaces the cache entry of its relation id:
// Int32 relation id, String namespace, String name, Int8 replica identity,
// Int16 column count, then per column Int8 flags, String name, Int32 type oid,
// Int32 type modifier. Columns are mapped by name; order does not matter and
// unknown columns are ignored. The cache is only changed when the whole
// message is valid.
func (d *Decoder) decodeRelation(data []byte) error {
	off := 1
	if len(data)-off < 4 {
		return short("relation")
	}
	id := binary.BigEndian.Uint32(data[off:])
	off += 4
	ns, n, ok := cstring(data, off)
	if !ok {
		return short("relation namespace")
	}
	off = n
	name, n, ok := cstring(data, off)
	if !ok {
		return short("relation name")
	}
	off = n
	if len(data)-off < 1+2 {
		return short("relation")
	}
	off++ // replica identity setting
	ncols := int(binary.BigEndian.Uint16(data[off:]))
	off += 2
	if ncols > (len(data)-off)/minColumnLen {
		return short("relation columns")
	}

	rel := &relation{id: id}
	for i := range d.tables {
		if t := &d.tables[i]; string(ns) == t.schema && string(name) == t.name {
			rel.outbox, rel.table = true, t
			break
		}
	}
	if rel.outbox {
		rel.slots = make([]uint8, ncols)
		rel.columns = make([]string, ncols)
		rel.extra = make([]int16, ncols)
		rel.types = make([]uint32, len(d.extra))
		rel.typmods = make([]int32, len(d.extra))
	} else if d.other {
		rel.qualified = string(ns) + "." + string(name)
		rel.names = make([]string, 0, ncols)
	}
	var found uint8
	var foundExtra uint64
	for i := 0; i < ncols; i++ {
		off++ // flags (1 = part of the key)
		col, n, ok := cstring(data, off)
		if !ok {
			return short("relation column name")
		}
		off = n
		if len(data)-off < 4+4 {
			return short("relation column")
		}
		typ := binary.BigEndian.Uint32(data[off:])
		mod := int32(binary.BigEndian.Uint32(data[off+4:]))
		off += 4 + 4 // type oid, type modifier
		if !rel.outbox {
			if d.other {
				rel.names = append(rel.names, string(col))
			}
			continue
		}
		rel.columns[i] = string(col)
		for f, want := range rel.table.names {
			if want != "" && string(col) == want {
				rel.slots[i] |= 1 << f
			}
		}
		found |= rel.slots[i]
		rel.extra[i] = -1
		for x, want := range d.extra {
			if string(col) == want {
				rel.extra[i] = int16(x)
				rel.types[x], rel.typmods[x] = typ, mod
				foundExtra |= 1 << x
			}
		}
	}
	if off != len(data) {
		return trailing("relation", len(data)-off)
	}
	if missing := requiredFields &^ found; rel.outbox && missing != 0 {
		for f := range numFields {
			if missing&(1<<f) != 0 {
				rel.missing = &MissingColumnError{Table: rel.table.qualified, Column: rel.table.names[f]}
				break
			}
		}
	}
	if rel.outbox && rel.missing == nil {
		for x, name := range d.extra {
			if foundExtra&(1<<x) == 0 {
				rel.missing = &MissingColumnError{Table: rel.table.qualified, Column: name}
				break
			}
		}
	}
	if d.rels == nil {
		d.rels = make(map[uint32]*relation)
	}
	d.rels[id] = rel
	if d.last != nil && d.last.id == id {
		d.last = rel
	}
	return nil
}

// cstring reads a NUL-terminated string at off; it returns the string
// without the NUL and the offset after the NUL.
func cstring(data []byte, off int) (s []byte, next int, ok bool) {
	if off > len(data) {
		return nil, 0, false
	}
	i := bytes.IndexByte(data[off:], 0)
	if i < 0 {
		return nil, 0, false
	}
	return data[off : off+i], off + i + 1, true
}
