package publisher

import "github.com/segmentio/kafka-go"

// Record is one Kafka record to publish, tagged with the stream sequence
// number it acknowledges.
type Record struct {
	Topic   string
	Key     []byte
	Value   []byte
	Headers []kafka.Header
	// Seq is the stream's sequence number for this event.
	Seq uint64
	// Reserved is what the tracker charged for it; released on ack.
	Reserved int

	partition int
}

// Size is the record's size as Kafka counts it for limits, approximately:
// key, value and headers plus per-record overhead.
func Size(key, value []byte, headers []kafka.Header) int {
	n := 32 + len(key) + len(value)
	for _, h := range headers {
		n += 8 + len(h.Key) + len(h.Value)
	}
	return n
}

// Acker receives acknowledgements of a contiguous prefix of sequence numbers.
type Acker interface {
	Ack(upTo uint64, events int, bytes int64)
}
