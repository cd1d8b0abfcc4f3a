package relaytest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"time"
)

// GetJSON GETs path from the process's metrics server and decodes the JSON
// object it answers (status 0 when it does not answer).
func (p *Process) GetJSON(path string) (int, map[string]string) {
	resp, err := http.Get("http://" + p.MetricsAddr + path)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	var body map[string]string
	json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body
}

// Metric reads one metric from /metrics: its value, or the sum over its
// label sets.
func (p *Process) Metric(name string) (float64, error) {
	resp, err := http.Get("http://" + p.MetricsAddr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `(\{[^}]*\})? (\S+)$`)
	var sum float64
	found := false
	for _, m := range re.FindAllStringSubmatch(string(body), -1) {
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			return 0, err
		}
		sum += v
		found = true
	}
	if !found {
		return 0, fmt.Errorf("metric %s not found", name)
	}
	return sum, nil
}

// WaitMetric polls metric name until cond holds and returns its value.
func (p *Process) WaitMetric(name string, timeout time.Duration, cond func(float64) bool) float64 {
	p.t.Helper()
	var v float64
	var err error
	last := func() string {
		if err != nil {
			return fmt.Sprintf("metric %s (last read: %v)", name, err)
		}
		return fmt.Sprintf("metric %s (last value %v)", name, v)
	}
	waitFor(p.t, timeout, last, func() bool {
		v, err = p.Metric(name)
		return err == nil && cond(v)
	})
	return v
}
