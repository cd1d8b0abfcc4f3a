// Package examples holds two runnable services built on this module's
// packages, used by `make example` and by the inbox end-to-end test:
//
//   - orders: a writer service that places orders and writes their
//     OrderCreated and OrderCancelled events with package outbox, in the
//     same transactions, as outbox rows or, with --mode message, table-less
//     (logical decoding messages);
//   - loyalty: a consumer built on package inbox that accrues bonus points
//     for each order and reverses them when the order is cancelled,
//     exactly once per event.
//
// The package itself holds no code.
package examples
