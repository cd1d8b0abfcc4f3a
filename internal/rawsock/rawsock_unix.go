//go:build linux

package rawsock

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

// conn is a TCP connection whose Read and Write use raw system calls.
type conn struct {
	*net.TCPConn
	rc syscall.RawConn
}

// Wrap returns c with raw reads and writes, or c itself when it is not a
// TCP connection.
func Wrap(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	return &conn{TCPConn: tc, rc: rc}
}

// NetConn is the TCP connection under c, as tls.Conn's NetConn is: for
// the socket options set on it (SO_RCVLOWAT).
func (c *conn) NetConn() net.Conn { return c.TCPConn }

func (c *conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	err := c.rc.Read(func(fd uintptr) bool {
		for {
			r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
			switch e {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false
			}
			n, errno = int(r), e
			return true
		}
	})
	if err != nil {
		return 0, c.opError("read", err)
	}
	if errno != 0 {
		return 0, c.opError("read", os.NewSyscallError("read", errno))
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

func (c *conn) Write(p []byte) (int, error) {
	var n int
	var errno syscall.Errno
	err := c.rc.Write(func(fd uintptr) bool {
		for n < len(p) {
			r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[n])), uintptr(len(p)-n))
			switch e {
			case 0:
				n += int(r)
			case syscall.EINTR:
			case syscall.EAGAIN:
				return false
			default:
				errno = e
				return true
			}
		}
		return true
	})
	if err != nil {
		return n, c.opError("write", err)
	}
	if errno != 0 {
		return n, c.opError("write", os.NewSyscallError("write", errno))
	}
	return n, nil
}

// opError is err as net's own Read and Write return it. The raw conn's
// errors (a deadline, a closed conn) come as *net.OpError already, named
// raw-read or raw-write; they are renamed.
func (c *conn) opError(op string, err error) error {
	if oe, ok := err.(*net.OpError); ok {
		err = oe.Err
	}
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}
