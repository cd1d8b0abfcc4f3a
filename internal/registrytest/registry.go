package registrytest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/freeport"
	"github.com/cdc-relay/cdc-relay/internal/testtier"
)

// startTimeout bounds how long Start and Restart wait for GET /subjects to
// answer 200; the registry is usually up within 100 ms.
const startTimeout = 30 * time.Second

// Registry is a running schema registry owned by a test.
type Registry struct {
	bin  string
	port int
	log  string // path of the log file, in a temp dir that Close removes

	mu     sync.Mutex // serialises Stop, Restart and Close
	proc   *exec.Cmd  // nil while stopped
	done   chan struct{}
	closed bool
}

// Start runs the registry on a random free port with memory storage and
// returns once GET /subjects answers 200. Failures carry the log's tail.
func Start() (*Registry, error) {
	if err := testtier.Check(); err != nil {
		return nil, fmt.Errorf("registrytest: %w", err)
	}
	bin, err := binPath()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "registrytest-")
	if err != nil {
		return nil, fmt.Errorf("registrytest: %w", err)
	}
	r := &Registry{bin: bin, log: filepath.Join(dir, "registry.log")}
	for attempt := 1; ; attempt++ {
		if r.port, err = freeport.Get(); err == nil {
			err = r.start()
		}
		// A port taken in the meantime makes the process exit: try another.
		if err == nil || attempt == 3 || !strings.Contains(tail(r.log), "address already in use") {
			break
		}
	}
	if err != nil {
		err = fmt.Errorf("registrytest: start: %w\n--- tail of %s ---\n%s", err, r.log, tail(r.log))
		os.RemoveAll(dir)
		return nil, err
	}
	return r, nil
}

// binPath returns the registry binary, checking that it exists.
func binPath() (string, error) {
	bin := os.Getenv("CDC_RELAY_SCHEMA_REGISTRY_BIN")
	if bin == "" {
		cache := os.Getenv("CDC_RELAY_CACHE")
		if cache == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", fmt.Errorf("registrytest: find the cache dir (set CDC_RELAY_CACHE): %w", err)
			}
			cache = filepath.Join(home, ".cache", "cdc-relay")
		}
		bin = filepath.Join(cache, "bin", "schema-registry")
	}
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("registrytest: no schema registry binary: run `make setup` (or scripts/setup.sh): %w", err)
	}
	return bin, nil
}

// start launches the process and waits until it answers.
func (r *Registry) start() error {
	log, err := os.OpenFile(r.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close() // the child has its own copy
	cmd := exec.Command(r.bin)
	cmd.Env = []string{
		"SCHEMA_REGISTRY_HOST=127.0.0.1",
		"SCHEMA_REGISTRY_PORT=" + strconv.Itoa(r.port),
		"SCHEMA_REGISTRY_STORAGE_TYPE=memory",
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("run %s: %w", r.bin, err)
	}
	done := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(done) }()
	r.proc, r.done = cmd, done
	if err := r.waitReady(); err != nil {
		select {
		case <-done:
			err = fmt.Errorf("registry exited during startup: %v", waitErr)
		default:
		}
		r.kill()
		return err
	}
	return nil
}

// waitReady polls GET /subjects until it answers 200, the process exits or
// startTimeout passes.
func (r *Registry) waitReady() error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	client := &http.Client{Timeout: 2 * time.Second}
	last := errors.New("no answer yet")
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.URL()+"/subjects", nil)
		if err != nil {
			return err
		}
		if res, err := client.Do(req); err != nil {
			last = err
		} else {
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Errorf("GET /subjects: %s", res.Status)
		}
		select {
		case <-r.done:
			return errors.New("registry exited during startup")
		case <-ctx.Done():
			return fmt.Errorf("registry not ready after %s: %w", startTimeout, last)
		case <-tick.C:
		}
	}
}

// kill ends the process group with SIGKILL and waits for the exit.
func (r *Registry) kill() {
	if r.proc == nil {
		return
	}
	_ = syscall.Kill(-r.proc.Process.Pid, syscall.SIGKILL)
	<-r.done
	r.proc, r.done = nil, nil
}

// URL returns the registry's base URL, "http://127.0.0.1:port".
func (r *Registry) URL() string { return "http://127.0.0.1:" + strconv.Itoa(r.port) }

// LogPath returns the path of the registry's log (JSON lines).
func (r *Registry) LogPath() string { return r.log }

// Stop kills the registry. With memory storage its schemas are lost.
// Stopping a stopped registry does nothing.
func (r *Registry) Stop() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.kill()
	return nil
}

// Restart stops the registry if it runs and starts it again, empty, on the
// same port, returning once it answers.
func (r *Registry) Restart() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return errors.New("registrytest: restart: registry is closed")
	}
	r.kill()
	if err := r.start(); err != nil {
		return fmt.Errorf("registrytest: restart: %w\n--- tail of %s ---\n%s", err, r.log, tail(r.log))
	}
	return nil
}

// Close stops the registry and removes its log directory.
func (r *Registry) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.kill()
	if r.closed {
		return nil
	}
	r.closed = true
	if err := os.RemoveAll(filepath.Dir(r.log)); err != nil {
		return fmt.Errorf("registrytest: close: %w", err)
	}
	return nil
}

// tail returns the last lines of the log at path.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return strings.Join(lines, "\n")
}
