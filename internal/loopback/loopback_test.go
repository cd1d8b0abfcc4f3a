package loopback

import (
	"io"
	"testing"
)

// TestPairIsConnected: what one end writes the other reads.
func TestPairIsConnected(t *testing.T) {
	c, s := Pair(t)
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(s, buf); err != nil {
		t.Fatal(err)
	}
	if string(buf) != "ping" {
		t.Fatalf("read %q, want ping", buf)
	}
}
