package publisher

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/segmentio/kafka-go/compress"
	klz4 "github.com/segmentio/kafka-go/compress/lz4"
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

// writeFrame compresses src with codec, written in pieces as kafka-go
// writes a batch (a record at a time).
func writeFrame(t testing.TB, codec compress.Codec, dst *bytes.Buffer, src []byte) {
	w := codec.NewWriter(dst)
	for p := src; len(p) > 0; {
		n := min(300, len(p))
		if _, err := w.Write(p[:n]); err != nil {
			t.Fatal(err)
		}
		p = p[n:]
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestLZ4Codec: the codec installed for lz4 writes frames with 64 KB blocks
// and no content checksum, which kafka-go's reader reads back, and pooled
// writers do so again after reuse.
func TestLZ4Codec(t *testing.T) {
	codec := compress.Lz4.Codec()
	if _, ok := codec.(lz4Codec); !ok {
		t.Fatalf("lz4 codec is %T, want lz4Codec", codec)
	}
	src := avroLike()
	for round := 0; round < 3; round++ {
		var frame bytes.Buffer
		writeFrame(t, codec, &frame, src)
		b := frame.Bytes()
		// Frame descriptor: magic (4 bytes), FLG, BD. FLG bit 2 is the
		// content checksum; BD bits 4-6 are the block size index (4 = 64 KB).
		if flg, bd := b[4], b[5]; flg&0x04 != 0 || (bd>>4)&7 != 4 {
			t.Fatalf("FLG %08b BD %08b: want no content checksum and 64 KB blocks", flg, bd)
		}
		r := codec.NewReader(bytes.NewReader(b))
		got, err := io.ReadAll(r)
		r.Close()
		if err != nil || !bytes.Equal(got, src) {
			t.Fatalf("round %d: read back %d bytes (err %v), want the %d written", round, len(got), err, len(src))
		}
		if len(b) > len(src)/2 {
			t.Fatalf("compressed %d bytes to %d", len(src), len(b))
		}
	}
}

// BenchmarkLZ4 compresses 1 MB of event-like bytes with kafka-go's own lz4
// codec (4 MB blocks, content checksum) and with the one the relay installs.
func BenchmarkLZ4(b *testing.B) {
	src := avroLike()
	for _, c := range []struct {
		name  string
		codec compress.Codec
	}{{"kafka-go", &klz4.Codec{}}, {"relay", lz4Codec{}}} {
		b.Run(c.name, func(b *testing.B) {
			var out bytes.Buffer
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				out.Reset()
				writeFrame(b, c.codec, &out, src)
			}
			b.ReportMetric(float64(out.Len())/float64(len(src)), "ratio")
		})
	}
}
