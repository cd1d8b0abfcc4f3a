package publisher

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kgo"
)

// avroLike is about 1 MB of text shaped like a batch of encoded events.
func avroLike() []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < 1<<20; i++ {
		fmt.Fprintf(&b, "\x00\x00\x00\x00\x07$%08d-aaaa-4bbb-8ccc-%012d\x16customer-%d\x00\xa4\x01\x06EUR\x02\x10sku-%d-x\x02\xc8\x01",
			i, i*7, i%977, i*31)
	}
	return b.Bytes()
}

// TestLZ4Compressor: the compressor used for lz4 writes frames with 64 KB
// blocks and no content checksum, which an LZ4 frame reader reads back, and
// pooled writers do so again after reuse.
func TestLZ4Compressor(t *testing.T) {
	c, err := compressor("lz4")
	if err != nil {
		t.Fatal(err)
	}
	src := avroLike()
	for round := 0; round < 3; round++ {
		var dst bytes.Buffer
		b, codec := c.Compress(&dst, src)
		if codec != kgo.CodecLz4 {
			t.Fatalf("codec %v, want lz4", codec)
		}
		// Frame descriptor: magic (4 bytes), FLG, BD. FLG bit 2 is the
		// content checksum; BD bits 4-6 are the block size index (4 = 64 KB).
		if flg, bd := b[4], b[5]; flg&0x04 != 0 || (bd>>4)&7 != 4 {
			t.Fatalf("FLG %08b BD %08b: want no content checksum and 64 KB blocks", flg, bd)
		}
		got, err := io.ReadAll(lz4.NewReader(bytes.NewReader(b)))
		if err != nil || !bytes.Equal(got, src) {
			t.Fatalf("round %d: read back %d bytes (err %v), want the %d written", round, len(got), err, len(src))
		}
		if len(b) > len(src)/2 {
			t.Fatalf("compressed %d bytes to %d", len(src), len(b))
		}
	}
}

// BenchmarkLZ4 compresses 1 MB of event-like bytes with kgo's own lz4
// compressor (4 MB blocks, content checksum) and with the relay's.
func BenchmarkLZ4(b *testing.B) {
	src := avroLike()
	kgoLZ4, err := kgo.DefaultCompressor(kgo.Lz4Compression())
	if err != nil {
		b.Fatal(err)
	}
	relay, _ := compressor("lz4")
	for _, c := range []struct {
		name string
		c    kgo.Compressor
	}{{"kgo", kgoLZ4}, {"relay", relay}} {
		b.Run(c.name, func(b *testing.B) {
			var out bytes.Buffer
			var n int
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				out.Reset()
				got, _ := c.c.Compress(&out, src)
				n = len(got)
			}
			b.ReportMetric(float64(n)/float64(len(src)), "ratio")
		})
	}
}
