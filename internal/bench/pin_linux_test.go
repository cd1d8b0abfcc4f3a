package main

import (
	"os"
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCPUHalves checks that --pin-cpus splits this process's CPUs into two
// disjoint, non-empty halves that cover them all.
func TestCPUHalves(t *testing.T) {
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		t.Fatal(err)
	}
	pg, rest, err := cpuHalves()
	if all.Count() < 2 {
		if err == nil {
			t.Fatalf("cpuHalves on %d CPU(s) succeeded", all.Count())
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if pg.Count() == 0 || rest.Count() == 0 || pg.Count()+rest.Count() != all.Count() {
		t.Fatalf("halves of %d CPUs: %d and %d", all.Count(), pg.Count(), rest.Count())
	}
	for c := range 1024 {
		if pg.IsSet(c) && rest.IsSet(c) {
			t.Errorf("CPU %d is in both halves", c)
		}
		if (pg.IsSet(c) || rest.IsSet(c)) != all.IsSet(c) {
			t.Errorf("CPU %d: in a half %t, in the process's set %t", c, pg.IsSet(c) || rest.IsSet(c), all.IsSet(c))
		}
	}
}

// TestPinProcess pins a child process to one CPU and reads its CPUs back,
// and checks that the child's parent is found as /proc tells it.
func TestPinProcess(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	if got := parentOf(cmd.Process.Pid); got != os.Getpid() {
		t.Errorf("parentOf(child) = %d, want %d", got, os.Getpid())
	}
	var all, one, got unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		t.Fatal(err)
	}
	last := -1
	for c := range 1024 {
		if all.IsSet(c) {
			last = c
		}
	}
	one.Set(last)
	if err := pinProcess(cmd.Process.Pid, &one); err != nil {
		t.Fatal(err)
	}
	if err := unix.SchedGetaffinity(cmd.Process.Pid, &got); err != nil {
		t.Fatal(err)
	}
	if got != one {
		t.Errorf("child's CPUs after pinning: %d CPU(s), want only CPU %d", got.Count(), last)
	}
}
