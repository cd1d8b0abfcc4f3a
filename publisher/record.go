package publisher

import (
	"context"
	"sync"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Header is a record header: a key and a value (nil for a null value).
//
// Its fields are kgo.RecordHeader's, so that the Kafka session hands a
// record's headers to kgo as they are, without a copy (kgoHeaders).
type Header struct {
	Key   string
	Value []byte
}

// A Header converts to a kgo.RecordHeader only while the two have the same
// fields, in the same order: kgoHeaders relies on it.
var _ = kgo.RecordHeader(Header{})

// Record is one Kafka record to publish, tagged with the stream sequence
// number it acknowledges.
//
// Records made by NewRecord come from a pool: once Kafka has acknowledged a
// record, the session returns it, with its buffers, for reuse. Nothing may
// keep a reference to a record, or to the bytes in its buffers, after
// handing it to Session.Enqueue.
type Record struct {
	Topic   string
	Key     []byte
	Value   []byte
	Headers []Header
	// Time is the record's timestamp (CreateTime); the zero Time lets the
	// encoder use the time of encoding, which the relay never does.
	Time time.Time
	// ID, EventType, AggregateType and AggregateID are the event's outbox
	// columns (for a table-less message, its id is the LSN id), set by the
	// record builder, aliasing its buffer: for a sink that carries them
	// outside the headers (RabbitMQ's message_id, type and routing key).
	// The Kafka record never reads them. Nil for a row of an unconfigured
	// table.
	ID, EventType, AggregateType, AggregateID []byte
	// Seq is the stream's sequence number for this event.
	Seq uint64
	// Reserved is what the tracker charged for it; released on ack.
	Reserved int
	// Read, when set, is when the record's row was read: the publisher then
	// reports the record's stages to Observer.Stages (the relay sets it on
	// a sample of the records).
	Read time.Time
	// OnAck, when set, hears of Kafka's acknowledgement of the record: the
	// promise calls it with the partition and offset the record was
	// written at, before the record can be released (the relay ends the
	// record's trace span there). It is not called for a record Kafka
	// refused or a session abandoned. It runs on the Kafka client's
	// promise goroutine and must not block. Default nil: nothing is called.
	OnAck AckHook

	bytes   int // Size, once computed (size)
	pooled  bool
	buf     []byte     // backs Key, Value and header values (Buffer)
	headers [6]Header  // backs Headers (HeaderBuffer)
	kr      kgo.Record // what kgo produces (kgoRecord)
	ref     recordRef  // kr.Context
	// sent is when the session handed the record to kgo; replaced marks
	// a record produced in place of a refused one (Config.Reject).
	sent     time.Time
	replaced bool
	// alone marks a suspect sent alone; err is its refusal, if refused.
	alone bool
	err   error
}

// free holds acknowledged records and their buffers, up to
// maxFreeRecords. Acknowledgements come a produce response at a time, and
// during a drain the records in flight rise and fall by thousands: a list
// of 1,024 let 40% of a drain's records be allocated anew (and collected),
// 14% of the relay's CPU. What a quiet stream does not use is let go
// (trimFreeRecords), so a drain does not leave its records behind: a
// sync.Pool would keep every acknowledged record alive until the next two
// collections, which raised the peak RSS of a 1M-row drain from 84 to
// 115 MB.
//
// The list is a stack: NewRecord takes the record released last, whose
// memory the promise has just written, rather than the one released first,
// which has long left the caches. BenchmarkRecordReuse, with 12,000
// records left on the list by a burst: 308 ns per record with a queue (the
// first write to each reused record missed the cache), 75 ns with the
// stack.
var free struct {
	mu   sync.Mutex
	recs []*Record
	low  int // the fewest records held since the last trim
}

const (
	maxFreeRecords  = 16384
	keepFreeRecords = 1024            // what trimming never goes below
	trimInterval    = 5 * time.Second // how often the unused part is halved
)

var trimOnce sync.Once

// trimFreeRecords trims the free list every trimInterval (trimFreeLocked).
func trimFreeRecords() {
	for range time.Tick(trimInterval) {
		free.mu.Lock()
		trimFreeLocked()
		free.mu.Unlock()
	}
}

// trimFreeLocked halves the part of the free list above keepFreeRecords
// that stayed unused since the last trim, dropping the records released
// longest ago (the stack's bottom). free.mu is held.
func trimFreeLocked() {
	if drop := (free.low - keepFreeRecords) / 2; drop > 0 {
		n := copy(free.recs, free.recs[drop:])
		clear(free.recs[n:])
		free.recs = free.recs[:n]
	}
	free.low = len(free.recs)
}

// maxPooledBuffer is the largest buffer a free record keeps: a rare large
// event does not pin its memory.
const maxPooledBuffer = 16 << 10

// NewRecord returns an empty record, reusing an acknowledged one's buffers.
func NewRecord() *Record {
	trimOnce.Do(func() { go trimFreeRecords() })
	free.mu.Lock()
	n := len(free.recs) - 1
	if n < 0 {
		free.low = 0
		free.mu.Unlock()
		return &Record{pooled: true}
	}
	r := free.recs[n]
	free.recs[n] = nil
	free.recs = free.recs[:n]
	free.low = min(free.low, n)
	free.mu.Unlock()
	return r
}

// Buffer returns the record's byte buffer, empty, with room for at least n
// bytes. Slices of it may become Key, Value and header values. Store a
// grown buffer back with KeepBuffer so that the next use starts larger.
func (r *Record) Buffer(n int) []byte {
	if cap(r.buf) < n {
		r.buf = make([]byte, 0, n)
	}
	return r.buf[:0]
}

// KeepBuffer records b (a buffer grown from Buffer's) for reuse when it is
// larger than the one the record holds.
func (r *Record) KeepBuffer(b []byte) {
	if cap(b) > cap(r.buf) {
		r.buf = b[:0]
	}
}

// HeaderBuffer returns an empty header slice backed by the record, for up
// to six headers without an allocation: the relay's three (id, event_type,
// aggregate_type), a row's traceparent and tracestate, and one more.
func (r *Record) HeaderBuffer() []Header { return r.headers[:0] }

// Release returns an acknowledged record to the free list. Sessions do it
// themselves; it is exported for other sinks, such as benchmarks. Records
// not made by NewRecord are left alone.
func Release(r *Record) {
	if !r.pooled {
		return
	}
	buf := r.buf
	if cap(buf) > maxPooledBuffer {
		buf = nil
	}
	*r = Record{pooled: true, buf: buf[:0]}
	free.mu.Lock()
	if len(free.recs) < maxFreeRecords {
		free.recs = append(free.recs, r)
	}
	free.mu.Unlock()
}

// kgoRecord is r as kgo takes it, without an allocation or a copy: r's own
// kgo.Record, r's headers themselves (kgoHeaders), and r as the Context,
// through which the promise finds r again (recordOf).
func (r *Record) kgoRecord() *kgo.Record {
	kr := &r.kr
	r.ref.r = r
	*kr = kgo.Record{Topic: r.Topic, Key: r.Key, Value: r.Value, Timestamp: r.Time, Context: &r.ref, Headers: kgoHeaders(r.Headers)}
	return kr
}

// kgoHeaders is hs as kgo's header type, sharing hs's array: a Header is
// laid out as a kgo.RecordHeader (the conversion above would not compile
// otherwise). kgo only reads the headers of a record it produces.
func kgoHeaders(hs []Header) []kgo.RecordHeader {
	if len(hs) == 0 {
		return nil
	}
	return unsafe.Slice((*kgo.RecordHeader)(unsafe.Pointer(unsafe.SliceData(hs))), len(hs))
}

// recordOf is the Record a kgo.Record made by kgoRecord belongs to.
func recordOf(kr *kgo.Record) *Record { return kr.Context.(*recordRef).r }

// recordRef is a record's kgo.Record's Context, there only so that the
// promise can find the record: it never ends.
type recordRef struct{ r *Record }

var _ context.Context = (*recordRef)(nil)

func (*recordRef) Deadline() (time.Time, bool) { return time.Time{}, false }
func (*recordRef) Done() <-chan struct{}       { return nil }
func (*recordRef) Err() error                  { return nil }
func (*recordRef) Value(any) any               { return nil }

// size is Size of the record, computed once: the session needs it when
// it queues, groups and sends the record, which does not change by then.
func (r *Record) size() int {
	if r.bytes == 0 {
		r.bytes = Size(r.Key, r.Value, r.Headers)
	}
	return r.bytes
}

// Size is the record's size as Kafka counts it for limits, approximately:
// key, value and headers plus per-record overhead.
func Size(key, value []byte, headers []Header) int {
	n := 32 + len(key) + len(value)
	for _, h := range headers {
		n += 8 + len(h.Key) + len(h.Value)
	}
	return n
}

// AckHook is a Record's OnAck.
type AckHook interface {
	Acked(partition int32, offset int64)
}

// ReturnHook is an AckHook that also hears, before its Acked, that the
// broker gave the record back and a dead letter of kind went in its place
// to routingKey through the default exchange (RabbitMQ's basic.return).
type ReturnHook interface {
	AckHook
	Returned(kind, routingKey string)
}

// Acker receives acknowledgements of a contiguous prefix of sequence numbers.
type Acker interface {
	Ack(upTo uint64, events int, bytes int64)
}
