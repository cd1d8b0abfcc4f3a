// Package loopback gives tests both ends of a TCP connection on 127.0.0.1,
// for code that works on sockets (raw reads and writes, socket options).
//
// In: a test. Out: the dialling end and the accepted end, both
// *net.TCPConn, closed at the test's cleanup. Owns: the listener, closed
// once the connection is accepted.
package loopback

import (
	"net"
	"testing"
)

// Pair returns the dialling end and the accepted end of a new connection.
func Pair(t testing.TB) (client, server *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := <-accepted
	if s == nil {
		c.Close()
		t.Fatal("loopback: accept failed")
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c.(*net.TCPConn), s.(*net.TCPConn)
}
