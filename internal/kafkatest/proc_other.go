//go:build unix && !linux

package kafkatest

import "syscall"

// procAttr puts the broker in its own process group, so that Stop can signal
// the whole group.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
