package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// userHZ is the unit of utime and stime in /proc/<pid>/stat (USER_HZ, which
// Linux fixes at 100 for user space on every architecture Go supports).
const userHZ = 100

// cpuSeconds returns the user plus system CPU time pid has used so far.
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	s, err := parseStatCPU(b)
	if err != nil {
		return 0, fmt.Errorf("parse /proc/%d/stat: %w", pid, err)
	}
	return s, nil
}

// parseStatCPU returns utime plus stime, in seconds, from the text of a
// /proc/<pid>/stat file.
func parseStatCPU(b []byte) (float64, error) {
	// The command name, in parentheses, may hold spaces and parentheses:
	// count fields after its last closing parenthesis, where field 3
	// (state) is index 0.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 > len(b) {
		return 0, errors.New("no command name")
	}
	f := strings.Fields(string(b[i+2:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("%d fields after the command name, want at least 13", len(f))
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64) // field 14
	stime, err2 := strconv.ParseUint(f[12], 10, 64) // field 15
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return float64(utime+stime) / userHZ, nil
}

// cpuOrZero is cpuSeconds for figures that are only informative: 0 when pid
// is 0 or unreadable.
func cpuOrZero(pid int) float64 {
	if pid == 0 {
		return 0
	}
	s, _ := cpuSeconds(pid)
	return s
}

// busySeconds returns the CPU time all CPUs have spent busy (user, nice,
// system, irq, softirq, steal) since boot, from /proc/stat.
func busySeconds() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	var ticks uint64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		n, _ := strconv.ParseUint(f[i], 10, 64)
		ticks += n
	}
	return float64(ticks) / userHZ
}

// quietBusyCores is how busy the machine may be, in CPUs over one second,
// for waitQuiet to call it quiet: the idle broker and PostgreSQL stay below.
const quietBusyCores = 0.25

// waitQuiet samples the machine's busy CPU every second until one second
// used less than quietBusyCores, or maxWait passes (then it reports how busy
// the machine still is and returns, so the run is marked by its "other CPU
// s" figures rather than skipped).
func waitQuiet(ctx context.Context, maxWait time.Duration) error {
	if maxWait <= 0 {
		return nil
	}
	deadline := time.Now().Add(maxWait)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	last := busySeconds()
	for waited := false; ; waited = true {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		now := busySeconds()
		busy := now - last
		last = now
		if busy < quietBusyCores {
			return nil
		}
		if !time.Now().Before(deadline) {
			progress("the machine is still busy (%.2f CPUs) after waiting %s: measuring anyway", busy, maxWait)
			return nil
		}
		if !waited {
			progress("waiting for the machine to be quiet (%.2f CPUs busy by other processes)", busy)
		}
	}
}

// statusKB returns a field of /proc/<pid>/status given in kB, such as
// VmRSS or VmHWM.
func statusKB(pid int, key string) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, key+":"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no %s", pid, key)
}

// rssSampler records the largest VmRSS of a process, sampled on a ticker.
type rssSampler struct {
	stop   chan struct{}
	done   chan struct{}
	peakKB int64 // written by the sampling goroutine until done is closed
}

// sampleRSS starts sampling pid's VmRSS every interval.
func sampleRSS(pid int, every time.Duration) *rssSampler {
	s := &rssSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if kb, err := statusKB(pid, "VmRSS"); err == nil && kb > s.peakKB {
				s.peakKB = kb
			}
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// Stop ends the sampling and returns the peak in kB. It may be called more
// than once.
func (s *rssSampler) Stop() int64 {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
	return s.peakKB
}

// child is a process the benchmark started, in its own process group so
// that a terminal's Ctrl-C reaches only the benchmark, which then kills it;
// the kernel kills it too if the benchmark dies first.
type child struct {
	name  string
	cmd   *exec.Cmd
	out   *tailBuffer
	start time.Time

	done   chan struct{} // closed once the process has exited
	err    error         // cmd.Wait's result, valid once done is closed
	exitAt time.Time     // when Wait returned, valid once done is closed
}

// startChild runs bin with args (env nil means ours); cancelling ctx kills
// its process group.
func startChild(ctx context.Context, name, bin string, args, env []string) (*child, error) {
	return startChildOut(ctx, name, bin, args, env, nil)
}

// startChildOut is startChild with the standard output going to stdout
// (nil: kept with the standard error for failure).
func startChildOut(ctx context.Context, name, bin string, args, env []string, stdout *os.File) (*child, error) {
	return startChildWith(ctx, name, "", bin, args, env, stdout)
}

// startChildIn is startChild in the working directory dir.
func startChildIn(ctx context.Context, name, dir, bin string, args, env []string) (*child, error) {
	return startChildWith(ctx, name, dir, bin, args, env, nil)
}

// startChildWith is startChildOut in the working directory dir ("" ours).
func startChildWith(ctx context.Context, name, dir, bin string, args, env []string, stdout *os.File) (*child, error) {
	c := &child{name: name, out: &tailBuffer{max: 64 << 10}, done: make(chan struct{})}
	c.cmd = exec.CommandContext(ctx, bin, args...)
	c.cmd.Env = env
	c.cmd.Dir = dir
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	if stdout != nil {
		c.cmd.Stdout = stdout
	}
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	c.cmd.Cancel = func() error { return syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL) }
	c.start = time.Now()
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		c.err = c.cmd.Wait()
		c.exitAt = time.Now()
		close(c.done)
	}()
	return c, nil
}

// pid is the process id.
func (c *child) pid() int { return c.cmd.Process.Pid }

// signal sends sig to the process group.
func (c *child) signal(sig syscall.Signal) { _ = syscall.Kill(-c.pid(), sig) }

// kill ends the process group with SIGKILL, unless it has exited, and waits.
func (c *child) kill() {
	select {
	case <-c.done:
	default:
		c.signal(syscall.SIGKILL)
		<-c.done
	}
}

// wait waits up to timeout for the exit and returns cmd.Wait's result.
func (c *child) wait(ctx context.Context, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-c.done:
		return c.err
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return fmt.Errorf("%s did not exit within %s", c.name, timeout)
	}
}

// failure describes an error of the child with the tail of its output.
func (c *child) failure(format string, args ...any) error {
	return fmt.Errorf("%s: %s\n--- %s output (tail) ---\n%s", c.name, fmt.Sprintf(format, args...), c.name, c.out.String())
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

// Write appends p, dropping the oldest bytes beyond max.
func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

// String returns what is kept.
func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
