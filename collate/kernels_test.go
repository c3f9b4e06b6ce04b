package collate_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/internal/csrc"
)

// useKernels makes k the kernels that run and returns the restore
// function; it panics if this CPU cannot run k.
func useKernels(k collate.Kernels) (restore func()) {
	restore, err := csrc.SetKernels(csrc.Kernels(k))
	if err != nil {
		panic(err)
	}
	return restore
}

// onEveryPath runs f once per kernel path this CPU supports.
func onEveryPath(t *testing.T, f func(t *testing.T, p collate.Kernels)) {
	for _, p := range collate.AvailableKernels() {
		t.Run(p.String(), func(t *testing.T) {
			defer useKernels(p)()
			f(t, p)
		})
	}
}

func TestPathsIncludeTheSIMDOnesThisCPUHas(t *testing.T) {
	paths := collate.AvailableKernels()
	if !csrc.Cgo {
		require.Equal(t, []collate.Kernels{collate.KernelsGo}, paths)
		restore, err := csrc.SetKernels(csrc.KernelsScalar)
		assert.Nil(t, restore)
		assert.ErrorIs(t, err, csrc.ErrNoCgo)
		assert.EqualError(t, err, "csrc: SetKernels(scalar): built without cgo: the C kernels are not in this binary")
		t.Skip("built without cgo: the Go path is the only one")
	}
	require.GreaterOrEqual(t, len(paths), 2)
	assert.Equal(t, collate.KernelsGo, paths[0])
	assert.Equal(t, paths[len(paths)-1], collate.ActiveKernels(), "the best path is active unless "+collate.EnvKernels+" says otherwise")
	t.Logf("paths: %v", paths)
	has512 := false
	for _, p := range paths {
		has512 = has512 || p == collate.KernelsAVX512
	}
	if !has512 {
		t.Skip("this CPU has no AVX-512 F/BW/VL: the avx512 path is untested here")
	}
}

// guarded returns n float32s inside guard bands of NaN, and a check that
// the bands are intact.
func guarded[T any](n int, fill T) ([]T, func(t *testing.T)) {
	const g = 37
	all := make([]T, n+2*g)
	for i := range all {
		all[i] = fill
	}
	return all[g : g+n : g+n], func(t *testing.T) {
		t.Helper()
		for i := range g {
			require.True(t, sameBits(fill, all[i]), "write before the start")
			require.True(t, sameBits(fill, all[len(all)-1-i]), "write past the end")
		}
	}
}

// sameBits compares a and b byte for byte (NaN sentinels included).
func sameBits[T any](a, b T) bool {
	n := unsafe.Sizeof(a)
	return string(unsafe.Slice((*byte)(unsafe.Pointer(&a)), n)) == string(unsafe.Slice((*byte)(unsafe.Pointer(&b)), n))
}

var sentinel32 = math.Float32frombits(0x7fc0dead)

// special float32 values: zeros, infinities, NaNs (quiet, signalling,
// payloads), subnormals, half and bfloat16 boundaries and ties.
func specials() []float32 {
	bits := []uint32{0, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00001, 0x7f800001, 0x7fa00000, 0xff812345,
		1, 0x807fffff, 0x00400000, 0x33000000, 0x33000001, 0x387fc000, 0x38800000, 0x477fe000, 0x477ff000, 0x477fefff,
		0x3f808000, 0x3f818000, 0x3f80c000, 0x7f7fffff, 0xff7fffff, 0x3f7fffff, 0x33800000, 0x337fffff, 0x37ffe000}
	out := make([]float32, 0, len(bits)+200)
	for _, b := range bits {
		out = append(out, math.Float32frombits(b))
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		out = append(out, math.Float32frombits(r.Uint32()))
	}
	return out
}

