package replication

import (
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/loopback"
	"github.com/cdc-relay/cdc-relay/internal/rawsock"
)

func rcvLowat(t *testing.T, c *net.TCPConn) int {
	t.Helper()
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var got int
	var gerr error
	raw.Control(func(fd uintptr) {
		got, gerr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVLOWAT)
	})
	if gerr != nil {
		t.Fatal(gerr)
	}
	return got
}

// TestReadLowatWakesOnlyForEnough: with SO_RCVLOWAT set, a read parked on
// the socket is not woken by a few bytes, and wakes with all of them once
// streamLowat bytes are queued; setting 1 restores the default. The same
// through internal/rawsock's wrapper, which the stream's connection has.
func TestReadLowatWakesOnlyForEnough(t *testing.T) {
	t.Run("tcp", func(t *testing.T) { testReadLowat(t, func(c net.Conn) net.Conn { return c }) })
	t.Run("rawsock", func(t *testing.T) { testReadLowat(t, rawsock.Wrap) })
}

func testReadLowat(t *testing.T, wrap func(net.Conn) net.Conn) {
	w, tcp := loopback.Pair(t)
	r := wrap(tcp)

	if err := setReadLowat(r, streamLowat); err != nil {
		t.Fatal(err)
	}
	if got := rcvLowat(t, tcp); got != streamLowat {
		t.Fatalf("SO_RCVLOWAT = %d, want %d", got, streamLowat)
	}

	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	buf := make([]byte, 4*streamLowat)
	go func() {
		r.SetReadDeadline(time.Now().Add(time.Minute))
		n, err := r.Read(buf)
		done <- result{n, err}
	}()
	// Wait until the read has found the socket empty and parked.
	waitParked(t)
	first := []byte("a few bytes")
	if _, err := w.Write(first); err != nil {
		t.Fatal(err)
	}
	rest := bytes.Repeat([]byte{'x'}, streamLowat)
	if _, err := w.Write(rest); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	if res.n < streamLowat {
		t.Fatalf("the parked read woke with %d bytes, want at least %d (SO_RCVLOWAT not honoured)", res.n, streamLowat)
	}
	if !bytes.HasPrefix(buf[:res.n], first) {
		t.Fatalf("read %q..., want the first write first", buf[:len(first)])
	}
	if _, err := io.ReadFull(r, buf[:len(first)+len(rest)-res.n]); err != nil {
		t.Fatal(err)
	}

	if err := setReadLowat(r, 1); err != nil {
		t.Fatal(err)
	}
	if got := rcvLowat(t, tcp); got != 1 {
		t.Fatalf("SO_RCVLOWAT = %d after reset, want 1", got)
	}
}

// waitParked polls, up to a deadline, until some goroutine is parked in
// the network poller.
func waitParked(t *testing.T) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		n := runtime.Stack(buf, true)
		if strings.Contains(string(buf[:n]), "[IO wait") && strings.Contains(string(buf[:n]), "testReadLowat") {
			return
		}
		runtime.Gosched()
	}
	t.Fatal("the read did not park on the socket within 10 s")
}

// TestReadLowatLooksThroughTLS: the option reaches the socket under TLS
// over internal/rawsock's wrapper, as a stream with sslmode has it.
func TestReadLowatLooksThroughTLS(t *testing.T) {
	c, _ := loopback.Pair(t)
	wrapped := tls.Client(rawsock.Wrap(c), &tls.Config{InsecureSkipVerify: true})
	if err := setReadLowat(wrapped, streamLowat); err != nil {
		t.Fatal(err)
	}
	if got := rcvLowat(t, c); got != streamLowat {
		t.Fatalf("SO_RCVLOWAT = %d through TLS and rawsock, want %d", got, streamLowat)
	}
}

// TestReadLowatLeavesOtherConnsAlone: a connection that is not TCP (an in-memory
// pipe, here) is left as it is, without an error.
func TestReadLowatLeavesOtherConnsAlone(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if err := setReadLowat(a, streamLowat); err != nil {
		t.Fatalf("setReadLowat on a pipe: %v", err)
	}
}
