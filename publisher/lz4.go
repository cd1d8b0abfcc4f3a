package publisher

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kgo's lz4 codec writes LZ4 frames with 4 MB blocks and an xxHash32
// checksum of the whole content. A record batch already carries a CRC32C
// of its compressed bytes, so that checksum only costs CPU twice (the relay
// computes it, the broker verifies it), and a 4 MB block makes the broker
// allocate a 4 MB buffer to decompress a batch of 1 MB when it validates
// it. lz4Compressor writes frames as Kafka's Java producer does: 64 KB
// blocks and no content checksum. Any LZ4 frame reader, the broker's
// included, reads them. The other codecs are kgo's own.
type lz4Compressor struct{ writers sync.Pool }

func (c *lz4Compressor) Compress(dst *bytes.Buffer, src []byte, _ ...kgo.CompressFlag) ([]byte, kgo.CompressionCodecType) {
	z, _ := c.writers.Get().(*lz4.Writer)
	if z == nil {
		z = lz4.NewWriter(dst)
		// Both options are valid constants: Apply cannot fail.
		_ = z.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.ChecksumOption(false))
	} else {
		z.Reset(dst)
	}
	defer func() { z.Reset(nil); c.writers.Put(z) }()
	if _, err := z.Write(src); err != nil {
		return nil, kgo.CodecError
	}
	if err := z.Close(); err != nil {
		return nil, kgo.CodecError
	}
	return dst.Bytes(), kgo.CodecLz4
}

// compressor is the batch compressor for --kafka-compression; nil for none.
// (Without one kgo would compress with snappy: none is set explicitly.)
func compressor(name string) (kgo.Compressor, error) {
	switch name {
	case "", "none":
		return nil, nil
	case "lz4":
		return &lz4Compressor{}, nil
	case "gzip":
		return kgo.DefaultCompressor(kgo.GzipCompression())
	case "snappy":
		return kgo.DefaultCompressor(kgo.SnappyCompression())
	case "zstd":
		return kgo.DefaultCompressor(kgo.ZstdCompression())
	}
	return nil, fmt.Errorf("--kafka-compression %q is not none, gzip, snappy, lz4 or zstd", name)
}
