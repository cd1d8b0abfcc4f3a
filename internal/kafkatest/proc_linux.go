package kafkatest

import "syscall"

// procAttr puts the broker in its own process group, so that Stop can signal
// the whole group, and has the kernel kill it when the test binary dies.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
