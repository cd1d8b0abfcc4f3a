package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// fetchMetrics returns the relay's /metrics text.
func fetchMetrics(ctx context.Context, addr string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape relay metrics: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape relay metrics: %s", res.Status)
	}
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, fmt.Errorf("scrape relay metrics: %w", err)
	}
	return b, nil
}

// scrapeMetrics reads the relay's /metrics and returns each sample's value
// by metric name, summed over label sets.
func scrapeMetrics(ctx context.Context, addr string) (map[string]float64, error) {
	b, err := fetchMetrics(ctx, addr)
	if err != nil {
		return nil, err
	}
	return parseSamples(b)
}

// parseSamples returns each sample's value in Prometheus text by metric
// name, summed over label sets.
func parseSamples(b []byte) (map[string]float64, error) {
	m := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		name := line[:i]
		if j := strings.IndexByte(name, '{'); j >= 0 {
			name = name[:j]
		}
		m[name] += v
	}
	return m, sc.Err()
}

// histogram is one label set's Prometheus histogram: the buckets' upper
// bounds, ascending with +Inf last, and their cumulative counts.
type histogram struct {
	bounds []float64
	counts []float64
}

// parseHistograms reads the buckets of the histogram name (name_bucket
// samples) from Prometheus text and returns one histogram per value of the
// label by (e.g. "stage").
func parseHistograms(text []byte, name, by string) (map[string]histogram, error) {
	type bucket struct{ le, n float64 }
	buckets := map[string][]bucket{}
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name+"_bucket{")
		if !ok {
			continue
		}
		labelText, value, ok := strings.Cut(rest, "} ")
		if !ok {
			return nil, fmt.Errorf("parse %q: no value", line)
		}
		labels, err := parseLabels(labelText)
		if err != nil {
			return nil, fmt.Errorf("parse %q: %w", line, err)
		}
		n, err := strconv.ParseFloat(strings.Fields(value)[0], 64)
		if err != nil {
			return nil, fmt.Errorf("parse %q: %w", line, err)
		}
		le, err := strconv.ParseFloat(labels["le"], 64) // "+Inf" parses as +Inf
		if err != nil {
			return nil, fmt.Errorf("parse %q: le: %w", line, err)
		}
		buckets[labels[by]] = append(buckets[labels[by]], bucket{le, n})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	hs := map[string]histogram{}
	for k, bs := range buckets {
		slices.SortFunc(bs, func(a, b bucket) int { return cmpFloat(a.le, b.le) })
		var h histogram
		for _, b := range bs {
			h.bounds = append(h.bounds, b.le)
			h.counts = append(h.counts, b.n)
		}
		if len(h.bounds) == 0 || !math.IsInf(h.bounds[len(h.bounds)-1], 1) {
			return nil, fmt.Errorf("%s{%s=%q}: no +Inf bucket", name, by, k)
		}
		hs[k] = h
	}
	return hs, nil
}

// cmpFloat orders a and b.
func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// parseLabels reads a Prometheus label set's inside: k="v",k2="v2", with
// \\, \" and \n escapes in values.
func parseLabels(s string) (map[string]string, error) {
	m := map[string]string{}
	for s != "" {
		k, rest, ok := strings.Cut(s, "=\"")
		if !ok {
			return nil, fmt.Errorf("label set %q", s)
		}
		var v strings.Builder
		i := 0
		for ; i < len(rest) && rest[i] != '"'; i++ {
			if rest[i] == '\\' && i+1 < len(rest) {
				i++
				if rest[i] == 'n' {
					v.WriteByte('\n')
					continue
				}
			}
			v.WriteByte(rest[i])
		}
		if i == len(rest) {
			return nil, fmt.Errorf("label %s: unterminated value", k)
		}
		m[strings.TrimSpace(k)] = v.String()
		s = strings.TrimPrefix(rest[i+1:], ",")
	}
	return m, nil
}

// sub returns h minus an earlier scrape of the same histogram: what was
// observed in between. A missing earlier scrape (zero value) subtracts
// nothing.
func (h histogram) sub(earlier histogram) histogram {
	d := histogram{bounds: h.bounds, counts: slices.Clone(h.counts)}
	if len(earlier.counts) == len(h.counts) {
		for i := range d.counts {
			d.counts[i] -= earlier.counts[i]
		}
	}
	return d
}

// total is the number of observations.
func (h histogram) total() float64 {
	if len(h.counts) == 0 {
		return 0
	}
	return h.counts[len(h.counts)-1]
}

// quantile estimates the q-quantile as Prometheus's histogram_quantile
// does: it finds the bucket holding rank q*total and interpolates linearly
// inside it (the first bucket's lower bound is 0); in the +Inf bucket it
// returns the largest finite bound. It returns 0 for no observations.
func (h histogram) quantile(q float64) float64 {
	n := h.total()
	if n <= 0 {
		return 0
	}
	rank := q * n
	i, _ := slices.BinarySearchFunc(h.counts, rank, cmpFloat)
	i = min(i, len(h.counts)-1)
	if math.IsInf(h.bounds[i], 1) {
		if i == 0 {
			return 0
		}
		return h.bounds[i-1]
	}
	lower, below := 0.0, 0.0
	if i > 0 {
		lower, below = h.bounds[i-1], h.counts[i-1]
	}
	in := h.counts[i] - below
	if in <= 0 {
		return h.bounds[i]
	}
	return lower + (h.bounds[i]-lower)*(rank-below)/in
}
