package schemaregistry

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/hamba/avro/v2"
)

// node is one schema type compiled for the JSON-to-Avro encoder. Named types
// are compiled once, so recursive schemas make cyclic graphs.
type node struct {
	kind    avro.Type // Null … Record; never Ref
	logical avro.LogicalType
	name    string // how error messages name the type: "long", "com.example.Status"
	accepts uint8  // JSON kinds (jNull…jArray) this type can be written from

	fields []*field       // record
	index  map[string]int // record: field name → position
	// jsonbOrder is the record's field positions in the order PostgreSQL's
	// jsonb writes object keys (shorter first, then bytewise): the order
	// in which a jsonb payload's members arrive, so that finding each
	// member's field is mostly one comparison instead of a map lookup.
	jsonbOrder  []int
	syms        map[string]int // enum: symbol → position
	symbolList  string         // enum: "A, B, C" for messages
	size        int            // fixed
	items       *node          // array items, map values
	branches    []*node        // union
	branchNames map[string]int // union: type names accepted as {"name": value}
	nullIndex   int            // union: position of null, or -1

	precision, scale int // decimal
}

// jsonbKeyCompare orders object keys as jsonb stores them: by length,
// then bytewise.
func jsonbKeyCompare(a, b string) int {
	if len(a) != len(b) {
		return cmp.Compare(len(a), len(b))
	}
	return strings.Compare(a, b)
}

type field struct {
	name     string
	typ      *node
	hasDef   bool
	defReady bool
	rawDef   []byte // the default's JSON text from the .avsc file
	def      []byte // the default encoded as Avro
	// quoted is the name as a member of JSON text writes it, quoted and
	// followed by the colon ("name":), so that a member arriving where it
	// is expected is recognised by one comparison of bytes; nil for a name
	// JSON would escape.
	quoted   []byte
	jsonbPos int // the field's position in its record's jsonbOrder
}

type compiler struct {
	named    map[string]*node
	defaults map[string][]byte // "record full name\x00field" → default JSON
	fields   []*field
}

// compileSchema compiles the parsed schema s whose JSON text is text.
func compileSchema(s avro.Schema, text []byte) (*node, error) {
	c := &compiler{named: map[string]*node{}, defaults: map[string][]byte{}}
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	var raw any
	if err := dec.Decode(&raw); err != nil {
		return nil, err
	}
	if err := c.collectDefaults(raw, ""); err != nil {
		return nil, err
	}
	root, err := c.compile(s)
	if err != nil {
		return nil, err
	}
	for _, f := range c.fields {
		if err := encodeDefault(f); err != nil {
			return nil, err
		}
	}
	return root, nil
}

// collectDefaults finds the default of every record field in the raw JSON
// schema, keyed by the record's full name, resolved by the Avro namespace
// rules. hamba/avro keeps defaults only as float64 and base64 []byte, which
// would corrupt big longs and bytes, so the text is taken from the file.
func (c *compiler) collectDefaults(v any, ns string) error {
	switch v := v.(type) {
	case []any:
		for _, t := range v {
			if err := c.collectDefaults(t, ns); err != nil {
				return err
			}
		}
	case map[string]any:
		typ, _ := v["type"].(string)
		switch typ {
		case "record", "error", "enum", "fixed":
			name, _ := v["name"].(string)
			full := name
			if i := strings.LastIndexByte(name, '.'); i >= 0 {
				ns = name[:i]
			} else {
				if n, ok := v["namespace"].(string); ok {
					ns = n
				}
				if ns != "" {
					full = ns + "." + name
				}
			}
			if typ == "enum" || typ == "fixed" {
				return nil
			}
			fields, _ := v["fields"].([]any)
			for _, f := range fields {
				fm, _ := f.(map[string]any)
				fname, _ := fm["name"].(string)
				if d, ok := fm["default"]; ok {
					b, err := json.Marshal(d)
					if err != nil {
						return err
					}
					c.defaults[full+"\x00"+fname] = b
				}
				if err := c.collectDefaults(fm["type"], ns); err != nil {
					return err
				}
			}
		case "array":
			return c.collectDefaults(v["items"], ns)
		case "map":
			return c.collectDefaults(v["values"], ns)
		default:
			if _, ok := v["type"].(string); !ok {
				return c.collectDefaults(v["type"], ns)
			}
		}
	}
	return nil
}

