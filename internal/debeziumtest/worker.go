package debeziumtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
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

const (
	// startTimeout bounds how long Start waits for the REST API: Connect
	// answers after 5-20 s on a shared 2-core machine.
	startTimeout = 180 * time.Second
	// defaultHeap is the worker's heap unless JVMOptions say otherwise.
	defaultHeap = "-Xms128M -Xmx512M"
	// mainClass is Connect standalone's entry point.
	mainClass = "org.apache.kafka.connect.cli.ConnectStandalone"
)

// PerfJVMOptions are the JVM flags Kafka's kafka-run-class.sh passes to
// every Kafka process, Connect included (its KAFKA_JVM_PERFORMANCE_OPTS).
var PerfJVMOptions = []string{"-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
	"-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
	"-XX:MaxInlineLevel=15", "-Djava.awt.headless=true"}

// Setup is a worker's configuration written to disk and its command line,
// not yet started. The benchmark starts it under its own process
// accounting; tests use Start.
type Setup struct {
	// Dir holds worker.properties, log4j2.properties, the connectors'
	// properties and offsets.dat.
	Dir string
	// REST is the host:port of the worker's REST API.
	REST string
	// Args are java's arguments (the JVM flags, class path, main class and
	// property files).
	Args []string
	// tempDir: Dir was created by Prepare and is removed by Close.
	tempDir bool
}

// Prepare writes the worker's files into o.Dir (or a new temporary
// directory) and returns its command line.
func Prepare(o WorkerOptions) (*Setup, error) {
	libs, err := LibsDir(o.Libs)
	if err != nil {
		return nil, err
	}
	s := &Setup{Dir: o.Dir}
	if s.Dir == "" {
		if s.Dir, err = os.MkdirTemp("", "debeziumtest-"); err != nil {
			return nil, fmt.Errorf("debeziumtest: %w", err)
		}
		s.tempDir = true
	} else if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("debeziumtest: %w", err)
	}
	port, err := freeport.Get()
	if err != nil {
		s.Remove()
		return nil, err
	}
	s.REST = "127.0.0.1:" + strconv.Itoa(port)
	worker, err := o.workerProperties(s.Dir, port)
	if err != nil {
		s.Remove()
		return nil, err
	}
	files := map[string][][2]string{"worker.properties": worker, "log4j2.properties": log4jProperties(o.LogLevel)}
	var connectorFiles []string
	for i, c := range o.Connectors {
		props, err := c.Properties()
		if err != nil {
			s.Remove()
			return nil, err
		}
		name := fmt.Sprintf("connector-%d.properties", i)
		files[name] = props
		connectorFiles = append(connectorFiles, filepath.Join(s.Dir, name))
	}
	for name, kvs := range files {
		if err := os.WriteFile(filepath.Join(s.Dir, name), []byte(render(kvs)), 0o644); err != nil {
			s.Remove()
			return nil, fmt.Errorf("debeziumtest: %w", err)
		}
	}
	jvm := o.JVMOptions
	if jvm == nil {
		jvm = strings.Fields(defaultHeap)
	}
	s.Args = append(append(append([]string{}, jvm...), PerfJVMOptions...), testtier.QuickJIT()...)
	s.Args = append(s.Args,
		"-Dlog4j2.configurationFile="+filepath.Join(s.Dir, "log4j2.properties"),
		"-cp", classPath(libs, o.ExtraLibs),
		mainClass, filepath.Join(s.Dir, "worker.properties"))
	s.Args = append(s.Args, connectorFiles...)
	return s, nil
}

// Remove deletes Dir if Prepare created it.
func (s *Setup) Remove() {
	if s.tempDir {
		os.RemoveAll(s.Dir)
	}
}

// Worker is a running Kafka Connect standalone process owned by a test.
type Worker struct {
	*Setup
	cmd   *exec.Cmd
	log   *os.File
	start time.Time
	done  chan struct{} // closed once the process has exited
	err   error         // cmd.Wait's result, valid once done is closed
}

// Start prepares the worker, starts it in its own process group (the
// kernel kills it if the test binary dies) and returns once its REST API
// answers. Its output is appended to Dir/connect.log. A REST port taken by
// another process in the meantime is retried with a new port. In a test,
// it refuses (testtier.ErrOff) while the service tier is off.
func Start(o WorkerOptions) (*Worker, error) {
	if err := testtier.Check(); err != nil {
		return nil, fmt.Errorf("debeziumtest: %w", err)
	}
	for attempt := 1; ; attempt++ {
		w, err := start(o)
		if err == nil || attempt == 3 || !errors.Is(err, errPortClash) {
			return w, err
		}
	}
}

