package schemaregistry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/backoff"
)

// The registry's REST API (Confluent's), spoken directly with net/http so
// that every request honours the caller's context, one registration is one
// round trip, and a status code decides whether to retry.

const contentType = "application/vnd.schemaregistry.v1+json"

// maxResponse bounds what is read of a registry response.
const maxResponse = 8 << 20

// apiError is a non-2xx answer of the registry.
type apiError struct {
	Method, Path string
	Status       int
	Code         int    `json:"error_code"`
	Message      string `json:"message"`
}

func (e *apiError) Error() string {
	s := "schema registry " + e.Method + " " + e.Path + ": HTTP " + strconv.Itoa(e.Status)
	if e.Code != 0 && e.Code != e.Status {
		s += " (error_code " + strconv.Itoa(e.Code) + ")"
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// permanentError marks a failure that a retry cannot fix.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// retriable reports whether err may go away by itself: network errors,
// timeouts, 5xx, 408 and 429.
func retriable(err error) bool {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.Status >= 500 || ae.Status == http.StatusRequestTimeout || ae.Status == http.StatusTooManyRequests
	}
	var pe *permanentError
	return !errors.As(err, &pe)
}

// do sends one request: in (if not nil) as the JSON body, the JSON answer
// decoded into out (if not nil). The request is bounded by r.timeout.
func (r *Registry) do(ctx context.Context, method, path string, in, out any) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return &permanentError{err}
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.base+path, body)
	if err != nil {
		return &permanentError{err}
	}
	req.Header.Set("Accept", contentType+", application/json")
	if in != nil {
		req.Header.Set("Content-Type", contentType)
	}
	if r.user != nil {
		pw, _ := r.user.Password()
		req.SetBasicAuth(r.user.Username(), pw)
	}
	resp, err := r.http.Do(req)
	if err != nil {
		// url.Error carries the URL, which has no credentials: they were
		// moved into the Authorization header.
		return fmt.Errorf("schema registry %s %s: %w", method, path, errors.Unwrap(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return fmt.Errorf("schema registry %s %s: read response: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		ae := &apiError{Method: method, Path: path, Status: resp.StatusCode}
		if json.Unmarshal(data, ae) != nil || ae.Message == "" {
			ae.Message = strings.TrimSpace(string(data[:min(len(data), 200)]))
		}
		return ae
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return &permanentError{fmt.Errorf("schema registry %s %s: decode response: %w", method, path, err)}
		}
	}
	return nil
}

// retryLogEvery rate-limits the warning logged while a request keeps
// failing.
const retryLogEvery = 10 * time.Second

// retry calls fn until it succeeds, fails permanently or ctx is done,
// waiting with the relay's backoff (250 ms doubling to 5 s, jittered) in
// between and logging failures at most every retryLogEvery with their
// consecutive count.
func (r *Registry) retry(ctx context.Context, op string, fn func(context.Context) error) error {
	var b backoff.Backoff
	var lastLog time.Time
	for {
		err := fn(ctx)
		if err == nil {
			if n := b.Attempts(); n > 0 {
				r.log.Info("schema registry request succeeded after retries", keyOp, op, keyConsecutiveErrors, n)
			}
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w (last error: %v)", op, ctx.Err(), err)
		}
		if !retriable(err) {
			return err
		}
		if b.Attempts() == 0 || time.Since(lastLog) >= retryLogEvery {
			lastLog = time.Now()
			r.log.Warn("schema registry request failed, retrying", keyOp, op, keyError, err,
				keyConsecutiveErrors, b.Attempts()+1)
		}
		if werr := b.Wait(ctx); werr != nil {
			return fmt.Errorf("%s: %w (last error: %v)", op, werr, err)
		}
	}
}

func subjectPath(subject string) string { return "/subjects/" + url.PathEscape(subject) }

type schemaBody struct {
	Schema string `json:"schema"`
}

// registerOnce registers text under subject and returns the schema id. The
// registry returns the existing id when the subject already has the schema.
func (r *Registry) registerOnce(ctx context.Context, subject, text string) (int, error) {
	var resp struct {
		ID int `json:"id"`
	}
	if err := r.do(ctx, http.MethodPost, subjectPath(subject)+"/versions", schemaBody{text}, &resp); err != nil {
		return 0, err
	}
	if resp.ID <= 0 {
		return 0, &permanentError{fmt.Errorf("schema registry registered subject %q without an id", subject)}
	}
	return resp.ID, nil
}

// lookupOnce returns the id of text under subject (POST /subjects/{subject},
// which registers nothing); 0 when the subject does not exist or does not
// hold text.
func (r *Registry) lookupOnce(ctx context.Context, subject, text string) (int, error) {
	var resp struct {
		ID int `json:"id"`
	}
	err := r.do(ctx, http.MethodPost, subjectPath(subject), schemaBody{text}, &resp)
	var ae *apiError
	if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if resp.ID <= 0 {
		return 0, &permanentError{fmt.Errorf("schema registry found the schema under subject %q without an id", subject)}
	}
	return resp.ID, nil
}

// subjects lists the registry's subjects (AxonOps answers null when there
// are none).
func (r *Registry) subjects(ctx context.Context) ([]string, error) {
	var out []string
	err := r.retry(ctx, "list subjects", func(ctx context.Context) error {
		out = nil
		return r.do(ctx, http.MethodGet, "/subjects", nil, &out)
	})
	return out, err
}

type registeredSchema struct {
	Subject    string `json:"subject"`
	ID         int    `json:"id"`
	Version    int    `json:"version"`
	SchemaType string `json:"schemaType"`
	Schema     string `json:"schema"`
}

func (r *Registry) latest(ctx context.Context, subject string) (*registeredSchema, error) {
	var out registeredSchema
	err := r.retry(ctx, "get latest schema of "+subject, func(ctx context.Context) error {
		return r.do(ctx, http.MethodGet, subjectPath(subject)+"/versions/latest", nil, &out)
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// level returns the compatibility level of subject, falling back to the
// global one, or "unknown". One attempt each: it only serves a message.
func (r *Registry) level(ctx context.Context, subject string) string {
	var cfg struct {
		Level string `json:"compatibilityLevel"`
	}
	err := r.do(ctx, http.MethodGet, "/config/"+url.PathEscape(subject)+"?defaultToGlobal=true", nil, &cfg)
	if err == nil && cfg.Level != "" {
		return cfg.Level
	}
	cfg.Level = ""
	if err := r.do(ctx, http.MethodGet, "/config", nil, &cfg); err == nil && cfg.Level != "" {
		return cfg.Level
	}
	return "unknown"
}

// incompatibility asks the registry why text is incompatible with subject
// (verbose compatibility check); "" when it does not say.
func (r *Registry) incompatibility(ctx context.Context, subject, text string) string {
	var out struct {
		Compatible bool     `json:"is_compatible"`
		Messages   []string `json:"messages"`
	}
	path := "/compatibility" + subjectPath(subject) + "/versions/latest?verbose=true"
	if err := r.do(ctx, http.MethodPost, path, schemaBody{text}, &out); err != nil {
		return ""
	}
	return strings.Join(out.Messages, "; ")
}

// Log attribute keys.
const (
	keyOp                = "op"
	keyError             = "error"
	keyConsecutiveErrors = "consecutive_errors"
	keySubject           = "subject"
	keyEventType         = "event_type"
	keySchemaID          = "schema_id"
	keyURL               = "url"
	keyStrategy          = "strategy"
	keyCount             = "count"
	keyIncompatible      = "incompatible"
)