func TestHalfConversionsMatchTheReference(t *testing.T) {
	src := specials()
	for _, n := range []int{0, 1, 7, 8, 15, 16, 17, 33, len(src)} {
		src := src[:n]
		want16, wantBF := make([]collate.F16, n), make([]collate.BF16, n)
		func() {
			defer useKernels(collate.KernelsGo)()
			collate.F32ToF16(want16, src)
			collate.F32ToBF16(wantBF, src)
		}()
		onEveryPath(t, func(t *testing.T, p collate.Kernels) {
			got16, check16 := guarded[collate.F16](n, 0xabcd)
			collate.F32ToF16(got16, src)
			check16(t)
			gotBF, checkBF := guarded[collate.BF16](n, 0xabcd)
			collate.F32ToBF16(gotBF, src)
			checkBF(t)
			for i := range src {
				require.Equal(t, want16[i], got16[i], "f16 of %#08x", math.Float32bits(src[i]))
				require.Equal(t, wantBF[i], gotBF[i], "bf16 of %#08x", math.Float32bits(src[i]))
			}
		})
	}
}

func TestHalfToFloatCoversEveryValue(t *testing.T) {
	all := make([]collate.F16, 1<<16)
	for i := range all {
		all[i] = collate.F16(i)
	}
	want := make([]float32, len(all))
	func() {
		defer useKernels(collate.KernelsGo)()
		collate.F16ToF32(want, all)
	}()
	// Spot checks of the reference itself.
	assert.Equal(t, float32(1), want[0x3c00])
	assert.Equal(t, float32(65504), want[0x7bff])
	assert.Equal(t, float32(math.Ldexp(1, -24)), want[0x0001], "the smallest subnormal")
	assert.True(t, math.IsInf(float64(want[0xfc00]), -1))
	onEveryPath(t, func(t *testing.T, p collate.Kernels) {
		got, check := guarded(len(all), sentinel32)
		collate.F16ToF32(got, all)
		check(t)
		for i := range all {
			require.Equal(t, math.Float32bits(want[i]), math.Float32bits(got[i]), "f16 %#04x", i)
		}
		gotB, checkB := guarded(len(all), sentinel32)
		collate.BF16ToF32(gotB, u16s[collate.BF16](all))
		checkB(t)
		for i := range all {
			require.Equal(t, uint32(i)<<16, math.Float32bits(gotB[i]))
		}
	})
	// Round trips: every half and bfloat16 value survives float32 and back.
	back := make([]collate.F16, len(all))
	collate.F32ToF16(back, want)
	for i := range all {
		if i&0x7c00 == 0x7c00 && i&0x3ff != 0 {
			require.Equal(t, collate.F16(i|0x200), back[i], "a NaN comes back quiet")
			continue
		}
		require.Equal(t, collate.F16(i), back[i])
	}
}

func u16s[T ~uint16](in []collate.F16) []T {
	out := make([]T, len(in))
	for i, v := range in {
		out[i] = T(v)
	}
	return out
}

func TestHalfRoundingAgainstFloat64(t *testing.T) {
	t.Parallel()
	// Round to nearest even, checked with float64 arithmetic on normal halves.
	r := rand.New(rand.NewPCG(3, 4))
	src := make([]float32, 10000)
	for i := range src {
		src[i] = float32((r.Float64()*2 - 1) * 60000)
	}
	got := make([]collate.F16, len(src))
	collate.F32ToF16(got, src)
	back := make([]float32, len(src))
	collate.F16ToF32(back, got)
	for i, v := range src {
		ulp := math.Ldexp(1, int(math.Floor(math.Log2(math.Abs(float64(v)))))-10)
		assert.LessOrEqual(t, math.Abs(float64(back[i])-float64(v)), ulp/2+1e-12, "%v -> %v", v, back[i])
	}
}

