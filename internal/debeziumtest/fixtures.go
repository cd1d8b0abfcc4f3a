package debeziumtest

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// FixtureDir is where TestCapture stores what Debezium wrote, relative to
// the module root (testdata/debezium); docs/DEBEZIUM-FORMAT.md explains it.
const FixtureDir = "testdata/debezium"

// KeyFixture is one aggregate id's key bytes under each key converter
// (keys.json). Byte fields are hex.
type KeyFixture struct {
	AggregateID string `json:"aggregate_id"`
	String      string `json:"string"`      // StringConverter
	JSON        string `json:"json"`        // JsonConverter, schemas.enable=false
	JSONSchema  string `json:"json_schema"` // JsonConverter, schemas.enable=true
	// JSONText is the json key as text, for readers.
	JSONText string `json:"json_text"`
}

// HeaderFixture is the header one column value became (headers.json)
// through table.fields.additional.placement=<column>:header.
type HeaderFixture struct {
	Column          string `json:"column"`
	ColumnType      string `json:"column_type"`
	SQLValue        string `json:"sql_value"`        // the SQL literal inserted
	SessionTimezone string `json:"session_timezone"` // the writer's TimeZone
	// Header is the value's hex; "null" when Kafka's header value is null,
	// "absent" when there is no header, "missing" when there was no record.
	Header string `json:"header"`
	Text   string `json:"text"`
	// PGText is the stored value's text as pgoutput sends it to the relay
	// (DateStyle ISO, TimeZone UTC): the input of the relay's conversion.
	PGText string `json:"pg_text,omitempty"`
	// Typmod is the column's type modifier (pg_attribute.atttypmod), as
	// the Relation message carries it.
	Typmod int32 `json:"typmod"`
}

// ValueFixture is the record value one jsonb payload became (values.json)
// with JsonConverter schemas.enable=false and table.expand.json.payload.
type ValueFixture struct {
	Payload string `json:"payload"` // the literal inserted
	// JSONB is the payload as PostgreSQL stores and sends it (jsonb text).
	JSONB string `json:"jsonb"`
	// Value is the record value's hex, "null" for a null value, "missing"
	// when Debezium wrote no record.
	Value string `json:"value"`
	Text  string `json:"text"`
	Note  string `json:"note,omitempty"`
}

// RecordFixture is a whole record (records.json): what a connector with
// Options did with one row, its headers in order, partition of Partitions
// and how its timestamp relates to the row.
type RecordFixture struct {
	Case       string         `json:"case"`
	Connector  string         `json:"connector"`
	Options    []string       `json:"options"`
	Row        string         `json:"row"`
	Partitions int            `json:"partitions"`
	Partition  int32          `json:"partition"`
	Key        string         `json:"key"`   // hex, "null" or "missing"
	Value      string         `json:"value"` // hex, "null" or "missing"
	Headers    []RecordHeader `json:"headers"`
	Timestamp  string         `json:"timestamp"`
	Note       string         `json:"note,omitempty"`
}

// RecordHeader is one header of a RecordFixture, its value as text ("null"
// for a null value; no text case here is "null").
type RecordHeader struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Fixtures are the contents of FixtureDir.
type Fixtures struct {
	Keys    []KeyFixture
	Headers []HeaderFixture
	Values  []ValueFixture
	Records []RecordFixture
}

// ReadFixtures reads keys.json, headers.json, values.json and records.json
// from dir (e.g. "../testdata/debezium" from a package one level below
// the module root).
func ReadFixtures(dir string) (*Fixtures, error) {
	f := &Fixtures{}
	for name, dst := range map[string]any{"keys.json": &f.Keys, "headers.json": &f.Headers, "values.json": &f.Values, "records.json": &f.Records} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, dst); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	return f, nil
}

// Bytes decodes a fixture's hex field; ok is false for "null", "absent"
// and "missing".
func Bytes(field string) (b []byte, ok bool, err error) {
	switch field {
	case "null", "absent", "missing":
		return nil, false, nil
	}
	b, err = hex.DecodeString(field)
	return b, err == nil, err
}
