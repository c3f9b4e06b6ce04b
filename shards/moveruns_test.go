package shards

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// moveRuns writes what a loop of copy writes, and nothing else: runs of
// every length around the block sizes, at every alignment of source and
// destination, with and without the assembly loop.
func TestMoveRunsIsCopy(t *testing.T) {
	src := make([]byte, 1<<16)
	for i := range src {
		src[i] = byte(i*7 + i>>8)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var runs []byteRun
	to := int64(3)
	for n := int64(0); n <= 300; n++ {
		from := rng.Int64N(int64(len(src)) - n)
		runs = append(runs, byteRun{from, from + n, to})
		to += n + rng.Int64N(3)
	}
	for n := int64(0); n <= 64; n++ { // the short moves, at every alignment of the destination
		for range 32 {
			from := rng.Int64N(int64(len(src)) - n)
			runs = append(runs, byteRun{from, from + n, to})
			to += n + 1
		}
	}
	for range 200 {
		n := rng.Int64N(4096)
		from := rng.Int64N(int64(len(src)) - n)
		runs = append(runs, byteRun{from, from + n, to})
		to += n + rng.Int64N(40)
	}
	want := make([]byte, to+64)
	for i := range want {
		want[i] = 0xA5
	}
	got := append([]byte(nil), want...)
	for _, r := range runs {
		copy(want[r.to:r.to+r.end-r.from], src[r.from:r.end])
	}
	for _, asm := range []bool{true, false} {
		t.Run(fmt.Sprint("asm=", asm && haveMoveRuns), func(t *testing.T) {
			defer func(have bool) { haveMoveRuns = have }(haveMoveRuns)
			haveMoveRuns = haveMoveRuns && asm
			dst := append([]byte(nil), got...)
			moveRuns(dst, src, runs)
			require.Equal(t, want, dst)
			moveRuns(dst, src, nil)
			require.Equal(t, want, dst)
		})
	}
}

// A run outside either buffer panics, as copy's slicing would, and
// writes nothing.
func TestMoveRunsChecksBounds(t *testing.T) {
	src, dst := make([]byte, 100), make([]byte, 100)
	for _, r := range []byteRun{{-1, 10, 0}, {90, 101, 0}, {20, 10, 0}, {0, 50, 60}, {0, 10, -1}} {
		assert.Panics(t, func() { moveRuns(dst, src, []byteRun{{0, 40, 0}, r}) }, "%+v", r)
	}
	if haveMoveRuns {
		assert.Equal(t, make([]byte, 100), dst, "the runs are checked before any is copied")
	}
}

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
		t.Run(fmt.Sprint("asm=", asm && haveMoveRuns), func(t *testing.T) {
			defer func(have bool) { haveMoveRuns = have }(haveMoveRuns)
			haveMoveRuns = haveMoveRuns && asm
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
	for _, in := range [][]byteSpan{{{-1, 10}}, {{95, 6}}, {{0, 0}}, {{10, -1}}, {{0, 60}, {0, 41}}} {
		assert.Panics(t, func() { moveSpans(dst, src, append([]byteSpan{{0, 10}}, in...)) }, "%+v", in)
	}
	assert.Equal(t, make([]byte, 100), dst, "the spans are checked before any is copied")
}

// BenchmarkMoveRuns copies batches of runs like a Megatron batch's (32
// rows of 2050 bytes, each one to three runs of 100 to 2000 bytes from
// random even offsets) with moveRuns and with a loop of copy, from a
// source that fits in the cache and from one that does not.
func BenchmarkMoveRuns(b *testing.B) {
	for _, size := range []int{64 << 10, 256 << 20} {
		src := make([]byte, size)
		for i := range src {
			src[i] = byte(i)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		const rows, row = 32, 2050
		var batches [][]byteRun
		for range 64 {
			var runs []byteRun
			for r := range rows {
				to, left := int64(r*row), int64(row)
				for left > 0 {
					n := min(left, 2*(50+rng.Int64N(950)))
					from := 2 * rng.Int64N(int64(size/2)-n)
					runs = append(runs, byteRun{from, from + n, to})
					to, left = to+n, left-n
				}
			}
			batches = append(batches, runs)
		}
		dst := make([]byte, rows*row)
		for _, asm := range []bool{false, true} {
			if asm && !haveMoveRuns {
				continue
			}
			name := map[bool]string{false: "copy", true: "moveRuns"}[asm]
			b.Run(fmt.Sprintf("src=%dKiB/%s", size>>10, name), func(b *testing.B) {
				b.SetBytes(rows * row)
				k := 0
				for b.Loop() {
					runs := batches[k%len(batches)]
					if asm {
						moveRuns(dst, src, runs)
					} else {
						for _, r := range runs {
							copy(dst[r.to:r.to+r.end-r.from], src[r.from:r.end])
						}
					}
					k++
				}
			})
		}
	}
}
