package schemaregistry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Config configures a Registry.
type Config struct {
	// URL is the schema registry's base URL, http(s)://host:port[/path].
	// Required. Credentials in it (https://user:pass@host) are sent as HTTP
	// basic auth and never logged. Java client: schema.registry.url.
	URL string
	// Strategy derives subjects from topics and record names. Default
	// TopicRecord. Java client: value.subject.name.strategy.
	Strategy Strategy
	// Schemas are the local schemas by event type, from LoadDir. Empty only
	// when the registry serves keys alone (KeyID).
	Schemas map[string]*Schema
	// Logger receives registrations and retried failures. Default: discard.
	Logger *slog.Logger
	// Timeout bounds each HTTP request. Default 10s.
	Timeout time.Duration
	// HTTPClient sends the requests. Default: a client of its own with
	// http.DefaultTransport's settings.
	HTTPClient *http.Client
	// LookupOnly makes the Registry register nothing (a dry run): where it
	// would register a schema under a subject (Preflight, Encoder, KeyID)
	// it looks the schema up under the subject instead (POST
	// /subjects/{subject}). One the subject does not hold yet is checked
	// against the subject's compatibility level, as registering it would
	// be: an incompatible one gives *IncompatibleError, a compatible one
	// an encoder with schema id 0 (there is no id until it is registered).
	LookupOnly bool
}

// DefaultTimeout is Config.Timeout's default.
const DefaultTimeout = 10 * time.Second

// Registry registers the local schemas with a schema registry and hands out
// an Encoder per (topic, event type). It is safe for concurrent use.
type Registry struct {
	base     string // URL without credentials or trailing slash
	user     *url.Userinfo
	http     *http.Client
	timeout  time.Duration
	strategy Strategy
	schemas  map[string]*Schema
	log      *slog.Logger
	lookup   bool // Config.LookupOnly

	// encoders is read without a lock: topic → event type → encoder. It is
	// replaced, never changed, under mu.
	encoders atomic.Pointer[encoderMap]

	mu        sync.Mutex
	bySubject map[subjectKey]*Encoder      // registered (subject, schema) pairs
	inflight  map[subjectKey]chan struct{} // registrations under way
	keyIDs    map[string]int               // topic → id of KeySchema under <topic>-key
}

type encoderMap map[string]map[string]*Encoder

type subjectKey struct {
	subject string
	schema  *Schema
}

// New checks cfg and returns a Registry. It does not contact the registry;
// Preflight does.
func New(cfg Config) (*Registry, error) {
	if cfg.URL == "" {
		return nil, errors.New("schema registry URL is empty")
	}
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("schema registry URL %q: want http(s)://host:port", redact(cfg.URL))
	}
	switch cfg.Strategy {
	case TopicRecord, Topic, Record:
	default:
		return nil, fmt.Errorf("schema registry: unknown subject name strategy %v", cfg.Strategy)
	}
	for et, s := range cfg.Schemas {
		if s == nil || s.root == nil || s.EventType != et {
			return nil, fmt.Errorf("schema registry: schema for event type %q was not made by LoadDir or ParseSchema", et)
		}
	}
	r := &Registry{
		user:      u.User,
		http:      cfg.HTTPClient,
		timeout:   cfg.Timeout,
		strategy:  cfg.Strategy,
		schemas:   cfg.Schemas,
		log:       cfg.Logger,
		lookup:    cfg.LookupOnly,
		bySubject: map[subjectKey]*Encoder{},
		inflight:  map[subjectKey]chan struct{}{},
		keyIDs:    map[string]int{},
	}
	u.User = nil
	u.RawQuery, u.Fragment = "", ""
	r.base = strings.TrimRight(u.String(), "/")
	if r.http == nil {
		r.http = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	if r.timeout <= 0 {
		r.timeout = DefaultTimeout
	}
	if r.log == nil {
		r.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	r.encoders.Store(&encoderMap{})
	return r, nil
}

// redact hides the password of a URL for messages.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "<unparsable URL>"
	}
	return u.Redacted()
}

// Cached returns the encoder for (topic, eventType) if it is already known,
// without any registry round trip; nil otherwise.
func (r *Registry) Cached(topic string, eventType []byte) *Encoder {
	return (*r.encoders.Load())[topic][string(eventType)]
}

