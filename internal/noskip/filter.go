package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string // build-output and build-fail
	Test       string
	Output     string
	Elapsed    float64 // seconds, on pass, fail and skip
}

// timing is one test's time: for a parallel test, the time it ran, not
// the time it waited for a slot.
type timing struct {
	pkg, test string
	secs      float64
}

// slowest is how many tests the report lists by time: enough to see
// where a slow run's time went, from CI's output alone. It lists tests
// without subtests: a parent's time includes the time its parallel
// subtests waited for a slot.
const slowest = 15

// skip is one skipped test and what it printed.
type skip struct {
	pkg, test, output string
}

// filter turns test2json events back into go test's plain output, keeping
// each running test's output until the test ends: printed if it failed,
// dropped if it passed, kept for the report if it skipped.
type filter struct {
	w       io.Writer
	own     map[string]*strings.Builder // package + "\x00" + test: the test's own lines
	root    map[string]*strings.Builder // package + "\x00" + top-level test: its and its subtests' lines
	skipped []skip
	times   []timing
}

func newFilter(w io.Writer) *filter {
	return &filter{w: w, own: map[string]*strings.Builder{}, root: map[string]*strings.Builder{}}
}

// read filters r to its end.
func (f *filter) read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintf(f.w, "%s\n", line) // not an event: pass it on
			continue
		}
		f.event(e)
	}
	return sc.Err()
}

func key(pkg, test string) string { return pkg + "\x00" + test }

// rootOf is the top-level test of a test or subtest name.
func rootOf(test string) string {
	if i := strings.IndexByte(test, '/'); i >= 0 {
		return test[:i]
	}
	return test
}

func (f *filter) buf(m map[string]*strings.Builder, k string) *strings.Builder {
	b := m[k]
	if b == nil {
		b = &strings.Builder{}
		m[k] = b
	}
	return b
}

func (f *filter) event(e event) {
	switch {
	case e.Action == "build-output":
		io.WriteString(f.w, e.Output)
	case e.Test == "":
		f.packageEvent(e)
	case e.Action == "output":
		f.buf(f.own, key(e.Package, e.Test)).WriteString(e.Output)
		f.buf(f.root, key(e.Package, rootOf(e.Test))).WriteString(e.Output)
	case e.Action == "skip":
		f.skipped = append(f.skipped, skip{pkg: e.Package, test: e.Test, output: f.buf(f.own, key(e.Package, e.Test)).String()})
		f.end(e)
	case e.Action == "fail":
		if e.Test == rootOf(e.Test) {
			io.WriteString(f.w, f.buf(f.root, key(e.Package, e.Test)).String())
		}
		f.end(e)
	case e.Action == "pass":
		f.end(e)
	}
}

// end forgets a finished test's output (a top-level test's with its
// subtests').
func (f *filter) end(e event) {
	f.times = append(f.times, timing{pkg: e.Package, test: e.Test, secs: e.Elapsed})
	delete(f.own, key(e.Package, e.Test))
	if e.Test == rootOf(e.Test) {
		delete(f.root, key(e.Package, e.Test))
	}
}

// packageEvent prints a package's own output but its verbose PASS line.
// When the package failed, the output of tests that never ended (a
// timeout, a panic) is printed first.
func (f *filter) packageEvent(e event) {
	switch e.Action {
	case "output":
		if e.Output != "PASS\n" {
			io.WriteString(f.w, e.Output)
		}
	case "fail":
		prefix := key(e.Package, "")
		var pending []string
		for k := range f.root {
			if strings.HasPrefix(k, prefix) {
				pending = append(pending, k)
			}
		}
		sort.Strings(pending)
		for _, k := range pending {
			io.WriteString(f.w, f.root[k].String())
			delete(f.root, k)
		}
	}
}

// report lists the slowest top-level tests, then the skipped tests, with
// what each printed.
func (f *filter) report() {
	parents := map[string]bool{}
	for _, t := range f.times {
		for i := strings.LastIndexByte(t.test, '/'); i >= 0; i = strings.LastIndexByte(t.test[:i], '/') {
			parents[key(t.pkg, t.test[:i])] = true
		}
	}
	var leaves []timing
	for _, t := range f.times {
		if !parents[key(t.pkg, t.test)] {
			leaves = append(leaves, t)
		}
	}
	sort.SliceStable(leaves, func(i, j int) bool { return leaves[i].secs > leaves[j].secs })
	if n := min(len(leaves), slowest); n > 0 && leaves[0].secs >= 1 {
		fmt.Fprintf(f.w, "\nnoskip: the %d slowest tests (without subtests):\n", n)
		for _, t := range leaves[:n] {
			fmt.Fprintf(f.w, "%8.1fs  %s %s\n", t.secs, t.pkg, t.test)
		}
	}
	if len(f.skipped) == 0 {
		return
	}
	fmt.Fprintf(f.w, "\nnoskip: %d tests skipped; every tier runs here, so a skip is a failure:\n", len(f.skipped))
	for _, s := range f.skipped {
		fmt.Fprintf(f.w, "--- SKIP: %s %s\n%s", s.pkg, s.test, s.output)
	}
}
