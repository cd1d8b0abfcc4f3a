package publisher

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// ErrSessionClosed is returned by Enqueue after the session stopped.
var ErrSessionClosed = errors.New("publisher session closed")

// TxnTimeoutError is a PostgreSQL transaction that could not be delivered
// within one Kafka transaction's timeout. It halts the relay.
type TxnTimeoutError struct {
	Events  int
	Open    time.Duration
	Timeout time.Duration
}

func (e *TxnTimeoutError) Error() string {
	return fmt.Sprintf("a Kafka transaction has been open for %s with %d events sent so far and its PostgreSQL transaction has not ended: it cannot be delivered within --txn-timeout %s; "+
		"raise --txn-timeout (at most the broker's transaction.max.timeout.ms, 15 min by default) or run with --delivery at-least-once", e.Open, e.Events, e.Timeout)
}

// TimestampRefused reports a broker refusal of a record for its timestamp.
func TimestampRefused(err error) bool { return errors.Is(err, kerr.InvalidTimestamp) }

// refused reports a broker refusal of a record or batch for what it holds:
// its size, or a record's timestamp.
func refused(err error) bool {
	return errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge) || errors.Is(err, kerr.InvalidTimestamp)
}

// isFenced reports an error meaning another producer took over the
// transactional id.
func isFenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch)
}

// retriable reports whether a failed request may succeed when sent again:
// an error of the connection, or one the broker marks retriable.
func retriable(err error) bool {
	var ke *kerr.Error
	return !errors.As(err, &ke) || ke.Retriable
}

// errorKind names an error for the produce-error metric.
func errorKind(err error) string {
	var kerrErr *kerr.Error
	var netErr net.Error
	switch {
	case errors.As(err, &kerrErr):
		return kerrErr.Message
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.As(err, &netErr), errors.Is(err, net.ErrClosed):
		return "network"
	}
	return "other"
}