// Encoder returns the cached encoder for (topic, eventType), registering
// the subject on first use: one registry round trip per new pair at most,
// none when Preflight or another pair already registered the same subject.
// For an already-seen pair it takes no lock and does not allocate.
//
// No local schema for eventType gives ErrNoSchema (wrapped); a schema the
// registry rejects gives *IncompatibleError. Network errors and 5xx are
// retried with backoff until ctx is done.
func (r *Registry) Encoder(ctx context.Context, topic string, eventType []byte) (*Encoder, error) {
	if enc := (*r.encoders.Load())[topic][string(eventType)]; enc != nil {
		return enc, nil
	}
	et := string(eventType)
	s := r.schemas[et]
	if s == nil {
		return nil, fmt.Errorf("event type %q: %w (no %s.avsc in the schemas directory)", et, ErrNoSchema, et)
	}
	enc, err := r.ensure(ctx, r.strategy.Subject(topic, s.FullName), s)
	if err != nil {
		return nil, err
	}
	r.publish(topic, et, enc)
	return enc, nil
}

// ensure returns the encoder of s under subject, registering it if this
// Registry has not yet; concurrent callers share one registration.
func (r *Registry) ensure(ctx context.Context, subject string, s *Schema) (*Encoder, error) {
	key := subjectKey{subject, s}
	for {
		r.mu.Lock()
		if enc := r.bySubject[key]; enc != nil {
			r.mu.Unlock()
			return enc, nil
		}
		if wait := r.inflight[key]; wait != nil {
			r.mu.Unlock()
			select {
			case <-wait:
				continue // registered, or failed: then try ourselves
			case <-ctx.Done():
				return nil, fmt.Errorf("register subject %q: %w", subject, ctx.Err())
			}
		}
		done := make(chan struct{})
		r.inflight[key] = done
		r.mu.Unlock()

		enc, err := r.register(ctx, subject, s)

		r.mu.Lock()
		delete(r.inflight, key)
		if err == nil {
			r.bySubject[key] = enc
		}
		close(done)
		r.mu.Unlock()
		return enc, err
	}
}

// publish makes enc visible to Encoder's lock-free path.
func (r *Registry) publish(topic, eventType string, enc *Encoder) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := *r.encoders.Load()
	if old[topic][eventType] == enc {
		return
	}
	m := make(encoderMap, len(old)+1)
	for t, byType := range old {
		m[t] = byType
	}
	byType := make(map[string]*Encoder, len(old[topic])+1)
	for et, e := range old[topic] {
		byType[et] = e
	}
	byType[eventType] = enc
	m[topic] = byType
	r.encoders.Store(&m)
}

// register registers s under subject (which makes the registry check
// compatibility) and returns its encoder.
func (r *Registry) register(ctx context.Context, subject string, s *Schema) (*Encoder, error) {
	if r.lookup {
		id, err := r.lookUp(ctx, subject, s.Text, s.EventType, s.File)
		if err != nil {
			return nil, err
		}
		return newEncoder(id, s), nil
	}
	var id int
	err := r.retry(ctx, "register subject "+subject, func(ctx context.Context) error {
		var err error
		id, err = r.registerOnce(ctx, subject, s.Text)
		return err
	})
	if err != nil {
		var ae *apiError
		if errors.As(err, &ae) && ae.Status == http.StatusConflict {
			return nil, r.incompatible(ctx, subject, s, ae)
		}
		return nil, fmt.Errorf("register %s (%s) under subject %q: %w", s.EventType, s.File, subject, err)
	}
	r.log.Info("schema registered", keySubject, subject, keyEventType, s.EventType, keySchemaID, id)
	return newEncoder(id, s), nil
}

// incompatible builds the IncompatibleError for a 409 answer, asking the
// registry for the level and, verbosely, for the reason. A registry whose
// verbose check gives none (Apicurio: its 409 message lists diffs as
// "warehouse at /fields/2") gets the relay's own reason after the 409
// message, as schemas check gives it.
func (r *Registry) incompatible(ctx context.Context, subject string, s *Schema, ae *apiError) error {
	e := &IncompatibleError{Subject: subject, EventType: s.EventType, File: s.File}
	e.Level = r.level(ctx, subject)
	e.Reason = r.incompatibility(ctx, subject, s.Text)
	if e.Reason == "" {
		e.Reason = ae.Message
		if own, err := r.explainAgainstLatest(ctx, subject, s, e.Level); err == nil && !strings.HasPrefix(own, noDifference) {
			e.Reason = joinReasons(e.Reason, own)
		}
	}
	return e
}

