package publisher

import (
	"io"
	"sync"

	"github.com/pierrec/lz4/v4"
	"github.com/segmentio/kafka-go/compress"
)

// kafka-go's lz4 codec writes LZ4 frames with 4 MB blocks and an xxHash32
// checksum of the whole content. A record batch already carries a CRC32C
// of its compressed bytes, so that checksum only costs CPU twice (the relay
// computes it, the broker verifies it), and a 4 MB block makes the broker
// allocate a 4 MB buffer to decompress a batch of 1 MB when it validates
// it. lz4Codec writes frames as Kafka's Java producer does: 64 KB blocks
// and no content checksum. Any LZ4 frame reader, the broker's included,
// reads them. Reading is kafka-go's.
type lz4Codec struct{}

var lz4Writers sync.Pool

func init() { compress.Codecs[compress.Lz4] = lz4Codec{} }

func (lz4Codec) Code() int8   { return int8(compress.Lz4) }
func (lz4Codec) Name() string { return "lz4" }

func (lz4Codec) NewReader(r io.Reader) io.ReadCloser { return compress.Lz4Codec.NewReader(r) }

func (lz4Codec) NewWriter(w io.Writer) io.WriteCloser {
	z, _ := lz4Writers.Get().(*lz4.Writer)
	if z == nil {
		z = lz4.NewWriter(w)
		// Both options are valid constants: Apply cannot fail.
		_ = z.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.ChecksumOption(false))
	} else {
		z.Reset(w)
	}
	return &lz4Writer{z}
}

type lz4Writer struct{ *lz4.Writer }

// Close flushes the frame and returns the writer to the pool.
func (w *lz4Writer) Close() error {
	z := w.Writer
	if z == nil {
		return nil
	}
	w.Writer = nil
	err := z.Close()
	z.Reset(nil)
	lz4Writers.Put(z)
	return err
}