func TestGatherMatchesTheReference(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, rows := range []int{1, 3, 100} {
		for _, row := range []int{1, 3, 31, 32, 33, 64, 1000, 4099} {
			src := make([]uint8, rows*row)
			for i := range src {
				src[i] = uint8(r.Uint32())
			}
			idx := make([]int64, 2*rows+1)
			for i := range idx {
				idx[i] = int64(r.IntN(rows))
			}
			st, err := collate.MakeTensor(collate.Uint8, []int{rows, row}, src)
			require.NoError(t, err)
			want := make([]uint8, len(idx)*row)
			for i, j := range idx {
				copy(want[i*row:], src[int(j)*row:(int(j)+1)*row])
			}
			onEveryPath(t, func(t *testing.T, p collate.Kernels) {
				got, check := guarded[uint8](len(want), 0xee)
				dt, err := collate.MakeTensor(collate.Uint8, []int{len(idx), row}, got)
				require.NoError(t, err)
				require.NoError(t, collate.Gather(dt, st, idx))
				check(t)
				require.Equal(t, want, got)
				clear(got)
				require.NoError(t, collate.GatherStreaming(dt, st, idx))
				check(t)
				require.Equal(t, want, got, "streaming stores")
			})
		}
	}
	st, _ := collate.FromSlice([]float32{1, 2, 3, 4}, 2, 2)
	dt, _ := collate.FromSlice(make([]float32, 4), 2, 2)
	assert.ErrorContains(t, collate.Gather(dt, st, []int64{1, 2}), "index 2 at position 1 is out of range [0, 2)")
	dt64, _ := collate.FromSlice(make([]float64, 4), 2, 2)
	assert.ErrorContains(t, collate.Gather(dt64, st, []int64{0}), "dst is float64, src is float32")
	assert.ErrorContains(t, collate.Gather(dt, st, []int64{0, 0, 0}), "3 rows into dst")
}

func TestU8ToCHWMatchesTheReference(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, shape := range [][3]int{{1, 1, 1}, {1, 1, 3}, {2, 3, 3}, {5, 7, 3}, {16, 16, 3}, {9, 9, 1}, {4, 5, 4}, {224, 224, 3}, {3, 11, 2}} {
		h, w, c := shape[0], shape[1], shape[2]
		src := make([]uint8, h*w*c)
		for i := range src {
			src[i] = uint8(r.Uint32())
		}
		mean, std := make([]float32, c), make([]float32, c)
		for i := range c {
			mean[i], std[i] = r.Float32(), 0.1+r.Float32()
		}
		want := make([]float32, len(src))
		func() {
			defer useKernels(collate.KernelsGo)()
			require.NoError(t, collate.U8HWCToCHW(want, src, h, w, c, mean, std))
		}()
		// The reference is ToTensor then Normalize, to float32 rounding.
		for ch := range c {
			for p := range h * w {
				x := (float64(src[p*c+ch])/255 - float64(mean[ch])) / float64(std[ch])
				require.InDelta(t, x, want[ch*h*w+p], 1e-5)
			}
		}
		onEveryPath(t, func(t *testing.T, p collate.Kernels) {
			got, check := guarded(len(src), sentinel32)
			require.NoError(t, collate.U8HWCToCHW(got, src, h, w, c, mean, std))
			check(t)
			for i := range want {
				require.Equal(t, math.Float32bits(want[i]), math.Float32bits(got[i]), "shape %v element %d", shape, i)
			}
		})
	}
	assert.ErrorContains(t, collate.U8HWCToCHW(make([]float32, 3), make([]uint8, 3), 1, 1, 3, []float32{0, 0, 0}, []float32{1, 0, 1}), "std of channel 1 is 0")
	assert.ErrorContains(t, collate.U8HWCToCHW(make([]float32, 3), make([]uint8, 4), 1, 1, 3, nil, nil), "needs 3 values, src has 4")
}

