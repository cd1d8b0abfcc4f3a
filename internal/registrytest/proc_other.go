//go:build unix && !linux

package registrytest

import "syscall"

// procAttr puts the registry in its own process group, so that Stop can signal
// the whole group.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
