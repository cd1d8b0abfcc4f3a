// Command noskip runs `go test -json` with its arguments, prints what a
// plain `go test` prints (package results, build errors, the output of
// failed tests) and fails when a test skipped, as well as when go test
// fails. make test runs every tier through it, so a gate that skips a test
// can never hide a tier.
//
// Usage: go run ./internal/noskip [go test flags] [packages]
//
// The go command is $GO, else go.
package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run runs go test -json args, filtering its output into stdout, and
// returns the exit code: go test's when it failed, else 1 when a test
// skipped, else 0.
func run(args []string, stdout, stderr io.Writer) int {
	goBin := os.Getenv("GO")
	if goBin == "" {
		goBin = "go"
	}
	cmd := exec.Command(goBin, append([]string{"test", "-json"}, args...)...)
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintf(stderr, "noskip: %v\n", err)
		return 2
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "noskip: %v\n", err)
		return 2
	}
	f := newFilter(stdout)
	readErr := f.read(out)
	waitErr := cmd.Wait()
	f.report()
	switch {
	case readErr != nil:
		fmt.Fprintf(stderr, "noskip: read go test's output: %v\n", readErr)
		return 2
	case waitErr != nil:
		if exit, ok := waitErr.(*exec.ExitError); ok && exit.ExitCode() > 0 {
			return exit.ExitCode()
		}
		fmt.Fprintf(stderr, "noskip: go test: %v\n", waitErr)
		return 2
	case len(f.skipped) > 0:
		return 1
	}
	return 0
}
