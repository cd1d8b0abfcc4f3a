// Package rabbittest runs a private RabbitMQ node for a test: Debian's
// rabbitmq-server (3.10 on Debian 12, scripts/setup.sh installs it) with its
// own node name, ports, data directory, Erlang cookie (HOME) and epmd, so
// that test packages running at once never share a node. The package's
// system service is never used.
//
// In: Options (extra plugins, extra rabbitmq.conf lines).
// Out: a *Node that answers on AMQP at URL, and rabbitmqctl (Ctl) against it;
// Stop, Start and Kill for broker restarts and crashes; MemoryAlarm for
// connection.blocked. Shards declares the consistent-hash topology the
// docs give for order per aggregate across several consumers.
// Owns: the node's directory, its processes and its epmd, all gone at Close.
//
// Start fails, never skips, when the node cannot start; in a test, it
// refuses (testtier.ErrOff) while the service tier is off. In a test,
// Shared gives the package one node and Own gives a test a node of its own.
package rabbittest
