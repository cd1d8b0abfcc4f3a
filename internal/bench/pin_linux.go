package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// pinBench splits the CPUs for --pin-cpus: it moves this process (and so
// every child it starts from now on) to the second half of the CPUs and
// returns the function that moves a started PostgreSQL, given its data
// directory, to the first half, and a description of the split.
func pinBench() (pinPG func(dataDir string) error, desc string, err error) {
	pg, rest, err := cpuHalves()
	if err != nil {
		return nil, "", err
	}
	if err := pinSelf(&rest); err != nil {
		return nil, "", err
	}
	desc = fmt.Sprintf("PostgreSQL on CPUs %s, the rest (broker, registry, relay, pg_recvlogical, the benchmark) on CPUs %s", cpuList(&pg), cpuList(&rest))
	return func(dataDir string) error { return pinPostgres(dataDir, &pg) }, desc, nil
}

// cpuList names the CPUs of set, comma-separated.
func cpuList(set *unix.CPUSet) string {
	var cs []string
	for c := range 1024 {
		if set.IsSet(c) {
			cs = append(cs, strconv.Itoa(c))
		}
	}
	return strings.Join(cs, ",")
}

// cpuHalves splits the CPUs this process may use into two halves, the
// first for PostgreSQL and the second for everything else (--pin-cpus).
func cpuHalves() (pg, rest unix.CPUSet, err error) {
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		return pg, rest, fmt.Errorf("--pin-cpus: read this process's CPUs: %w", err)
	}
	var cpus []int
	for c := range 1024 {
		if all.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) < 2 {
		return pg, rest, fmt.Errorf("--pin-cpus needs at least 2 CPUs, this process may use %d", len(cpus))
	}
	for i, c := range cpus {
		if i < len(cpus)/2 {
			pg.Set(c)
		} else {
			rest.Set(c)
		}
	}
	return pg, rest, nil
}

// pinProcess sets the CPUs of every thread of pid; threads and children it
// starts later inherit them.
func pinProcess(pid int, set *unix.CPUSet) error {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("--pin-cpus: %w", err)
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, set); err != nil && err != unix.ESRCH {
			return fmt.Errorf("--pin-cpus: set the CPUs of thread %d of %d: %w", tid, pid, err)
		}
	}
	return nil
}

// pinSelf moves this process to set before it starts any child, so that
// the broker, the registry, the relay and pg_recvlogical inherit it.
func pinSelf(set *unix.CPUSet) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return pinProcess(os.Getpid(), set)
}

// pinPostgres moves PostgreSQL's postmaster (the first line of
// postmaster.pid in dataDir) and its children to set: backends and
// walsenders forked later inherit it.
func pinPostgres(dataDir string, set *unix.CPUSet) error {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return fmt.Errorf("--pin-cpus: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pm, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return fmt.Errorf("--pin-cpus: postmaster.pid: %w", err)
	}
	if err := pinProcess(pm, set); err != nil {
		return err
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return fmt.Errorf("--pin-cpus: %w", err)
	}
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || parentOf(pid) != pm {
			continue
		}
		if err := pinProcess(pid, set); err != nil {
			return err
		}
	}
	return nil
}

// parentOf returns pid's parent from /proc/<pid>/stat, or 0.
func parentOf(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}
