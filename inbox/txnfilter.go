package inbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
)

// txnFilter hides what a read_committed consumer must not see: the records
// of aborted Kafka transactions and the transaction markers (control
// records). kafka-go's Reader sends the isolation level, so the broker
// returns nothing past the last stable offset (no open transaction's
// records), but it filters nothing: aborted records and markers come back
// as messages (segmentio/kafka-go#1332). The filter classifies each
// partition's offsets from a fetch of its own, through kafka-go's protocol
// layer, which shows each record batch's producer id and the markers: a
// transactional batch is pending until its producer's marker, an abort
// marker hides the producer's pending records, a commit marker shows them.
//
// With Config.ReadUncommitted the filter hides the markers only.
//
// Only the fetch loop calls skip, one partition at a time; offsets come in
// increasing order except after a rewind, which refetches.
type txnFilter struct {
	client *kafka.Client
	// uncommitted (Config.ReadUncommitted) shows aborted records and
	// hides only the markers.
	uncommitted bool
	mu          sync.Mutex
	parts       map[tp]*txnWindow
}

// txnWindow is a classified range of one partition's offsets: [from, to).
type txnWindow struct {
	from, to int64
	hidden   map[int64]bool
}

func newTxnFilter(brokers []string, uncommitted bool) *txnFilter {
	return &txnFilter{client: &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 30 * time.Second},
		uncommitted: uncommitted, parts: map[tp]*txnWindow{}}
}

// skip reports whether m must be hidden from the handler.
func (f *txnFilter) skip(ctx context.Context, m kafka.Message) (bool, error) {
	k := tp{m.Topic, m.Partition}
	f.mu.Lock()
	w := f.parts[k]
	f.mu.Unlock()
	if w == nil || m.Offset < w.from || m.Offset >= w.to {
		var err error
		if w, err = f.classify(ctx, k, m.Offset); err != nil {
			return false, err
		}
		f.mu.Lock()
		f.parts[k] = w
		f.mu.Unlock()
	}
	return w.hidden[m.Offset], nil
}

// classify fetches k from offset with read_committed until offset is
// decided, and returns the window of offsets decided from there.
func (f *txnFilter) classify(ctx context.Context, k tp, offset int64) (*txnWindow, error) {
	w := &txnWindow{from: offset, hidden: map[int64]bool{}}
	pending := map[int64][]int64{} // producer id → offsets of its open transaction
	next := offset
	isolation := kafka.ReadCommitted
	if f.uncommitted {
		isolation = kafka.ReadUncommitted
	}
	for {
		res, err := f.client.Fetch(ctx, &kafka.FetchRequest{Topic: k.topic, Partition: k.partition, Offset: next,
			MinBytes: 1, MaxBytes: 4 << 20, MaxWait: 250 * time.Millisecond, IsolationLevel: isolation})
		if err == nil {
			err = res.Error
		}
		if errors.Is(err, kafka.OffsetOutOfRange) && next == offset {
			// Deleted by retention since the reader fetched it: nothing
			// left to classify; it passes (a marker then goes to the DLQ
			// as no_id, an aborted record is applied).
			return &txnWindow{from: offset, to: offset + 1, hidden: map[int64]bool{}}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read_committed filter: fetch %s/%d at %d: %w", k.topic, k.partition, next, err)
		}
		last, err := walkBatches(res.Records, pending, w.hidden, f.uncommitted)
		if closer, ok := res.Records.(io.Closer); ok {
			closer.Close()
		}
		if err != nil {
			return nil, fmt.Errorf("read_committed filter: read %s/%d at %d: %w", k.topic, k.partition, next, err)
		}
		if last >= next {
			next = last + 1
		}
		undecided := next
		for _, offs := range pending {
			undecided = min(undecided, offs[0])
		}
		if undecided > offset { // offset is decided; so is everything below undecided
			w.to = undecided
			return w, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
}

// walkBatches classifies a fetch response's records and returns the last
// offset it saw (-1 for none). With markersOnly, transactional records are
// shown and nothing waits for a marker.
func walkBatches(rr kafka.RecordReader, pending map[int64][]int64, hidden map[int64]bool, markersOnly bool) (int64, error) {
	last := int64(-1)
	var batches []protocol.RecordReader
	switch r := rr.(type) {
	case nil:
		return last, nil
	case *protocol.RecordStream:
		batches = r.Records
	default:
		batches = []protocol.RecordReader{r}
	}
	for _, b := range batches {
		switch b := b.(type) {
		case *protocol.ControlBatch:
			for {
				cr, err := b.ReadControlRecord()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					return last, err
				}
				hidden[cr.Offset] = true
				last = max(last, cr.Offset)
				if cr.Type == 0 { // ABORT
					for _, off := range pending[b.ProducerID] {
						hidden[off] = true
					}
				}
				delete(pending, b.ProducerID) // COMMIT shows them
			}
		case *protocol.RecordBatch:
			for {
				r, err := b.ReadRecord()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					return last, err
				}
				if r.Key != nil {
					r.Key.Close()
				}
				if r.Value != nil {
					r.Value.Close()
				}
				last = max(last, r.Offset)
				if b.Attributes.Transactional() && !markersOnly {
					pending[b.ProducerID] = append(pending[b.ProducerID], r.Offset)
				}
			}
		default:
			// A legacy (v0/v1) message set: never transactional.
			for {
				r, err := b.ReadRecord()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					return last, err
				}
				last = max(last, r.Offset)
			}
		}
	}
	return last, nil
}
