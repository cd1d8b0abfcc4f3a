package relaytest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/freeport"
	"github.com/cdc-relay/cdc-relay/internal/testtier"
)

// Options say how Start runs a binary.
type Options struct {
	// Name names the process in failures and logs; default "relay".
	Name string
	// Dir is the working directory; default the caller's.
	Dir string
	// MetricsPort appends --metrics-addr 127.0.0.1:<a free port> to the
	// arguments and sets MetricsAddr; default off.
	MetricsPort bool
	// LogDir, when set, also writes the output to a file of its own there,
	// named after the test; default "" (kept in memory only).
	LogDir string
	// TailBytes is how much of the output a failure shows; default 4000.
	TailBytes int
	// Env is added to the environment (KEY=value), after the test's own
	// (less the service tier's switch, testtier.Env); default nothing.
	Env []string
}

// Process is a running binary whose stdout and stderr are kept in memory.
type Process struct {
	// Cmd is the started command.
	Cmd *exec.Cmd
	// MetricsAddr is host:port of its metrics server (Options.MetricsPort).
	MetricsAddr string

	t        T
	name     string
	tail     int
	out      LogBuffer
	done     chan struct{}
	exitCode int
}

// Start runs bin with args and GOMAXPROCS=2 in the environment. At t's
// cleanup the process is killed and, if t failed, the tail of its output is
// logged.
func Start(t T, bin string, args []string, o Options) *Process {
	t.Helper()
	if o.Name == "" {
		o.Name = "relay"
	}
	if o.TailBytes == 0 {
		o.TailBytes = 4000
	}
	p := &Process{t: t, name: o.Name, tail: o.TailBytes, done: make(chan struct{})}
	if o.MetricsPort {
		port, err := freeport.Get()
		if err != nil {
			t.Fatalf("metrics port: %v", err)
		}
		p.MetricsAddr = "127.0.0.1:" + strconv.Itoa(port)
		args = append(append([]string(nil), args...), "--metrics-addr", p.MetricsAddr)
	}
	p.Cmd = exec.Command(bin, args...)
	p.Cmd.Dir = o.Dir
	var out io.Writer = p
	if o.LogDir != "" {
		// Keep the log on disk, to debug a hung or killed test run.
		name := fmt.Sprintf("%s-%d.log", strings.ReplaceAll(t.Name(), "/", "_"), time.Now().UnixNano())
		if lf, err := os.Create(filepath.Join(o.LogDir, name)); err == nil {
			t.Cleanup(func() { lf.Close() })
			out = io.MultiWriter(p, lf)
		}
	}
	p.Cmd.Stdout, p.Cmd.Stderr = out, out
	p.Cmd.Env = append(append(childEnv(), "GOMAXPROCS=2"), o.Env...)
	if err := p.Cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", o.Name, err)
	}
	go func() {
		p.Cmd.Wait()
		p.exitCode = p.Cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("%s output (tail):\n%s", p.name, Tail(p.Output(), p.tail))
		}
	})
	return p
}

// Write keeps b as output; the process writes through it.
func (p *Process) Write(b []byte) (int, error) { return p.out.Write(b) }

// Output is what the process has written so far.
func (p *Process) Output() string { return p.out.String() }

// Lines returns the output lines that start with prefix.
func (p *Process) Lines(prefix string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(p.Output()))
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), prefix) {
			out = append(out, sc.Text())
		}
	}
	return out
}

// Done is closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// ExitCode is the process's exit code, valid once Done is closed.
func (p *Process) ExitCode() int { return p.exitCode }

// Kill sends SIGKILL, unless the process has ended, and waits for the end.
func (p *Process) Kill() {
	select {
	case <-p.done:
	default:
		p.Cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}
}

// Wait waits for the process to exit and returns its exit code; it fails
// the test if that takes longer than timeout.
func (p *Process) Wait(timeout time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
		return p.exitCode
	case <-time.After(timeout):
		p.t.Fatalf("%s did not exit within %s; where its goroutines were (SIGQUIT), then its output:\n%s", p.name, timeout, p.stacks())
		return -1
	}
}

// stacks sends SIGQUIT, which makes a Go process print every goroutine's
// stack and exit, and returns the output after the dump's start and the
// tail of the output before it: where a process that would not exit hung.
func (p *Process) stacks() string {
	before := p.Output()
	p.Cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
	}
	dump := strings.TrimPrefix(p.Output(), before)
	return dump + "\n(output before SIGQUIT:)\n" + Tail(before, p.tail)
}

// Terminate sends SIGTERM and returns the exit code (Wait, 60 s).
func (p *Process) Terminate() int {
	p.t.Helper()
	p.Cmd.Process.Signal(syscall.SIGTERM)
	return p.Wait(60 * time.Second)
}

// Freeze sends SIGSTOP: the process stops where it is, its sockets stay
// open and nothing of it runs until Thaw. A frozen process is a zombie to
// the others: alive to the kernel and to TCP, silent to its peers.
func (p *Process) Freeze() {
	p.t.Helper()
	if err := p.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		p.t.Fatalf("SIGSTOP %s: %v", p.name, err)
	}
}

// Thaw sends SIGCONT: a frozen process carries on from where it stopped.
func (p *Process) Thaw() {
	p.t.Helper()
	if err := p.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		p.t.Fatalf("SIGCONT %s: %v", p.name, err)
	}
}

// Pid is the process id.
func (p *Process) Pid() int { return p.Cmd.Process.Pid }

// childEnv is the test's environment without the service tier's switch
// (testtier.Env): the relay warns of every CDC_RELAY_* variable no setting
// reads, and a process started by a test runs as it would outside one.
func childEnv() []string {
	env := os.Environ()
	kept := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, testtier.Env+"=") {
			kept = append(kept, kv)
		}
	}
	return kept
}
