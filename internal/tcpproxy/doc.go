// Package tcpproxy is a TCP proxy that a test controls, to inject network
// faults between the relay and PostgreSQL or Kafka.
//
// A Proxy listens on 127.0.0.1 (a random port) and forwards every accepted
// connection to its target. Blackhole makes it behave like a network path
// that silently drops packets: sockets stay open, nothing is forwarded in
// either direction, a close is not passed on, new connections are accepted
// but never reach the target. Bytes already read are held back, as TCP
// retransmission would hold them, and delivered after Resume unless one side
// gave up first. CutAll closes every connection at once, as a reset would.
//
// Only tests use it; it is not part of the relay.
package tcpproxy
