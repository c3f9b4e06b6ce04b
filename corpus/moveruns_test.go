package corpus

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// moveSpans writes what a loop of copy writes, one span after the
// other, and nothing past them; it reports a span that ends on a zero
// byte, and none where none does.
func TestMoveSpansIsCopy(t *testing.T) {
	src := make([]byte, 1<<16)
	for i := range src {
		src[i] = byte(i*7+i>>8) | 1 // no zero byte
	}
	src[1000] = 0
	rng := rand.New(rand.NewPCG(3, 4))
	var spans []byteSpan
	for n := int64(1); n <= 300; n++ {
		spans = append(spans, byteSpan{rng.Int64N(int64(len(src)) - n), n})
	}
	for n := int64(1); n <= 64; n++ { // the short moves, at every alignment of the destination
		for range 32 {
			spans = append(spans, byteSpan{rng.Int64N(int64(len(src)) - n), n})
		}
	}
	for range 200 {
		n := 1 + rng.Int64N(4096)
		spans = append(spans, byteSpan{rng.Int64N(int64(len(src)) - n), n})
	}
	for i := range spans { // none ends on the zero byte
		if s := spans[i]; s.from+s.n == 1001 {
			spans[i].n--
		}
	}
	for _, asm := range []bool{true, false} {
		t.Run(fmt.Sprint("asm=", asm && haveMoveSpans), func(t *testing.T) {
			defer func(have bool) { haveMoveSpans = have }(haveMoveSpans)
			haveMoveSpans = haveMoveSpans && asm
			for _, zero := range []int{-1, 0, 7, len(spans) - 1} { // the span that ends on the zero byte
				in := append([]byteSpan(nil), spans...)
				if zero >= 0 {
					in[zero] = byteSpan{1001 - in[zero].n, in[zero].n}
				}
				var want []byte
				for _, s := range in {
					want = append(want, src[s.from:s.from+s.n]...)
				}
				dst := make([]byte, len(want)+64)
				for i := range dst {
					dst[i] = 0xA5
				}
				zeroEnd := moveSpans(dst, src, in)
				require.Equal(t, want, dst[:len(want)])
				require.Equal(t, bytes.Repeat([]byte{0xA5}, 64), dst[len(want):], "past the spans")
				assert.Equal(t, zero >= 0, zeroEnd, "span %d ends on a zero", zero)
			}
			assert.False(t, moveSpans(nil, src, nil))
		})
	}
}

// A span that is empty, or outside the source, or spans more bytes than
// the destination holds, panic, and nothing is copied.
func TestMoveSpansChecksBounds(t *testing.T) {
	src, dst := make([]byte, 100), make([]byte, 100)
	for i := range src {
		src[i] = 1
	}
	for _, asm := range []bool{true, false} {
		t.Run(fmt.Sprint("asm=", asm && haveMoveSpans), func(t *testing.T) {
			defer func(have bool) { haveMoveSpans = have }(haveMoveSpans)
			haveMoveSpans = haveMoveSpans && asm
			for _, c := range []struct {
				in   []byteSpan
				want string
			}{
				{[]byteSpan{{-1, 10}}, "span 1 of 10 bytes from -1: empty or outside the source (100 bytes)"},
				{[]byteSpan{{95, 6}}, "span 1 of 6 bytes from 95: empty or outside the source (100 bytes)"},
				{[]byteSpan{{0, 0}}, "span 1 of 0 bytes from 0: empty"},
				{[]byteSpan{{10, -1}}, "span 1 of -1 bytes from 10: empty"},
				{[]byteSpan{{0, 60}, {0, 31}}, "spans of 101 bytes or more into 100"},
				{[]byteSpan{{0, 90}, {1 << 62, 1 << 62}}, "span 2 of 4611686018427387904 bytes from 4611686018427387904: empty or outside"},
			} {
				in := append([]byteSpan{{0, 10}}, c.in...)
				var got any
				func() {
					defer func() { got = recover() }()
					moveSpans(dst, src, in)
				}()
				assert.Contains(t, got, "corpus: "+c.want, "%+v", in)
			}
		})
	}
}

// BenchmarkMoveSpans copies batches of runs like a Megatron batch's (32
// rows of 2050 bytes, each one to three runs of 100 to 2000 bytes from
// random even offsets) with moveSpans and with a loop of copy, from a
// source that fits in the cache and from one that does not.
func BenchmarkMoveSpans(b *testing.B) {
	for _, size := range []int{64 << 10, 256 << 20} {
		src := make([]byte, size)
		for i := range src {
			src[i] = byte(i)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		const rows, row = 32, 2050
		var batches [][]byteSpan
		for range 64 {
			var spans []byteSpan
			for range rows {
				for left := int64(row); left > 0; {
					n := min(left, 2*(50+rng.Int64N(950)))
					spans = append(spans, byteSpan{2 * rng.Int64N(int64(size/2)-n), n})
					left -= n
				}
			}
			batches = append(batches, spans)
		}
		dst := make([]byte, rows*row)
		for _, asm := range []bool{false, true} {
			if asm && !haveMoveSpans {
				continue
			}
			name := map[bool]string{false: "copy", true: "moveSpans"}[asm]
			b.Run(fmt.Sprintf("src=%dKiB/%s", size>>10, name), func(b *testing.B) {
				b.SetBytes(rows * row)
				k := 0
				for b.Loop() {
					spans := batches[k%len(batches)]
					if asm {
						moveSpans(dst, src, spans)
					} else {
						to := int64(0)
						for _, s := range spans {
							copy(dst[to:to+s.n], src[s.from:s.from+s.n])
							to += s.n
						}
					}
					k++
				}
			})
		}
	}
}
