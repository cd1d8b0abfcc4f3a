package schemaregistry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/hamba/avro/v2"
)

// ErrSchemaNotFound is returned (wrapped, with the id) by SchemaByID when
// the registry has no schema with the id: the value was written against
// another registry, or is not in the wire format at all.
var ErrSchemaNotFound = errors.New("the registry has no schema with this id")

// ErrUnparsable is returned (wrapped, with the id and the parser's error)
// by SchemaByID and ParseWriterSchema when an Avro schema does not parse.
var ErrUnparsable = errors.New("does not parse as Avro")

// WriterSchema is a schema the registry keeps under an id: what a reader
// needs to decode a value that names the id.
type WriterSchema struct {
	// ID is the schema id, as the wire format's 4 bytes give it.
	ID int
	// Type is the registry's schemaType: AVRO (when it gives none), JSON
	// or PROTOBUF.
	Type string
	// Text is the schema's text.
	Text string
	// Subjects are the subjects the schema is registered under, sorted;
	// empty when the registry does not say.
	Subjects []string
	// Avro is the parsed schema when Type is AVRO, else nil.
	Avro avro.Schema
}

// ParseWriterSchema makes a WriterSchema from the registry's answer, and
// parses an Avro one.
func ParseWriterSchema(id int, schemaType, text string, subjects []string) (*WriterSchema, error) {
	if schemaType == "" {
		schemaType = "AVRO"
	}
	w := &WriterSchema{ID: id, Type: schemaType, Text: text, Subjects: slices.Sorted(slices.Values(subjects))}
	if schemaType == "AVRO" {
		s, err := avro.ParseWithCache(text, "", &avro.SchemaCache{})
		if err != nil {
			return nil, fmt.Errorf("schema id %d %w: %w", id, ErrUnparsable, err)
		}
		w.Avro = s
	}
	return w, nil
}

// SubjectFor returns the subject of topic's values the schema is
// registered under: <topic>-value (the topic strategy), else
// <topic>-<record full name> (topic_record), else <record full name> (the
// record strategy, whose subject every topic shares). "" when it is
// registered under none of them (only under other topics' subjects, or a
// key's), or the registry does not say: a subject is never guessed.
func (w *WriterSchema) SubjectFor(topic string) string {
	want := []string{topic + "-value"}
	if named, ok := w.Avro.(avro.NamedSchema); ok && named.FullName() != "" {
		want = append(want, topic+"-"+named.FullName(), named.FullName())
	}
	for _, s := range want {
		if slices.Contains(w.Subjects, s) {
			return s
		}
	}
	return ""
}

// SchemaByID fetches the schema with id (GET /schemas/ids/{id}) and the
// subjects it is registered under (GET /schemas/ids/{id}/versions; a
// registry that does not answer that gives none). Transient failures are
// retried until ctx is done; a registry without the id gives
// ErrSchemaNotFound. Ids never change meaning, so callers may cache the
// result for good.
func (r *Registry) SchemaByID(ctx context.Context, id int) (*WriterSchema, error) {
	path := "/schemas/ids/" + strconv.Itoa(id)
	var body struct {
		Schema     string `json:"schema"`
		SchemaType string `json:"schemaType"`
	}
	err := r.retry(ctx, "get schema "+strconv.Itoa(id), func(ctx context.Context) error {
		return r.do(ctx, http.MethodGet, path, nil, &body)
	})
	var ae *apiError
	if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
		return nil, fmt.Errorf("schema id %d: %w", id, ErrSchemaNotFound)
	}
	if err != nil {
		return nil, err
	}
	var versions []struct {
		Subject string `json:"subject"`
	}
	var subjects []string
	if r.do(ctx, http.MethodGet, path+"/versions", nil, &versions) == nil {
		for _, v := range versions {
			if v.Subject != "" && !slices.Contains(subjects, v.Subject) {
				subjects = append(subjects, v.Subject)
			}
		}
	}
	return ParseWriterSchema(id, body.SchemaType, body.Schema, subjects)
}