func TestPhiloxMatchesTheReferenceAndIsNormal(t *testing.T) {
	for _, n := range []int{0, 1, 3, 4, 5, 31, 32, 33, 63, 64, 65, 1000, 3 * 224 * 224} {
		for _, normal := range []bool{true, false} {
			fill := collate.FillUniform
			if normal {
				fill = collate.FillNormal
			}
			want := make([]float32, n)
			func() {
				defer useKernels(collate.KernelsGo)()
				fill(want, 0x0123456789abcdef, 42)
			}()
			onEveryPath(t, func(t *testing.T, p collate.Kernels) {
				got, check := guarded(n, sentinel32)
				fill(got, 0x0123456789abcdef, 42)
				check(t)
				for i := range want {
					require.Equal(t, math.Float32bits(want[i]), math.Float32bits(got[i]), "n=%d normal=%v element %d", n, normal, i)
				}
			})
		}
	}
	// A prefix is the same stream: values do not depend on the length.
	long, short := make([]float32, 100), make([]float32, 37)
	collate.FillNormal(long, 9, 9)
	collate.FillNormal(short, 9, 9)
	assert.Equal(t, long[:37], short)

	// Moments of a million normals, and of uniforms.
	x := make([]float32, 1<<20)
	collate.FillNormal(x, 1, 2)
	mean, m2, m4 := moments(x)
	assert.InDelta(t, 0, mean, 0.005)
	assert.InDelta(t, 1, m2, 0.005)
	assert.InDelta(t, 3, m4, 0.03, "kurtosis of a normal")
	collate.FillUniform(x, 1, 2)
	mean, m2, _ = moments(x)
	assert.InDelta(t, 0.5, mean, 0.002)
	assert.InDelta(t, 1.0/12, m2, 0.001)
	for _, v := range x {
		require.True(t, v >= 0 && v < 1, "%v", v)
	}
	other := make([]float32, 8)
	collate.FillNormal(other, 1, 3)
	assert.NotEqual(t, x[:8], other, "another stream")
}

func moments(x []float32) (mean, variance, kurtosis float64) {
	for _, v := range x {
		mean += float64(v)
	}
	mean /= float64(len(x))
	var m2, m4 float64
	for _, v := range x {
		d := float64(v) - mean
		m2 += d * d
		m4 += d * d * d * d
	}
	m2 /= float64(len(x))
	m4 /= float64(len(x))
	return mean, m2, m4 / (m2 * m2)
}

func TestPadStackMatchesTheReference(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, tc := range []struct{ n, maxlen, row, elem int }{{1, 1, 4, 4}, {4, 10, 8, 4}, {7, 33, 6, 2}, {3, 5, 1, 1}, {16, 64, 64, 8}} {
		lens := make([]int64, tc.n)
		longest := 0
		for i := range lens {
			lens[i] = int64(r.IntN(tc.maxlen + 1))
			longest = max(longest, int(lens[i]))
		}
		buf := make([]byte, tc.n*tc.maxlen*tc.row)
		for i := range buf {
			buf[i] = uint8(r.Uint32())
		}
		pad := make([]byte, tc.elem)
		for i := range pad {
			pad[i] = 0xa0 + uint8(i)
		}
		want := append([]byte(nil), buf...)
		func() {
			defer useKernels(collate.KernelsGo)()
			collate.PadStack(want, lens, tc.maxlen, longest, tc.row, pad)
		}()
		for i, n := range lens {
			for b := 0; b < longest*tc.row; b++ {
				at := want[i*longest*tc.row+b]
				if b < int(n)*tc.row {
					require.Equal(t, buf[i*tc.maxlen*tc.row+b], at)
				} else {
					require.Equal(t, pad[b%tc.elem], at)
				}
			}
		}
		onEveryPath(t, func(t *testing.T, p collate.Kernels) {
			got := append([]byte(nil), buf...)
			collate.PadStack(got, lens, tc.maxlen, longest, tc.row, pad)
			require.Equal(t, want[:tc.n*longest*tc.row], got[:tc.n*longest*tc.row])
		})
	}
}
