package rawsock

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/loopback"
)

// pair returns a wrapped client conn and the server's end of it.
func pair(t *testing.T) (net.Conn, *net.TCPConn) {
	t.Helper()
	c, s := loopback.Pair(t)
	w := Wrap(c)
	if _, ok := w.(*conn); !ok {
		t.Fatalf("Wrap returned %T, want the raw conn", w)
	}
	return w, s
}

// TestBothWays sends 8 MB each way at once, more than the socket buffers
// hold, so that writes stop part-way (EAGAIN) and reads wait for data.
func TestBothWays(t *testing.T) {
	c, s := pair(t)
	out := make([]byte, 8<<20)
	for i := range out {
		out[i] = byte(rand.Uint32())
	}
	errs := make(chan error, 4)
	var fromServer, fromClient bytes.Buffer
	go func() { _, err := c.Write(out); errs <- err }()
	go func() { _, err := s.Write(out); errs <- err }()
	go func() { _, err := io.CopyN(&fromServer, c, int64(len(out))); errs <- err }()
	go func() { _, err := io.CopyN(&fromClient, s, int64(len(out))); errs <- err }()
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(fromServer.Bytes(), out) || !bytes.Equal(fromClient.Bytes(), out) {
		t.Fatal("the bytes read differ from the bytes written")
	}
}

// TestReadDeadline: a read past the deadline fails as net's does: a
// timeout, os.ErrDeadlineExceeded, op "read".
func TestReadDeadline(t *testing.T) {
	c, _ := pair(t)
	c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	_, err := c.Read(make([]byte, 10))
	var ne net.Error
	var oe *net.OpError
	if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() || !errors.As(err, &oe) || oe.Op != "read" {
		t.Fatalf("read past the deadline: %v (%T), want a timeout *net.OpError with op read", err, err)
	}
}

// TestEOF: the peer's close is io.EOF, after the data it sent.
func TestEOF(t *testing.T) {
	c, s := pair(t)
	s.Write([]byte("last"))
	s.Close()
	b, err := io.ReadAll(c)
	if err != nil || string(b) != "last" {
		t.Fatalf("read %q, %v; want \"last\" and io.EOF at the end", b, err)
	}
}

// TestReset: a reset by the peer is ECONNRESET in a *net.OpError.
func TestReset(t *testing.T) {
	c, s := pair(t)
	s.SetLinger(0)
	s.Close()
	_, err := c.Read(make([]byte, 10))
	var oe *net.OpError
	if !errors.Is(err, syscall.ECONNRESET) || !errors.As(err, &oe) || oe.Op != "read" {
		t.Fatalf("read after a reset: %v, want ECONNRESET in a read *net.OpError", err)
	}
}

// TestClosed: reads and writes on a closed conn fail with net.ErrClosed.
func TestClosed(t *testing.T) {
	c, _ := pair(t)
	c.Close()
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read after Close: %v, want net.ErrClosed", err)
	}
	if _, err := c.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write after Close: %v, want net.ErrClosed", err)
	}
}

// TestWrapOther: a conn that is not TCP comes back as it was.
func TestWrapOther(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if Wrap(a) != a {
		t.Fatal("Wrap changed a pipe")
	}
}
