package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// relay is the running cdc-relay process.
type relay struct {
	cmd         *exec.Cmd
	metricsAddr string
	http        *http.Client
	out         *prefixWriter

	done    chan struct{} // closed once the process has exited
	waitErr error         // cmd.Wait's result, valid once done is closed
}

// startRelay runs bin with args. Its stdout and stderr go to our stderr with
// each line prefixed "relay | ". It runs in its own process group, so that a
// terminal's Ctrl-C reaches only the demo, which then sends a single SIGTERM;
// the kernel kills it if the demo dies first.
func startRelay(bin string, args []string, metricsAddr string) (*relay, error) {
	r := &relay{
		metricsAddr: metricsAddr,
		http:        &http.Client{Timeout: 2 * time.Second},
		out:         &prefixWriter{prefix: "relay | ", w: os.Stderr},
		done:        make(chan struct{}),
	}
	r.cmd = exec.Command(bin, args...)
	r.cmd.Stdout = r.out
	r.cmd.Stderr = r.out
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start relay: %w", err)
	}
	go func() {
		r.waitErr = r.cmd.Wait()
		r.out.Flush()
		close(r.done)
	}()
	return r, nil
}

// waitReady polls /readyz until it answers 200, the relay exits, ctx ends or
// timeout passes.
func (r *relay) waitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	last := "no answer yet"
	for {
		if status, body, err := r.get(ctx, "/readyz"); err != nil {
			last = err.Error()
		} else if status == http.StatusOK {
			return nil
		} else {
			last = fmt.Sprintf("%d %s", status, strings.TrimSpace(body))
		}
		select {
		case <-r.done:
			return fmt.Errorf("relay exited before it was ready: %v", r.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("relay not ready within %s (last /readyz: %s): %w", timeout, last, ctx.Err())
		case <-tick.C:
		}
	}
}

// get fetches path from the relay's metrics server.
func (r *relay) get(ctx context.Context, path string) (status int, body string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.metricsAddr+path, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// metrics reads /metrics and returns each metric's value summed over its
// label sets, keyed by name.
func (r *relay) metrics(ctx context.Context) (map[string]float64, error) {
	status, body, err := r.get(ctx, "/metrics")
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %d", status)
	}
	m := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		// name{labels} value, where label values may hold spaces.
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			return nil, fmt.Errorf("GET /metrics: unexpected line %q", line)
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("GET /metrics: unexpected line %q", line)
		}
		name, _, _ := strings.Cut(line[:sp], "{")
		m[name] += v
	}
	return m, nil
}

// stop sends SIGTERM and waits up to timeout for the exit, then kills the
// relay. It returns the exit code; stopping an exited relay only reports it.
func (r *relay) stop(timeout time.Duration) (int, error) {
	select {
	case <-r.done:
		return r.cmd.ProcessState.ExitCode(), nil
	default:
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-r.done:
		return r.cmd.ProcessState.ExitCode(), nil
	case <-t.C:
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
		<-r.done
		return -1, errors.New("relay did not exit within " + timeout.String() + " of SIGTERM; killed it")
	}
}

// prefixWriter writes each complete line to w with prefix in front; exec
// calls Write from a single goroutine when Stdout and Stderr are the same
// writer.
type prefixWriter struct {
	prefix string
	w      io.Writer

	mu      sync.Mutex
	partial []byte // a line not yet ended by '\n'
}

// Write buffers p and writes out every line it completes.
func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.partial = append(p.partial, b...)
	for {
		i := bytes.IndexByte(p.partial, '\n')
		if i < 0 {
			break
		}
		p.w.Write(append([]byte(p.prefix), p.partial[:i+1]...))
		p.partial = p.partial[i+1:]
	}
	return len(b), nil
}

// Flush writes out a last line that had no '\n'.
func (p *prefixWriter) Flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.partial) > 0 {
		p.w.Write(append([]byte(p.prefix), append(p.partial, '\n')...))
		p.partial = nil
	}
}
