package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestGetN(t *testing.T) {
	got, err := GetN(3)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range got {
		if p <= 0 || seen[p] {
			t.Fatalf("GetN(3) = %v: want distinct positive ports", got)
		}
		seen[p] = true
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d is not bindable: %v", p, err)
		}
		l.Close()
	}
}

func TestGet(t *testing.T) {
	p, err := Get()
	if err != nil {
		t.Fatal(err)
	}
	if p <= 0 || p > 65535 {
		t.Fatalf("Get() = %d", p)
	}
}
