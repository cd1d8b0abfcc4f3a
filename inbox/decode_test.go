package inbox

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestSchemaFetch: the writer schema comes from the registry by id, once
// (cached); an id the registry does not have, a schema that does not parse
// and one that is not Avro are a decode error (the record is
// dead-lettered as unknown_schema); a registry that refuses the request is
// not (the consumer waits it out).
func TestSchemaFetch(t *testing.T) {
	var fetches atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/versions") {
			http.NotFound(w, r)
			return
		}
		fetches.Add(1)
		switch r.URL.Path {
		case "/schemas/ids/1":
			w.Write([]byte(`{"schema": "\"string\""}`))
		case "/schemas/ids/2":
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"error_code": 40403, "message": "Schema 2 not found"}`))
		case "/schemas/ids/3":
			w.Write([]byte(`{"schema": "{\"type\": \"no such type\"}"}`))
		case "/schemas/ids/4":
			w.Write([]byte(`{"schemaType": "JSON", "schema": "{}"}`))
		case "/schemas/ids/5":
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error_code": 401, "message": "Unauthorized"}`))
		default:
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	s, err := newSchemas(srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	value := []byte{0, 0, 0, 0, 1, 6, 'a', 'b', 'c'} // schema id 1, the Avro string "abc"
	for range 2 {
		var got string
		if id, err := decode(ctx, s, value, &got); err != nil || id != 1 || got != "abc" {
			t.Errorf("decode = %d, %q, %v; want 1, abc", id, got, err)
		}
	}
	if n := fetches.Load(); n != 1 {
		t.Errorf("schema 1 fetched %d times, want once (cached)", n)
	}
	for id, wantDecodeError := range map[uint32]bool{2: true, 3: true, 4: true, 5: false} {
		_, err := s.get(ctx, id)
		var de *decodeError
		if got := errors.As(err, &de) && de.reason == ReasonUnknownSchema; got != wantDecodeError || err == nil {
			t.Errorf("schema %d: err = %v; want a decode error (unknown_schema): %v", id, err, wantDecodeError)
		}
	}
}
