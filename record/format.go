package record

import (
	"fmt"
	"strings"

	"github.com/cdc-relay/cdc-relay/router"
)

// KeyFormat is how the aggregate id becomes the Kafka key: the bytes Kafka
// Connect's key converter would write, so that a consumer of Debezium's
// topics, and the partitioner, see the same key.
type KeyFormat uint8

// The key formats.
const (
	// KeyString is StringConverter: the column's text. The default.
	KeyString KeyFormat = iota
	// KeyJSON is JsonConverter with schemas.enable=false: a JSON string
	// literal (a number for an integer column).
	KeyJSON
	// KeyJSONSchema is JsonConverter with schemas.enable=true: the
	// {"schema":...,"payload":...} envelope.
	KeyJSONSchema
	// KeyAvro is Confluent's AvroConverter: 0x00, the schema id of "string"
	// under <topic>-key, then the Avro string.
	KeyAvro
)

var keyFormats = [...]string{"string", "json", "json-schema", "avro"}

// String returns the format's flag value.
func (f KeyFormat) String() string { return keyFormats[f] }

// ParseKeyFormat parses --key-format.
func ParseKeyFormat(s string) (KeyFormat, error) {
	for i, name := range keyFormats {
		if s == name {
			return KeyFormat(i), nil
		}
	}
	return 0, fmt.Errorf("%q is not a key format: use string, json, json-schema or avro", s)
}

// ValueFormat is how the payload becomes the Kafka value.
type ValueFormat uint8

// The value formats.
const (
	// ValueAvro is the payload as Avro with the event type's schema, in the
	// Confluent wire format. The default.
	ValueAvro ValueFormat = iota
	// ValueJSON is the payload's compact JSON object, as Debezium's outbox
	// router writes it with table.expand.json.payload=true and JsonConverter
	// without schemas.
	ValueJSON
)

var valueFormats = [...]string{"avro", "json"}

// String returns the format's flag value.
func (f ValueFormat) String() string { return valueFormats[f] }

// ParseValueFormat parses --value-format.
func ParseValueFormat(s string) (ValueFormat, error) {
	for i, name := range valueFormats {
		if s == name {
			return ValueFormat(i), nil
		}
	}
	return 0, fmt.Errorf("%q is not a value format: use avro or json", s)
}

// HeaderColumn copies an outbox column into a header.
type HeaderColumn struct {
	Column string // the column's name
	Header string // the header's name; the column's name by default
}

// ParseHeaderColumns parses --header-columns: "col[:name],...". Names must be
// unique, and none may be a builtin header that is written.
func ParseHeaderColumns(list string, builtin router.Builtin) ([]HeaderColumn, error) {
	var out []HeaderColumn
	seen := map[string]bool{}
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		col, name, _ := strings.Cut(item, ":")
		col, name = strings.TrimSpace(col), strings.TrimSpace(name)
		if name == "" {
			name = col
		}
		if col == "" {
			return nil, fmt.Errorf("%q has no column name: use col[:header],...", item)
		}
		if seen[name] {
			return nil, fmt.Errorf("header %q is given twice: give each column its own header name (col:name)", name)
		}
		if builtin.Has(name) {
			return nil, fmt.Errorf("header %q is a builtin header the relay writes: name it otherwise (%s:other) or leave it out of --builtin-headers", name, col)
		}
		seen[name] = true
		out = append(out, HeaderColumn{Column: col, Header: name})
	}
	if len(out) > maxHeaderColumns {
		return nil, fmt.Errorf("%d header columns: at most %d", len(out), maxHeaderColumns)
	}
	return out, nil
}

// maxHeaderColumns bounds --header-columns (the decoder tracks at most 64
// extra columns, one more being the timestamp column).
const maxHeaderColumns = 32
