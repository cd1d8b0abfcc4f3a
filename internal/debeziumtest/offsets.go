package debeziumtest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"time"
)

// call sends method to path on the REST API and returns the body of a 2xx
// answer; any other answer is an error with the worker's log tail.
func (w *Worker) call(ctx context.Context, method, path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "http://"+w.REST+path, nil)
	if err != nil {
		return nil, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, w.failure("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode/100 != 2 {
		return body, &RESTError{Method: method, Path: path, Status: res.StatusCode, Body: string(body)}
	}
	return body, nil
}

// RESTError is a non-2xx answer of Connect's REST API.
type RESTError struct {
	Method, Path string
	Status       int
	Body         string
}

func (e *RESTError) Error() string {
	return "debeziumtest: " + e.Method + " " + e.Path + ": " + http.StatusText(e.Status) + ": " + e.Body
}

// StopConnector stops connector name (PUT /connectors/<name>/stop, Kafka
// 3.5+): its tasks shut down and release the replication slot, its
// configuration stays, and its offsets can then be altered or deleted. It
// waits up to timeout until the connector reports STOPPED.
func (w *Worker) StopConnector(ctx context.Context, name string, timeout time.Duration) error {
	if _, err := w.call(ctx, http.MethodPut, "/connectors/"+name+"/stop"); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return w.poll(ctx, "connector "+name+" STOPPED", func() (bool, error) {
		st, err := w.Status(ctx, name)
		return err == nil && st.Connector.State == "STOPPED" && len(st.Tasks) == 0, nil
	})
}

// ResumeConnector resumes a stopped or paused connector (PUT
// /connectors/<name>/resume).
func (w *Worker) ResumeConnector(ctx context.Context, name string) error {
	_, err := w.call(ctx, http.MethodPut, "/connectors/"+name+"/resume")
	return err
}

// DeleteConnector deletes connector name (DELETE /connectors/<name>).
func (w *Worker) DeleteConnector(ctx context.Context, name string) error {
	_, err := w.call(ctx, http.MethodDelete, "/connectors/"+name)
	return err
}

// DeleteOffsets deletes connector name's stored source offsets (DELETE
// /connectors/<name>/offsets, Kafka 3.6+, KIP-875), which Connect allows
// only for a stopped connector, and returns Connect's message.
func (w *Worker) DeleteOffsets(ctx context.Context, name string) (string, error) {
	body, err := w.call(ctx, http.MethodDelete, "/connectors/"+name+"/offsets")
	var m struct {
		Message string `json:"message"`
	}
	json.Unmarshal(body, &m)
	return m.Message, err
}

// Offsets returns connector name's stored source offsets (GET
// /connectors/<name>/offsets): one map per source partition, Debezium's
// lsn, lsn_commit, txId and the like.
func (w *Worker) Offsets(ctx context.Context, name string) ([]map[string]any, error) {
	body, err := w.call(ctx, http.MethodGet, "/connectors/"+name+"/offsets")
	if err != nil {
		return nil, err
	}
	var out struct {
		Offsets []struct {
			Offset map[string]any `json:"offset"`
		} `json:"offsets"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, w.failure("GET /connectors/%s/offsets: %v: %s", name, err, body)
	}
	offs := make([]map[string]any, len(out.Offsets))
	for i, o := range out.Offsets {
		offs[i] = o.Offset
	}
	return offs, nil
}
