package replication

import (
	"net"
	"syscall"
)

// setReadLowat sets SO_RCVLOWAT on c's TCP socket: the kernel wakes a
// reader waiting on it only once n bytes are queued (or its receive window
// runs short), while a read that finds data returns it at once. A
// connection that is not TCP is left alone. Wrappers that give their
// connection through NetConn (TLS, internal/rawsock) are looked through.
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
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVLOWAT, n)
	}); err != nil {
		return err
	}
	return serr
}
