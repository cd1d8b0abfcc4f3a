package main

import (
	"strings"
	"testing"
)

// TestFilter: go test's plain output comes back from its -json events;
// skipped tests are kept, a package without test files is no skip.
func TestFilter(t *testing.T) {
	for _, tc := range []struct {
		name        string
		in          string
		wantOut     string
		wantSkipped []string
	}{{
		name: "pass",
		in: `{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"output","Package":"p","Test":"TestA","Output":"--- PASS: TestA (0.00s)\n"}
{"Action":"pass","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Output":"PASS\n"}
{"Action":"output","Package":"p","Output":"ok  \tp\t0.1s\n"}
{"Action":"pass","Package":"p"}
`,
		wantOut: "ok  \tp\t0.1s\n",
	}, {
		name: "no test files",
		in: `{"Action":"output","Package":"q","Output":"?   \tq\t[no test files]\n"}
{"Action":"skip","Package":"q"}
`,
		wantOut: "?   \tq\t[no test files]\n",
	}, {
		name: "a failed subtest prints its top-level test",
		in: `{"Action":"output","Package":"p","Test":"TestB","Output":"=== RUN   TestB\n"}
{"Action":"output","Package":"p","Test":"TestB/x","Output":"    b_test.go:9: boom\n"}
{"Action":"fail","Package":"p","Test":"TestB/x"}
{"Action":"fail","Package":"p","Test":"TestB"}
{"Action":"output","Package":"p","Output":"FAIL\tp\t0.1s\n"}
{"Action":"fail","Package":"p"}
`,
		wantOut: "=== RUN   TestB\n    b_test.go:9: boom\nFAIL\tp\t0.1s\n",
	}, {
		name: "skips",
		in: `{"Action":"output","Package":"p","Test":"TestC","Output":"    c_test.go:3: the service tier is off\n"}
{"Action":"skip","Package":"p","Test":"TestC"}
{"Action":"output","Package":"p","Test":"TestD/y","Output":"    d_test.go:4: off\n"}
{"Action":"skip","Package":"p","Test":"TestD/y"}
{"Action":"pass","Package":"p","Test":"TestD"}
`,
		wantSkipped: []string{"p TestC:     c_test.go:3: the service tier is off\n", "p TestD/y:     d_test.go:4: off\n"},
	}, {
		name: "a package that dies prints its unfinished tests",
		in: `{"Action":"output","Package":"p","Test":"TestE","Output":"=== RUN   TestE\n"}
{"Action":"output","Package":"p","Output":"panic: test timed out\n"}
{"Action":"fail","Package":"p"}
`,
		wantOut: "panic: test timed out\n=== RUN   TestE\n",
	}, {
		name:    "lines that are not events pass through",
		in:      "# p\nbuild failed\n",
		wantOut: "# p\nbuild failed\n",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			f := newFilter(&out)
			if err := f.read(strings.NewReader(tc.in)); err != nil {
				t.Fatal(err)
			}
			if got := out.String(); got != tc.wantOut {
				t.Errorf("output:\n%q\nwant\n%q", got, tc.wantOut)
			}
			var got []string
			for _, s := range f.skipped {
				got = append(got, s.pkg+" "+s.test+": "+s.output)
			}
			if strings.Join(got, "|") != strings.Join(tc.wantSkipped, "|") {
				t.Errorf("skipped %q, want %q", got, tc.wantSkipped)
			}
		})
	}
}

// TestReportNamesSkips: the report names each skipped test and what it
// printed, and says why it fails the run.
func TestReportNamesSkips(t *testing.T) {
	var out strings.Builder
	f := newFilter(&out)
	f.skipped = []skip{{pkg: "p", test: "TestC", output: "    off\n"}}
	f.report()
	for _, want := range []string{"1 tests skipped", "a skip is a failure", "--- SKIP: p TestC\n    off\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report %q does not say %q", out.String(), want)
		}
	}
}

// TestReportListsSlowest: the report lists the slowest tests without
// subtests, slowest first, with their packages (a parent's time includes
// its parallel subtests' waits); a run of only fast tests lists none.
func TestReportListsSlowest(t *testing.T) {
	var out strings.Builder
	f := newFilter(&out)
	in := `{"Action":"pass","Package":"p","Test":"TestFast","Elapsed":2}
{"Action":"pass","Package":"p","Test":"TestSlow","Elapsed":91.25}
{"Action":"pass","Package":"p","Test":"TestParent/a/b","Elapsed":50}
{"Action":"pass","Package":"p","Test":"TestParent/a","Elapsed":300}
{"Action":"pass","Package":"p","Test":"TestParent","Elapsed":301}
{"Action":"fail","Package":"q","Test":"TestMid","Elapsed":30}
`
	if err := f.read(strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	f.report()
	want := "\nnoskip: the 4 slowest tests (without subtests):\n    91.2s  p TestSlow\n    50.0s  p TestParent/a/b\n    30.0s  q TestMid\n     2.0s  p TestFast\n"
	if out.String() != want {
		t.Errorf("report:\n%q\nwant:\n%q", out.String(), want)
	}
	out.Reset()
	f = newFilter(&out)
	f.read(strings.NewReader(`{"Action":"pass","Package":"p","Test":"TestQuick","Elapsed":0.01}` + "\n"))
	f.report()
	if out.String() != "" {
		t.Errorf("a run of fast tests reports %q, want nothing", out.String())
	}
}
