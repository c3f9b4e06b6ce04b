package collate_test

import (
	"bytes"
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/internal/csrc"
)

// Bad arguments to every kernel: an error where the signature has one, a
// panic naming the problem otherwise, on every path, and never a write
// out of bounds (C sees nothing until Go has checked).

func TestU8HWCToCHWRejectsBadArguments(t *testing.T) {
	ones := func(n int) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = 1
		}
		return s
	}
	for _, tc := range []struct {
		name     string
		dst      []float32
		src      []uint8
		h, w, c  int
		mean     []float32
		std      []float32
		contains string
	}{
		// h*w fits, h*w*c wraps to 4: the old check passed and the C
		// kernel read 2^62 pixels.
		{"hwc overflows to the slice length", make([]float32, 4), make([]uint8, 4), 1<<62 + 1, 1, 4, ones(4), ones(4),
			"shape 4611686018427387905x1x4 overflows int"},
		// h*w wraps to 0: the old check passed with empty slices.
		{"hw overflows to 0", nil, nil, 1 << 32, 1 << 32, 1, ones(1), ones(1), "shape 4294967296x4294967296x1 overflows int"},
		{"maximal dimensions", nil, nil, math.MaxInt, math.MaxInt, math.MaxInt, nil, nil, "overflows int"},
		{"zero height, long dst", make([]float32, 1), nil, 0, 1, 1, ones(1), ones(1), "0x1x1 needs 0 values, src has 0 and dst 1"},
		{"zero channels, a mean", nil, nil, 2, 2, 0, ones(1), nil, "0 channels, 1 means and 0 stds"},
		{"negative width", nil, nil, 1, -1, 1, ones(1), ones(1), "collate: u8 to chw: shape 1x-1x1"},
		{"negative channels", nil, nil, 1, 1, -3, nil, nil, "collate: u8 to chw: shape 1x1x-3"},
		{"short src", make([]float32, 6), make([]uint8, 5), 1, 2, 3, ones(3), ones(3), "1x2x3 needs 6 values, src has 5 and dst 6"},
		{"long dst", make([]float32, 7), make([]uint8, 6), 1, 2, 3, ones(3), ones(3), "1x2x3 needs 6 values, src has 6 and dst 7"},
		{"nil slices", nil, nil, 1, 1, 1, ones(1), ones(1), "1x1x1 needs 1 values, src has 0 and dst 0"},
		{"short mean", make([]float32, 3), make([]uint8, 3), 1, 1, 3, ones(2), ones(3), "3 channels, 2 means and 3 stds"},
		{"nil std", make([]float32, 3), make([]uint8, 3), 1, 1, 3, ones(3), nil, "3 channels, 3 means and 0 stds"},
		{"zero std", make([]float32, 3), make([]uint8, 3), 1, 1, 3, ones(3), []float32{1, 1, 0}, "std of channel 2 is 0"},
	} {
		onEveryPath(t, func(t *testing.T, p collate.Kernels) {
			require.ErrorContains(t, collate.U8HWCToCHW(tc.dst, tc.src, tc.h, tc.w, tc.c, tc.mean, tc.std), tc.contains, tc.name)
		})
	}
}

