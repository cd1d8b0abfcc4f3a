package replication

import (
	"net"
	"os"
	"syscall"
	"unsafe"
)

// setReadLowat sets SO_RCVLOWAT on c's TCP socket: the kernel wakes a
// reader waiting on it only once n bytes are queued (or its receive window
// runs short), while a read that finds data returns it at once. A
// connection that is not TCP is left alone. Wrappers that give their
// connection through NetConn (TLS, internal/rawsock) are looked through.
// The call is a raw one, as internal/rawsock's reads are: at a steady rate
// the option changes every few wake-ups, and the runtime's system-call path
// would wake its sysmon thread each time.
func setReadLowat(c net.Conn, n int) error {
	for {
		w, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		c = w.NetConn()
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		v := int32(n)
		if _, _, e := syscall.RawSyscall6(syscall.SYS_SETSOCKOPT, fd, syscall.SOL_SOCKET, syscall.SO_RCVLOWAT, uintptr(unsafe.Pointer(&v)), 4, 0); e != 0 {
			serr = os.NewSyscallError("setsockopt", e)
		}
	}); err != nil {
		return err
	}
	return serr
}
