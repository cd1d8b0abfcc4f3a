package freeport

import (
	"fmt"
	"net"
)

// Get returns a TCP port on 127.0.0.1 that was free when it was checked.
func Get() (int, error) {
	ports, err := GetN(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// GetN returns n distinct TCP ports on 127.0.0.1 that were free when checked.
// All listeners are held open until every port is known, so the ports differ.
func GetN(n int) ([]int, error) {
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find free port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