// emptyRows returns tensors with a first dimension of 0, as Layout gives
// them: rows is float32 [0, 3] (a Dynamic field's first 0 rows), batch is
// float32 [0, 3] (a batch of 0 samples), and full is float32 [2, 3].
func emptyRows(t *testing.T) (rows, batch, full collate.Tensor) {
	l, err := collate.NewLayout(collate.Schema{
		{Name: "seq", DType: collate.Float32, Shape: []int{collate.Dynamic, 3}, MaxLen: 4},
		{Name: "vec", DType: collate.Float32, Shape: []int{3}},
	}, 2)
	require.NoError(t, err)
	buf := make([]byte, l.Size())
	full, err = collate.FromSlice([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	require.NoError(t, err)
	return l.Rows(buf, 0, 0, 0), l.Batch(buf, 1, 0), full
}

func TestGatherRejectsBadTensors(t *testing.T) {
	rows0, batch0, full := emptyRows(t)
	f32, _ := collate.FromSlice(make([]float32, 6), 2, 3)
	f64, _ := collate.FromSlice(make([]float64, 6), 2, 3)
	flat, _ := collate.FromSlice(make([]float32, 6))
	wide, _ := collate.FromSlice(make([]float32, 8), 2, 4)
	for _, tc := range []struct {
		name     string
		dst, src collate.Tensor
		idx      []int64
		contains string // "" for no error
	}{
		{"zero tensors", collate.Tensor{}, collate.Tensor{}, nil, "need a first dimension"},
		{"zero dst", collate.Tensor{}, full, []int64{0}, "dst is DType(0), src is float32"},
		{"zero src", f32, collate.Tensor{}, []int64{0}, "dst is float32, src is DType(0)"},
		// A first dimension of 0 divided by zero in the old row size.
		{"src of 0 rows, no indices", f32, rows0, nil, ""},
		{"src of 0 rows", f32, rows0, []int64{0}, "index 0 at position 0 is out of range [0, 0)"},
		{"dst of 0 rows, no indices", batch0, full, nil, ""},
		{"dst of 0 rows", batch0, full, []int64{1}, "1 rows into dst Tensor(float32[0,3])"},
		{"both of 0 rows", batch0, rows0, []int64{}, ""},
		{"dtypes differ", f64, full, []int64{0}, "dst is float64, src is float32"},
		{"ranks differ", flat, full, []int64{0}, "dst Tensor(float32[6]) rows differ from src Tensor(float32[2,3]) rows"},
		{"rows differ", wide, full, []int64{0}, "dst Tensor(float32[2,4]) rows differ"},
		{"too many rows", f32, full, []int64{0, 1, 0}, "3 rows into dst"},
		{"negative index", f32, full, []int64{1, -1}, "index -1 at position 1 is out of range [0, 2)"},
		{"index past the end", f32, full, []int64{2}, "index 2 at position 0 is out of range [0, 2)"},
		{"minimal index", f32, full, []int64{math.MinInt64}, "index -9223372036854775808 at position 0 is out of range"},
		{"maximal index", f32, full, []int64{math.MaxInt64}, "index 9223372036854775807 at position 0 is out of range"},
	} {
		onEveryPath(t, func(t *testing.T, p collate.Kernels) {
			before := bytes.Clone(tc.dst.Bytes())
			for _, gather := range []func(dst, src collate.Tensor, idx []int64) error{collate.Gather, collate.GatherStreaming} {
				err := gather(tc.dst, tc.src, tc.idx)
				if tc.contains == "" {
					require.NoError(t, err, tc.name)
					continue
				}
				require.ErrorContains(t, err, tc.contains, tc.name)
				require.Equal(t, before, tc.dst.Bytes(), "%s: a rejected gather wrote dst", tc.name)
			}
		})
	}
}

func TestPadStackPanicsOnBadArguments(t *testing.T) {
	const huge = 1<<61 + 1 // 2*huge*8 wraps to 16
	for _, tc := range []struct {
		name                 string
		buf                  []byte
		lens                 []int64
		maxlen, longest, row int
		pad                  []byte
		panics               string
	}{
		{"negative row", make([]byte, 8), []int64{1}, 2, 1, -4, make([]byte, 4),
			"collate: PadStack: negative size: maxlen 2, longest 1, row -4"},
		{"negative maxlen", make([]byte, 8), []int64{0}, -1, -1, 4, make([]byte, 4),
			"collate: PadStack: negative size: maxlen -1, longest -1, row 4"},
		{"negative longest", make([]byte, 8), nil, 2, -1, 4, make([]byte, 4),
			"collate: PadStack: negative size: maxlen 2, longest -1, row 4"},
		{"longest over maxlen", make([]byte, 64), []int64{3}, 2, 3, 4, make([]byte, 4),
			"collate: PadStack: longest 3 is more than maxlen 2"},
		{"longest over maxlen, no samples", nil, nil, 2, 3, 4, make([]byte, 4),
			"collate: PadStack: longest 3 is more than maxlen 2"},
		// len(lens)*maxlen*row wraps to len(buf): the old check passed and
		// sample 1 was written past the buffer.
		{"size overflows", make([]byte, 16), []int64{0, 2}, huge, 2, 8, make([]byte, 8),
			"collate: PadStack: 2 samples of 2305843009213693953 rows of 8 bytes overflow int"},
		{"maximal sizes", nil, []int64{0}, math.MaxInt, 1, math.MaxInt, []byte{0},
			"collate: PadStack: 1 samples of 9223372036854775807 rows of 9223372036854775807 bytes overflow int"},
		{"short buffer", make([]byte, 15), []int64{1, 2}, 2, 2, 4, make([]byte, 4),
			"collate: PadStack: buffer of 15 bytes, need 16"},
		{"nil buffer", nil, []int64{0}, 1, 1, 1, []byte{0}, "collate: PadStack: buffer of 0 bytes, need 1"},
		{"negative length", make([]byte, 16), []int64{1, -1}, 2, 2, 4, make([]byte, 4),
			"collate: PadStack: sample 1 has -1 rows; longest 2, max 2"},
		{"length over longest", make([]byte, 24), []int64{3, 1}, 3, 2, 4, make([]byte, 4),
			"collate: PadStack: sample 0 has 3 rows; longest 2, max 3"},
		{"minimal length", make([]byte, 16), []int64{math.MinInt64}, 2, 2, 4, make([]byte, 4),
			"collate: PadStack: sample 0 has -9223372036854775808 rows; longest 2, max 2"},
		{"empty pad", make([]byte, 16), []int64{1}, 2, 2, 4, nil, "collate: PadStack: pad of 0 bytes does not divide rows of 4"},
		{"pad does not divide row", make([]byte, 24), []int64{1}, 2, 2, 6, make([]byte, 4),
			"collate: PadStack: pad of 4 bytes does not divide rows of 6"},
	} {
		onEveryPath(t, func(t *testing.T, p collate.Kernels) {
			buf := bytes.Clone(tc.buf)
			assert.PanicsWithValue(t, tc.panics, func() {
				collate.PadStack(buf, tc.lens, tc.maxlen, tc.longest, tc.row, tc.pad)
			}, tc.name)
			assert.Equal(t, tc.buf, buf, "%s: a rejected PadStack wrote buf", tc.name)
		})
	}
	onEveryPath(t, func(t *testing.T, p collate.Kernels) {
		assert.NotPanics(t, func() { collate.PadStack(nil, nil, 0, 0, 4, make([]byte, 4)) }, "no samples")
		assert.NotPanics(t, func() { collate.PadStack(nil, []int64{0, 0}, 0, 0, 4, make([]byte, 4)) }, "no rows")
		assert.NotPanics(t, func() { collate.PadStack(nil, []int64{0}, 3, 0, 0, []byte{1}) }, "empty rows")
	})
}

func TestConversionsPanicOnAShortDst(t *testing.T) {
	for _, tc := range []struct {
		name, panics string
		f            func()
	}{
		{"F32ToF16", "collate: F32ToF16: dst holds 1 values, src has 2", func() { collate.F32ToF16(make([]collate.F16, 1), []float32{1, 2}) }},
		{"F16ToF32", "collate: F16ToF32: dst holds 0 values, src has 1", func() { collate.F16ToF32(nil, []collate.F16{1}) }},
		{"F32ToBF16", "collate: F32ToBF16: dst holds 16 values, src has 17", func() { collate.F32ToBF16(make([]collate.BF16, 16), make([]float32, 17)) }},
		{"BF16ToF32", "collate: BF16ToF32: dst holds 31 values, src has 33", func() { collate.BF16ToF32(make([]float32, 31), make([]collate.BF16, 33)) }},
	} {
		onEveryPath(t, func(t *testing.T, p collate.Kernels) {
			assert.PanicsWithValue(t, tc.panics, tc.f, tc.name)
		})
	}
	onEveryPath(t, func(t *testing.T, p collate.Kernels) {
		assert.NotPanics(t, func() {
			collate.F32ToF16(nil, nil)
			collate.F16ToF32(nil, nil)
			collate.F32ToBF16(nil, nil)
			collate.BF16ToF32(nil, nil)
			collate.FillNormal(nil, 1, 2)
			collate.FillUniform(nil, 1, 2)
		}, "empty slices")
		long := make([]float32, 8)
		collate.F16ToF32(long, []collate.F16{0x3c00})
		assert.Equal(t, []float32{1, 0, 0, 0, 0, 0, 0, 0}, long, "a longer dst is written for len(src) values")
	})
}

func TestSetKernelsRefusesKernelsTheCPUCannotRun(t *testing.T) {
	before := collate.ActiveKernels()
	for _, k := range []csrc.Kernels{7, -1} {
		restore, err := csrc.SetKernels(k)
		assert.Nil(t, restore)
		assert.EqualError(t, err, fmt.Sprintf("csrc: SetKernels(Kernels(%d)): this CPU cannot run them", int(k)))
	}
	assert.Equal(t, before, collate.ActiveKernels(), "a refused SetKernels changes nothing")
	assert.Equal(t, "Kernels(7)", collate.Kernels(7).String())
}

// SetKernels may run while kernels do (go test -race checks): every call
// runs on one implementation, and every one gives the same bits.
func TestSetKernelsIsSafeForConcurrentUse(t *testing.T) {
	src := specials()
	want := make([]collate.F16, len(src))
	func() {
		defer useKernels(collate.KernelsGo)()
		collate.F32ToF16(want, src)
	}()
	defer useKernels(collate.ActiveKernels())()
	stop := make(chan struct{})
	var setter, kernels sync.WaitGroup
	setter.Go(func() {
		paths := collate.AvailableKernels()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			restore := useKernels(paths[i%len(paths)])
			if i%3 == 0 {
				restore()
			}
			_ = collate.ActiveKernels()
		}
	})
	for range 2 {
		kernels.Go(func() {
			got := make([]collate.F16, len(src))
			noise := make([]float32, 64)
			for range 300 {
				collate.F32ToF16(got, src)
				collate.FillNormal(noise, 1, 2)
				if !assert.Equal(t, want, got) {
					return
				}
			}
		})
	}
	kernels.Wait()
	close(stop)
	setter.Wait()
}
