package replication

import (
	"syscall"
	"time"
)

// tcpUserTimeoutOpt is TCP_USER_TIMEOUT from linux/tcp.h; package syscall
// does not define it.
const tcpUserTimeoutOpt = 0x12

// userTimeoutControl sets TCP_USER_TIMEOUT on TCP sockets: the kernel closes
// the connection when sent data stays unacknowledged for d (and, with
// keepalive on, when probes go unanswered that long).
func userTimeoutControl(d time.Duration) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, c syscall.RawConn) error {
		if network != "tcp" && network != "tcp4" && network != "tcp6" {
			return nil
		}
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpUserTimeoutOpt, int(d.Milliseconds()))
		})
		if err != nil {
			return err
		}
		return serr
	}
}
