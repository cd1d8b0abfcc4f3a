package tcpproxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

// echoServer echoes lines and reports when a connection ends.
type echoServer struct {
	ln     net.Listener
	wg     sync.WaitGroup
	closed chan struct{} // one value per connection that ended
}

func newEchoServer(t *testing.T) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &echoServer{ln: ln, closed: make(chan struct{}, 16)}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				io.Copy(c, c)
				c.Close()
				s.closed <- struct{}{}
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); s.wg.Wait() })
	return s
}

func newProxy(t *testing.T, target string) *Proxy {
	t.Helper()
	p, err := New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func dial(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

// roundTrip writes a line and reads the echo within timeout.
func roundTrip(c net.Conn, r *bufio.Reader, line string, timeout time.Duration) (string, error) {
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		return "", err
	}
	c.SetReadDeadline(time.Now().Add(timeout))
	defer c.SetReadDeadline(time.Time{})
	got, err := r.ReadString('\n')
	if err != nil {
		return got, err
	}
	return got[:len(got)-1], nil
}

func TestPass(t *testing.T) {
	s := newEchoServer(t)
	p := newProxy(t, s.ln.Addr().String())
	c, r := dial(t, p.Addr())
	if got, err := roundTrip(c, r, "hello", 5*time.Second); err != nil || got != "hello" {
		t.Fatalf("echo = %q, %v; want hello", got, err)
	}
	if p.Accepted() != 1 || p.Open() != 1 {
		t.Fatalf("accepted %d, open %d; want 1, 1", p.Accepted(), p.Open())
	}
}

func TestBlackholeHoldsBytesUntilResume(t *testing.T) {
	s := newEchoServer(t)
	p := newProxy(t, s.ln.Addr().String())
	c, r := dial(t, p.Addr())
	if _, err := roundTrip(c, r, "before", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Blackhole()
	_, err := roundTrip(c, r, "during", 300*time.Millisecond)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read through a blackholed proxy: %v, want a timeout", err)
	}
	// A new connection is accepted but reaches nothing.
	c2, r2 := dial(t, p.Addr())
	if _, err := roundTrip(c2, r2, "new", 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("new connection through a blackholed proxy: %v, want a timeout", err)
	}
	p.Resume()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if got, err := r.ReadString('\n'); err != nil || got != "during\n" {
		t.Fatalf("after Resume read %q, %v; want the held-back line", got, err)
	}
	c2.SetReadDeadline(time.Now().Add(5 * time.Second))
	if got, err := r2.ReadString('\n'); err != nil || got != "new\n" {
		t.Fatalf("new connection after Resume read %q, %v", got, err)
	}
}

func TestBlackholeHoldsClose(t *testing.T) {
	s := newEchoServer(t)
	p := newProxy(t, s.ln.Addr().String())
	c, r := dial(t, p.Addr())
	if _, err := roundTrip(c, r, "x", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Blackhole()
	c.Close()
	select {
	case <-s.closed:
		t.Fatal("the server saw the close through a blackholed proxy")
	case <-time.After(300 * time.Millisecond): // the close must not arrive: nothing to poll for
	}
	p.Resume()
	select {
	case <-s.closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the server did not see the close after Resume")
	}
}

func TestCutAll(t *testing.T) {
	s := newEchoServer(t)
	p := newProxy(t, s.ln.Addr().String())
	c, r := dial(t, p.Addr())
	if _, err := roundTrip(c, r, "x", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if n := p.CutAll(); n != 1 {
		t.Fatalf("CutAll closed %d connections, want 1", n)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.ReadString('\n'); !errors.Is(err, io.EOF) {
		t.Fatalf("read after CutAll: %v, want EOF", err)
	}
	select {
	case <-s.closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the server's side stayed open after CutAll")
	}
	// The proxy keeps accepting.
	c2, r2 := dial(t, p.Addr())
	if got, err := roundTrip(c2, r2, "again", 5*time.Second); err != nil || got != "again" {
		t.Fatalf("after CutAll: %q, %v", got, err)
	}
}

func TestSetTarget(t *testing.T) {
	p := newProxy(t, "")
	s := newEchoServer(t)
	p.SetTarget(s.ln.Addr().String())
	c, r := dial(t, p.Addr())
	if got, err := roundTrip(c, r, "late", 5*time.Second); err != nil || got != "late" {
		t.Fatalf("echo = %q, %v", got, err)
	}
}

func TestCloseEndsEverything(t *testing.T) {
	s := newEchoServer(t)
	p, err := New(s.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c, r := dial(t, p.Addr())
	p.Blackhole()
	c.Write([]byte("held\n"))
	p.Close() // must not hang on the blackholed link
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	// EOF, or a reset: the proxy closed with the held line unread.
	if _, err := r.ReadString('\n'); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read after Close: %v, want the connection closed", err)
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		t.Fatal("the proxy still accepts after Close")
	}
}
