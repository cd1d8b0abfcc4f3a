package jsontext

import (
	"math/rand/v2"
	"testing"
)

// TestSkipPlain: skipPlain never skips a quote, a backslash, a control
// character or a non-ASCII byte, and stops within eight bytes of the first
// one (or of the end).
func TestSkipPlain(t *testing.T) {
	special := func(c byte) bool { return c == '"' || c == '\\' || c < 0x20 || c >= 0x80 }
	alphabet := []byte{'a', 'Z', ' ', '"', '\\', 0x00, 0x1f, 0x20, 0x7f, 0x80, 0x9f, 0xa0, 0xc3, 0xff, '!', '#', '[', ']'}
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < 20000; n++ {
		d := make([]byte, rng.IntN(80))
		for i := range d {
			if rng.IntN(6) == 0 {
				d[i] = alphabet[rng.IntN(len(alphabet))]
			} else {
				d[i] = byte('a' + rng.IntN(26))
			}
		}
		start := 0
		if len(d) > 0 {
			start = rng.IntN(len(d))
		}
		first := len(d)
		for i := start; i < len(d); i++ {
			if special(d[i]) {
				first = i
				break
			}
		}
		got := skipPlain(d, start)
		if got > first || got < start || (first-got >= 8 && got+8 <= len(d)) {
			t.Fatalf("skipPlain(%q, %d) = %d; first special at %d", d, start, got, first)
		}
		// quickPlain is exact within its first 16 bytes.
		got = quickPlain(d, start)
		if got > first || got < start || (got != first && first < start+16) || (first-got >= 8 && got+8 <= len(d)) {
			t.Fatalf("quickPlain(%q, %d) = %d; first special at %d", d, start, got, first)
		}
	}
}