func (c *compiler) compile(s avro.Schema) (*node, error) {
	switch s := s.(type) {
	case *avro.RefSchema:
		return c.compile(s.Schema())
	case *avro.RecordSchema:
		if n := c.named[s.FullName()]; n != nil {
			return n, nil
		}
		n := &node{kind: avro.Record, name: s.FullName(), accepts: jObject, index: map[string]int{}}
		c.named[s.FullName()] = n
		for i, f := range s.Fields() {
			t, err := c.compile(f.Type())
			if err != nil {
				return nil, err
			}
			cf := &field{name: f.Name(), typ: t, hasDef: f.HasDefault(), quoted: quotedKey(f.Name())}
			if cf.hasDef {
				raw, ok := c.defaults[s.FullName()+"\x00"+f.Name()]
				if !ok {
					return nil, fmt.Errorf("record %s field %q: default not found in the schema text", s.FullName(), f.Name())
				}
				cf.rawDef = raw
				c.fields = append(c.fields, cf)
			}
			n.fields = append(n.fields, cf)
			n.index[f.Name()] = i
			n.jsonbOrder = append(n.jsonbOrder, i)
		}
		slices.SortFunc(n.jsonbOrder, func(a, b int) int { return jsonbKeyCompare(n.fields[a].name, n.fields[b].name) })
		for p, i := range n.jsonbOrder {
			n.fields[i].jsonbPos = p
		}
		return n, nil
	case *avro.EnumSchema:
		if n := c.named[s.FullName()]; n != nil {
			return n, nil
		}
		n := &node{kind: avro.Enum, name: s.FullName(), accepts: jString, syms: map[string]int{}}
		for i, sym := range s.Symbols() {
			n.syms[sym] = i
		}
		n.symbolList = strings.Join(s.Symbols(), ", ")
		c.named[s.FullName()] = n
		return n, nil
	case *avro.FixedSchema:
		if n := c.named[s.FullName()]; n != nil {
			return n, nil
		}
		n := &node{kind: avro.Fixed, name: s.FullName(), accepts: jString, size: s.Size()}
		if d, ok := s.Logical().(*avro.DecimalLogicalSchema); ok {
			n.logical, n.precision, n.scale = avro.Decimal, d.Precision(), d.Scale()
			n.accepts |= jNumber
		}
		c.named[s.FullName()] = n
		return n, nil
	case *avro.ArraySchema:
		items, err := c.compile(s.Items())
		if err != nil {
			return nil, err
		}
		return &node{kind: avro.Array, name: "array", accepts: jArray, items: items}, nil
	case *avro.MapSchema:
		values, err := c.compile(s.Values())
		if err != nil {
			return nil, err
		}
		return &node{kind: avro.Map, name: "map", accepts: jObject, items: values}, nil
	case *avro.UnionSchema:
		n := &node{kind: avro.Union, nullIndex: -1, branchNames: map[string]int{}}
		names := make([]string, 0, len(s.Types()))
		for i, t := range s.Types() {
			b, err := c.compile(t)
			if err != nil {
				return nil, err
			}
			n.branches = append(n.branches, b)
			n.accepts |= b.accepts
			names = append(names, b.name)
			n.branchNames[unionBranchName(b)] = i
			if b.kind == avro.Record || b.kind == avro.Enum || b.kind == avro.Fixed {
				short := b.name[strings.LastIndexByte(b.name, '.')+1:]
				if _, taken := n.branchNames[short]; !taken {
					n.branchNames[short] = i
				}
			}
			if b.kind == avro.Null {
				n.nullIndex = i
			}
		}
		if len(names) == 2 && n.nullIndex >= 0 {
			n.name = names[0] + " or " + names[1]
		} else {
			n.name = "one of " + strings.Join(names, ", ")
		}
		return n, nil
	case *avro.NullSchema:
		return &node{kind: avro.Null, name: "null", accepts: jNull}, nil
	case *avro.PrimitiveSchema:
		n := &node{kind: s.Type(), name: string(s.Type())}
		switch s.Type() {
		case avro.Boolean:
			n.accepts = jBool
		case avro.Int, avro.Long, avro.Float, avro.Double:
			n.accepts = jNumber
		case avro.String, avro.Bytes:
			n.accepts = jString
		default:
			return nil, fmt.Errorf("unsupported Avro type %q", s.Type())
		}
		if l := s.Logical(); l != nil {
			n.logical = l.Type()
			n.name = string(l.Type())
			switch l.Type() {
			case avro.Date, avro.TimeMillis, avro.TimeMicros, avro.TimestampMillis, avro.TimestampMicros,
				avro.LocalTimestampMillis, avro.LocalTimestampMicros:
				n.accepts |= jString
			case avro.Decimal:
				d := l.(*avro.DecimalLogicalSchema)
				n.precision, n.scale = d.Precision(), d.Scale()
				n.accepts |= jNumber
				n.name = "decimal(" + strconv.Itoa(n.precision) + "," + strconv.Itoa(n.scale) + ")"
			}
		}
		return n, nil
	}
	return nil, fmt.Errorf("unsupported Avro schema %T", s)
}

// quotedKey is "name": when no byte of name needs escaping in JSON, else
// nil.
func quotedKey(name string) []byte {
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x20 || c == '"' || c == '\\' {
			return nil
		}
	}
	return append(append(append([]byte{'"'}, name...), '"'), ':')
}

// unionBranchName is the key of the Avro JSON encoding of a union value:
// the full name of a named type, else the type name.
func unionBranchName(n *node) string {
	switch n.kind {
	case avro.Record, avro.Enum, avro.Fixed:
		return n.name
	}
	return string(n.kind)
}

// encodeDefault encodes the JSON default of f once, at compile time. By the
// Avro specification a union default is a value of the union's first
// branch, and a bytes or fixed default maps code points 0-255 to bytes.
func encodeDefault(f *field) error {
	if f.defReady {
		return nil
	}
	e := &enc{data: f.rawDef, defaults: true, twoPass: true}
	if err := e.top(f.typ); err != nil {
		return fmt.Errorf("field %q: invalid default %s: %s", f.name, f.rawDef, err.Error())
	}
	f.def, f.defReady = e.dst, true
	return nil
}
