package inbox

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/hamba/avro/v2"

	"github.com/cdc-relay/cdc-relay/schemaregistry"
)

// decodeError is a record that can never be decoded: it goes to the
// dead-letter topic with reason.
type decodeError struct {
	reason string
	err    error
}

func (e *decodeError) Error() string { return e.reason + ": " + e.err.Error() }
func (e *decodeError) Unwrap() error { return e.err }

// schemas fetches writer schemas by id through the schemaregistry
// package and keeps them parsed; ids are immutable in a registry, so the
// cache never expires.
type schemas struct {
	reg    *schemaregistry.Registry
	mu     sync.RWMutex
	parsed map[uint32]avro.Schema
}

// newSchemas makes the cache for the registry at url; a bad URL is a
// *ConfigError.
func newSchemas(url string, log *slog.Logger) (*schemas, error) {
	reg, err := schemaregistry.New(schemaregistry.Config{URL: url, Logger: log})
	if err != nil {
		return nil, &ConfigError{"RegistryURL", err.Error()}
	}
	return &schemas{reg: reg, parsed: map[uint32]avro.Schema{}}, nil
}

// get returns the Avro schema for id. An id the registry does not have,
// or whose schema is not Avro or does not parse, gives a *decodeError;
// other failures (network, 5xx, a refused request) are transient. The
// registry client retries network errors and 5xx itself until ctx ends.
func (s *schemas) get(ctx context.Context, id uint32) (avro.Schema, error) {
	s.mu.RLock()
	sc := s.parsed[id]
	s.mu.RUnlock()
	if sc != nil {
		return sc, nil
	}
	w, err := s.reg.SchemaByID(ctx, int(id))
	switch {
	case errors.Is(err, schemaregistry.ErrSchemaNotFound), errors.Is(err, schemaregistry.ErrUnparsable):
		return nil, &decodeError{ReasonUnknownSchema, err}
	case err != nil:
		return nil, fmt.Errorf("schema registry: fetch schema %d: %w", id, err)
	case w.Avro == nil:
		return nil, &decodeError{ReasonUnknownSchema, fmt.Errorf("schema id %d is a %s schema, not Avro", id, w.Type)}
	}
	s.mu.Lock()
	s.parsed[id] = w.Avro
	s.mu.Unlock()
	return w.Avro, nil
}

// decode turns a Confluent-framed Avro value into a T.
func decode[T any](ctx context.Context, s *schemas, value []byte, out *T) (uint32, error) {
	if len(value) < 5 || value[0] != 0 {
		return 0, &decodeError{ReasonBadMagic, fmt.Errorf("value is not in the Confluent wire format (first bytes % x)", value[:min(len(value), 5)])}
	}
	id := binary.BigEndian.Uint32(value[1:5])
	sc, err := s.get(ctx, id)
	if err != nil {
		return id, err
	}
	// A Reader of its own, not avro.Unmarshal: Unmarshal reports a body cut
	// short as success (it ignores io.EOF), and says nothing of bytes left over.
	r := avro.NewReader(nil, 0)
	r.Reset(value[5:])
	r.ReadVal(sc, out)
	if r.Error != nil {
		return id, &decodeError{ReasonUndecodable, fmt.Errorf("schema id %d: %w", id, r.Error)}
	}
	if r.Peek(); r.Error == nil {
		return id, &decodeError{ReasonUndecodable, fmt.Errorf("schema id %d: bytes left after the Avro body", id)}
	}
	return id, nil
}
