// Package rawsock wraps a TCP connection so that its reads and writes
// reach the kernel without entering the Go scheduler's system-call path.
//
// Why: after the process has been idle, the first system call a goroutine
// makes wakes the runtime's sysmon thread from its deep sleep, and sysmon
// then polls every 20 µs until the process is idle again
// (golang/go#18236). At a steady trickle, a thousand events a second, each
// event is such a first call: perf put sysmon and its wake-ups at 30 % of
// the relay's CPU. The sockets are non-blocking, so a read or write never
// blocks in the kernel, and a raw system call is as safe as a runtime one;
// when the socket is not ready the wrapper waits through the runtime's
// network poller (syscall.RawConn), with the connection's deadlines.
//
// In: a net.Conn from a dialer. Out: a net.Conn with the same behaviour
// (deadlines, errors as *net.OpError, io.EOF at the end) whose NetConn is
// the TCP connection under it, for socket options, as tls.Conn's is; or
// the same conn where it is not a *net.TCPConn or the platform has no raw
// calls.
// Owns: nothing beyond the conn it wraps.
package rawsock