// errPortClash marks a start that failed because the REST port was taken.
var errPortClash = errors.New("the REST port was taken")

func start(o WorkerOptions) (*Worker, error) {
	s, err := Prepare(o)
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(s.Dir, "connect.log")
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		s.Remove()
		return nil, fmt.Errorf("debeziumtest: %w", err)
	}
	var logStart int64
	if st, err := log.Stat(); err == nil {
		logStart = st.Size()
	}
	w := &Worker{Setup: s, log: log, done: make(chan struct{})}
	w.cmd = exec.Command("java", s.Args...)
	w.cmd.Dir = s.Dir
	w.cmd.Stdout, w.cmd.Stderr = log, log
	w.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	w.start = time.Now()
	if err := w.cmd.Start(); err != nil {
		log.Close()
		s.Remove()
		return nil, fmt.Errorf("debeziumtest: start java: %w", err)
	}
	go func() {
		w.err = w.cmd.Wait()
		close(w.done)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	err = w.poll(ctx, "the REST API", func() (bool, error) {
		// Connect's root answers with its version and the Kafka
		// cluster id; anything else on the port is not this worker.
		body, err := w.get(ctx, "/")
		return err == nil && bytes.Contains(body, []byte(`"kafka_cluster_id"`)), nil
	})
	if err != nil {
		clash := false
		if b, rerr := os.ReadFile(logPath); rerr == nil && int64(len(b)) >= logStart {
			clash = bytes.Contains(b[logStart:], []byte("Address already in use"))
		}
		w.Close()
		if clash {
			return nil, fmt.Errorf("%w: %w", errPortClash, err)
		}
		return nil, err
	}
	return w, nil
}

// Started is when the process was started.
func (w *Worker) Started() time.Time { return w.start }

// Done is closed once the process has exited; Err then holds its status.
func (w *Worker) Done() <-chan struct{} { return w.done }

// Err is the process's exit status, valid once Done is closed.
func (w *Worker) Err() error { return w.err }

// Output returns the last n lines of the worker's log.
func (w *Worker) Output(n int) string {
	b, err := os.ReadFile(filepath.Join(w.Dir, "connect.log"))
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// failure describes an error of the worker with the tail of its log.
func (w *Worker) failure(format string, args ...any) error {
	return fmt.Errorf("debeziumtest: %s\n--- tail of %s ---\n%s", fmt.Sprintf(format, args...), filepath.Join(w.Dir, "connect.log"), w.Output(60))
}

// AddConnector creates c through the REST API.
func (w *Worker) AddConnector(ctx context.Context, c Connector) error {
	props, err := c.Properties()
	if err != nil {
		return err
	}
	config := map[string]string{}
	for _, kv := range props {
		config[kv[0]] = kv[1]
	}
	body, _ := json.Marshal(map[string]any{"name": c.Name, "config": config})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+w.REST+"/connectors", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return w.failure("add connector %s: %v", c.Name, err)
	}
	defer res.Body.Close()
	msg, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusCreated && res.StatusCode != http.StatusOK {
		return w.failure("add connector %s: %s: %s", c.Name, res.Status, msg)
	}
	return nil
}

// PauseConnector pauses connector name (PUT /connectors/<name>/pause) and
// waits up to timeout until each of its tasks reports PAUSED. A task
// reports PAUSED from its own loop, after the records of its last poll
// went to the producer and before it polls again: from then on it
// publishes nothing, and confirms no position past what it published.
func (w *Worker) PauseConnector(ctx context.Context, name string, timeout time.Duration) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, "http://"+w.REST+"/connectors/"+name+"/pause", nil)
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return w.failure("pause connector %s: %v", name, err)
	}
	msg, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode/100 != 2 {
		return w.failure("pause connector %s: %s: %s", name, res.Status, msg)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return w.poll(ctx, "connector "+name+" PAUSED", func() (bool, error) {
		st, err := w.Status(ctx, name)
		if err != nil {
			return false, nil
		}
		if f := st.Failure(); f != "" {
			return false, fmt.Errorf("connector %s %s", name, f)
		}
		if len(st.Tasks) == 0 {
			return false, nil
		}
		for _, t := range st.Tasks {
			if t.State != "PAUSED" {
				return false, nil
			}
		}
		return true, nil
	})
}

// State is a connector's or task's state in Connect's status API.
type State struct {
	State string `json:"state"`
	Trace string `json:"trace"`
}

// Status is a connector's status as Connect's REST API reports it.
type Status struct {
	Connector State   `json:"connector"`
	Tasks     []State `json:"tasks"`
}

