package schemaregistry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hamba/avro/v2"
)

// Schema is one .avsc file: its base name (without .avsc) is the event_type
// it describes.
type Schema struct {
	// EventType is the outbox event_type whose payloads this schema
	// describes: the file's base name without ".avsc".
	EventType string
	// File is the path the schema was read from.
	File string
	// FullName is the record's full name (namespace.name), or the type
	// name of a non-record top-level schema ("string", "array", ...).
	FullName string
	// Text is the form sent to the registry: the file's JSON with
	// insignificant white space removed. It keeps defaults, docs and
	// logical types, which Parsing Canonical Form would drop (and with them
	// the registry's ability to judge compatibility).
	Text string
	// Avro is the schema as parsed by hamba/avro.
	Avro avro.Schema

	root *node
}

// ParseSchema parses the text of one .avsc file for eventType. file is used
// only in messages and may be empty.
func ParseSchema(eventType, file string, text []byte) (*Schema, error) {
	if eventType == "" {
		return nil, errors.New("empty event type")
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, text); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	// A private cache: schemas must not see each other's named types
	// (avro.Parse would register them in a process-wide cache).
	parsed, err := avro.ParseBytesWithCache(compact.Bytes(), "", &avro.SchemaCache{})
	if err != nil {
		return nil, fmt.Errorf("invalid Avro schema: %w", err)
	}
	root, err := compileSchema(parsed, compact.Bytes())
	if err != nil {
		return nil, fmt.Errorf("invalid Avro schema: %w", err)
	}
	s := &Schema{
		EventType: eventType,
		File:      file,
		FullName:  string(parsed.Type()),
		Text:      compact.String(),
		Avro:      parsed,
		root:      root,
	}
	if named, ok := parsed.(avro.NamedSchema); ok {
		s.FullName = named.FullName()
	}
	return s, nil
}

// LoadDir parses every *.avsc file in dir (not its subdirectories) and
// returns the schemas by event type. A file that cannot be read or parsed
// gives a *FileError naming it (several are joined). A missing directory or
// one without .avsc files is an error naming the --schemas-dir flag.
func LoadDir(dir string) (map[string]*Schema, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("--schemas-dir %q: directory does not exist", dir)
		}
		return nil, fmt.Errorf("--schemas-dir %q: %w", dir, err)
	}
	var names []string
	for _, ent := range entries {
		if ent.IsDir() || !strings.HasSuffix(ent.Name(), ".avsc") {
			continue
		}
		names = append(names, ent.Name())
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("--schemas-dir %q: no .avsc files: add one <event_type>.avsc per event type", dir)
	}
	sort.Strings(names)
	schemas := make(map[string]*Schema, len(names))
	var errs []error
	for _, name := range names {
		path := filepath.Join(dir, name)
		text, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, &FileError{File: path, Err: err})
			continue
		}
		s, err := ParseSchema(strings.TrimSuffix(name, ".avsc"), path, text)
		if err != nil {
			errs = append(errs, &FileError{File: path, Err: err})
			continue
		}
		schemas[s.EventType] = s
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return schemas, nil
}
