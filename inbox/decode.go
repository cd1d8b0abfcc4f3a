package inbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/hamba/avro/v2"
	"github.com/riferrei/srclient"
)

// decodeError is a record that can never be decoded: it goes to the
// dead-letter topic with reason.
type decodeError struct {
	reason string
	err    error
}

func (e *decodeError) Error() string { return e.reason + ": " + e.err.Error() }
func (e *decodeError) Unwrap() error { return e.err }

// schemas fetches writer schemas by id through srclient and keeps them
// parsed; ids are immutable in a registry, so the cache never expires.
type schemas struct {
	client *srclient.SchemaRegistryClient
	mu     sync.RWMutex
	parsed map[uint32]avro.Schema
}

func newSchemas(url string) *schemas {
	c := srclient.NewSchemaRegistryClient(url)
	c.CodecCreationEnabled(false) // hamba/avro decodes; srclient's goavro codec is not needed
	return &schemas{client: c, parsed: map[uint32]avro.Schema{}}
}

// get returns the schema for id. A registry that answers "not found" gives
// a *decodeError; other failures (network, 5xx) are transient.
func (s *schemas) get(id uint32) (avro.Schema, error) {
	s.mu.RLock()
	sc := s.parsed[id]
	s.mu.RUnlock()
	if sc != nil {
		return sc, nil
	}
	raw, err := s.client.GetSchema(int(id))
	if err != nil {
		var se srclient.Error
		if errors.As(err, &se) && (se.Code == 404 || se.Code/100 == 404) {
			return nil, &decodeError{ReasonUnknownSchema, fmt.Errorf("schema id %d: %s", id, se.Message)}
		}
		return nil, fmt.Errorf("schema registry: fetch schema %d: %w", id, err)
	}
	sc, err = avro.ParseWithCache(raw.Schema(), "", &avro.SchemaCache{})
	if err != nil {
		return nil, &decodeError{ReasonUnknownSchema, fmt.Errorf("schema id %d does not parse: %w", id, err)}
	}
	s.mu.Lock()
	s.parsed[id] = sc
	s.mu.Unlock()
	return sc, nil
}

// decode turns a Confluent-framed Avro value into a T.
func decode[T any](s *schemas, value []byte, out *T) (uint32, error) {
	if len(value) < 5 || value[0] != 0 {
		return 0, &decodeError{ReasonBadMagic, fmt.Errorf("value is not in the Confluent wire format (first bytes % x)", value[:min(len(value), 5)])}
	}
	id := binary.BigEndian.Uint32(value[1:5])
	sc, err := s.get(id)
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