// Failure returns the trace of a failed connector or task, "" when none
// failed.
func (s Status) Failure() string {
	for _, st := range append([]State{s.Connector}, s.Tasks...) {
		if st.State == "FAILED" {
			return "FAILED: " + st.Trace
		}
	}
	return ""
}

// Running reports whether the connector and at least one task run.
func (s Status) Running() bool {
	if s.Connector.State != "RUNNING" || len(s.Tasks) == 0 {
		return false
	}
	for _, t := range s.Tasks {
		if t.State != "RUNNING" {
			return false
		}
	}
	return true
}

// ConnectorStatus asks the REST API at rest for connector name's status.
func ConnectorStatus(ctx context.Context, rest, name string) (Status, error) {
	var st Status
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+rest+"/connectors/"+name+"/status", nil)
	if err != nil {
		return st, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return st, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(res.Body)
		return st, fmt.Errorf("status of %s: %s: %s", name, res.Status, msg)
	}
	return st, json.NewDecoder(res.Body).Decode(&st)
}

// Status is ConnectorStatus on this worker.
func (w *Worker) Status(ctx context.Context, name string) (Status, error) {
	return ConnectorStatus(ctx, w.REST, name)
}

// WaitRunning polls until connector name and its task run; a failed
// connector or task, an exit of the worker or the timeout is an error.
func (w *Worker) WaitRunning(ctx context.Context, name string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return w.poll(ctx, "connector "+name+" RUNNING", func() (bool, error) {
		st, err := w.Status(ctx, name)
		if err != nil {
			return false, nil // not registered yet
		}
		if f := st.Failure(); f != "" {
			return false, fmt.Errorf("connector %s %s", name, f)
		}
		return st.Running(), nil
	})
}

// Check returns an error when connector name or its task failed or the
// worker exited; nil while it runs (or its status cannot be read).
func (w *Worker) Check(ctx context.Context, name string) error {
	select {
	case <-w.done:
		return w.failure("Connect exited: %v", w.err)
	default:
	}
	if st, err := w.Status(ctx, name); err == nil && st.Failure() != "" {
		return w.failure("connector %s %s", name, st.Failure())
	}
	return nil
}

// poll calls cond every 200 ms until it is true, returns an error, the
// worker exits or ctx ends.
func (w *Worker) poll(ctx context.Context, what string, cond func() (bool, error)) error {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := cond()
		if err != nil {
			return w.failure("waiting for %s: %v", what, err)
		}
		if ok {
			return nil
		}
		select {
		case <-w.done:
			return w.failure("Connect exited (%v) while waiting for %s", w.err, what)
		case <-ctx.Done():
			return w.failure("waiting for %s: %v", what, ctx.Err())
		case <-tick.C:
		}
	}
}

// get GETs path from the REST API and returns the body of a 200 answer.
func (w *Worker) get(ctx context.Context, path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+w.REST+path, nil)
	if err != nil {
		return nil, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", path, res.Status)
	}
	return b, err
}

// Stop sends SIGTERM, which makes Connect stop its tasks and commit their
// offsets, and waits up to timeout for the exit; an exit other than the
// JVM's after SIGTERM is an error. On timeout the worker is killed.
func (w *Worker) Stop(timeout time.Duration) error {
	w.signal(syscall.SIGTERM)
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-w.done:
	case <-t.C:
		w.Kill()
		return w.failure("Connect did not exit within %s of SIGTERM", timeout)
	}
	if w.err != nil && !ExitedOnSignal(w.err) {
		return w.failure("Connect exited after SIGTERM with %v", w.err)
	}
	return nil
}

// Kill ends the worker with SIGKILL (kill -9: no offsets are committed,
// nothing is flushed) unless it has exited, and waits for the exit.
func (w *Worker) Kill() {
	select {
	case <-w.done:
	default:
		w.signal(syscall.SIGKILL)
		<-w.done
	}
}

// Close kills the worker unless it has exited, closes its log and removes
// Dir if Start created it.
func (w *Worker) Close() {
	w.Kill()
	w.log.Close()
	w.Remove()
}

// signal sends sig to the worker's process group.
func (w *Worker) signal(sig syscall.Signal) { _ = syscall.Kill(-w.cmd.Process.Pid, sig) }

// ExitedOnSignal reports whether err is the exit of a process that a
// signal ended or that exited with 128+SIGTERM, as the JVM does after
// running its shutdown hooks.
func ExitedOnSignal(err error) bool {
	var ee interface{ ExitCode() int }
	if !errors.As(err, &ee) {
		return false
	}
	code := ee.ExitCode()
	return code == -1 || code == 128+int(syscall.SIGTERM)
}