// lookUp is register under LookupOnly: the id of text under subject,
// registering nothing. Text the subject does not hold is checked for
// compatibility, as registering it would check it: 0 when it would be
// accepted, *IncompatibleError when not.
func (r *Registry) lookUp(ctx context.Context, subject, text, eventType, file string) (int, error) {
	var id int
	err := r.retry(ctx, "look up subject "+subject, func(ctx context.Context) error {
		var err error
		id, err = r.lookupOnce(ctx, subject, text)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("look up %s (%s) under subject %q: %w", eventType, file, subject, err)
	}
	if id > 0 {
		r.log.Info("schema looked up", keySubject, subject, keyEventType, eventType, keySchemaID, id)
		return id, nil
	}
	var out compatibility
	path := "/compatibility" + subjectPath(subject) + "/versions/latest?verbose=true"
	err = r.retry(ctx, "check compatibility of "+subject, func(ctx context.Context) error {
		out = compatibility{}
		return r.do(ctx, http.MethodPost, path, schemaBody{text}, &out)
	})
	var ae *apiError
	switch {
	case errors.As(err, &ae) && ae.Status == http.StatusNotFound:
		// A new subject: nothing to be compatible with.
	case err != nil:
		return 0, fmt.Errorf("check %s (%s) against subject %q: %w", eventType, file, subject, err)
	case !out.Compatible:
		e := &IncompatibleError{Subject: subject, EventType: eventType, File: file, Reason: strings.Join(out.Messages, "; ")}
		e.Level = r.level(ctx, subject)
		if s := r.schemas[eventType]; e.Reason == "" && s != nil && s.Text == text {
			e.Reason = r.noReason(ctx, subject, s, e.Level)
		}
		return 0, e
	}
	r.log.Info("schema not registered under the subject; registering it would be accepted (lookup only: nothing registered)",
		keySubject, subject, keyEventType, eventType)
	return 0, nil
}

// compatibility is the registry's answer to a compatibility check.
type compatibility struct {
	Compatible bool     `json:"is_compatible"`
	Messages   []string `json:"messages"`
}

// joinReasons is "a; b", or the one that is not empty.
func joinReasons(a, b string) string {
	if a == "" || b == "" {
		return a + b
	}
	return a + "; " + b
}

// sortedSchemas returns the local schemas ordered by event type.
func (r *Registry) sortedSchemas() []*Schema {
	out := make([]*Schema, 0, len(r.schemas))
	for _, s := range r.schemas {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].EventType < out[j].EventType })
	return out
}

// KeySchema is the Avro schema of keys written as Avro: the aggregate id as
// a string, as Confluent's AvroConverter registers a Kafka Connect string.
const KeySchema = `"string"`

// KeyID returns the schema id of KeySchema under the subject
// "<topic>-key", registering it on first use for the topic (the registry
// checks compatibility; a subject holding another key schema gives
// *IncompatibleError). Network errors and 5xx are retried until ctx is done.
func (r *Registry) KeyID(ctx context.Context, topic string) (int, error) {
	r.mu.Lock()
	id, ok := r.keyIDs[topic]
	r.mu.Unlock()
	if ok {
		return id, nil
	}
	subject := topic + "-key"
	if r.lookup {
		id, err := r.lookUp(ctx, subject, KeySchema, "(key)", "--key-format avro")
		if err != nil {
			return 0, err
		}
		r.mu.Lock()
		r.keyIDs[topic] = id
		r.mu.Unlock()
		return id, nil
	}
	err := r.retry(ctx, "register subject "+subject, func(ctx context.Context) error {
		var err error
		id, err = r.registerOnce(ctx, subject, KeySchema)
		return err
	})
	if err != nil {
		var ae *apiError
		if errors.As(err, &ae) && ae.Status == http.StatusConflict {
			e := &IncompatibleError{Subject: subject, EventType: "(key)", File: "--key-format avro"}
			e.Level = r.level(ctx, subject)
			if e.Reason = r.incompatibility(ctx, subject, KeySchema); e.Reason == "" {
				e.Reason = ae.Message
			}
			return 0, e
		}
		return 0, fmt.Errorf("register the key schema under subject %q: %w", subject, err)
	}
	r.log.Info("key schema registered", keySubject, subject, keySchemaID, id)
	r.mu.Lock()
	r.keyIDs[topic] = id
	r.mu.Unlock()
	return id, nil
}
