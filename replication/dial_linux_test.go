package replication

import (
	"context"
	"net"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestDialSetsUserTimeout: the relay's sockets give up on a peer that stops
// acknowledging (TCP_USER_TIMEOUT).
func TestDialSetsUserTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg, err := pgconn.ParseConfig("postgres://u@" + ln.Addr().String() + "/db")
	if err != nil {
		t.Fatal(err)
	}
	configureConn(cfg)
	c, err := cfg.DialFunc(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var got int
	var gerr error
	raw.Control(func(fd uintptr) {
		got, gerr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpUserTimeoutOpt)
	})
	if gerr != nil {
		t.Fatal(gerr)
	}
	if want := int(tcpUserTimeout.Milliseconds()); got != want {
		t.Fatalf("TCP_USER_TIMEOUT = %d ms, want %d", got, want)
	}
}
