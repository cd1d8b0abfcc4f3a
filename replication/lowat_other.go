//go:build !linux

package replication

import "net"

// setReadLowat does nothing outside Linux: each read wakes on the first
// bytes, as without it.
func setReadLowat(net.Conn, int) error { return nil }
