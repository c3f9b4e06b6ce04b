//go:build cgo

package csrc_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tensorbatch/tensorbatch/internal/csrc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// paths returns the C kernels this CPU runs.
func paths() []csrc.Kernels { return csrc.AvailableKernels()[1:] }

// The bindings are public: each checks its bounds and panics, naming the
// problem, rather than let C write (or read) out of bounds.
func TestKernelsPanicOnBadArguments(t *testing.T) {
	t.Parallel()
	const huge = 1<<61 + 1 // 2*huge*8 wraps to 16
	for _, p := range paths() {
		for _, tc := range []struct {
			name, panics string
			f            func()
		}{
			{"gather negative row", "csrc: Gather: row of -4 bytes", func() {
				csrc.Gather(p, make([]byte, 8), make([]byte, 8), []int64{0}, -4, false)
			}},
			{"gather short dst", "csrc: Gather: 2 rows of 4 bytes into dst of 7 bytes", func() {
				csrc.Gather(p, make([]byte, 7), make([]byte, 8), []int64{0, 1}, 4, false)
			}},
			{"gather nil dst", "csrc: Gather: 1 rows of 4 bytes into dst of 0 bytes", func() {
				csrc.Gather(p, nil, make([]byte, 8), []int64{0}, 4, true)
			}},
			{"gather index past the end", "csrc: Gather: index 2 at position 1 is out of range [0, 2)", func() {
				csrc.Gather(p, make([]byte, 8), make([]byte, 8), []int64{1, 2}, 4, false)
			}},
			{"gather negative index", "csrc: Gather: index -1 at position 0 is out of range [0, 2)", func() {
				csrc.Gather(p, make([]byte, 8), make([]byte, 8), []int64{-1}, 4, true)
			}},
			{"gather nil src", "csrc: Gather: index 0 at position 0 is out of range [0, 0)", func() {
				csrc.Gather(p, make([]byte, 8), nil, []int64{0}, 4, false)
			}},
			{"u8 negative pixels", "csrc: U8HWCToF32CHW: -1 pixels of 3 channels", func() {
				csrc.U8HWCToF32CHW(p, nil, nil, -1, 3, nil, nil)
			}},
			{"u8 negative channels", "csrc: U8HWCToF32CHW: 4 pixels of -3 channels", func() {
				csrc.U8HWCToF32CHW(p, nil, nil, 4, -3, nil, nil)
			}},
			{"u8 overflow", "csrc: U8HWCToF32CHW: 4611686018427387905 pixels of 4 channels overflow int", func() {
				csrc.U8HWCToF32CHW(p, make([]float32, 4), make([]byte, 4), 1<<62+1, 4, make([]float32, 4), make([]float32, 4))
			}},
			{"u8 short src", "csrc: U8HWCToF32CHW: 2 pixels of 3 channels; src has 5 values, dst 6, scale 3, bias 3", func() {
				csrc.U8HWCToF32CHW(p, make([]float32, 6), make([]byte, 5), 2, 3, make([]float32, 3), make([]float32, 3))
			}},
			{"u8 short dst", "csrc: U8HWCToF32CHW: 2 pixels of 3 channels; src has 6 values, dst 5, scale 3, bias 3", func() {
				csrc.U8HWCToF32CHW(p, make([]float32, 5), make([]byte, 6), 2, 3, make([]float32, 3), make([]float32, 3))
			}},
			{"u8 short scale", "csrc: U8HWCToF32CHW: 2 pixels of 3 channels; src has 6 values, dst 6, scale 2, bias 3", func() {
				csrc.U8HWCToF32CHW(p, make([]float32, 6), make([]byte, 6), 2, 3, make([]float32, 2), make([]float32, 3))
			}},
			{"u8 nil bias", "csrc: U8HWCToF32CHW: 2 pixels of 3 channels; src has 6 values, dst 6, scale 3, bias 0", func() {
				csrc.U8HWCToF32CHW(p, make([]float32, 6), make([]byte, 6), 2, 3, make([]float32, 3), nil)
			}},
			{"f32 to f16", "csrc: F32ToF16: dst holds 1 values, src has 2", func() {
				csrc.F32ToF16(p, make([]uint16, 1), make([]float32, 2))
			}},
			{"f16 to f32", "csrc: F16ToF32: dst holds 0 values, src has 17", func() {
				csrc.F16ToF32(p, nil, make([]uint16, 17))
			}},
			{"f32 to bf16", "csrc: F32ToBF16: dst holds 16 values, src has 32", func() {
				csrc.F32ToBF16(p, make([]uint16, 16), make([]float32, 32))
			}},
			{"bf16 to f32", "csrc: BF16ToF32: dst holds 3 values, src has 4", func() {
				csrc.BF16ToF32(p, make([]float32, 3), make([]uint16, 4))
			}},
			{"pad negative row", "csrc: PadStack: negative size: maxlen 2, longest 1, row -4", func() {
				csrc.PadStack(make([]byte, 8), []int64{1}, 2, 1, -4, make([]byte, 4))
			}},
			{"pad negative maxlen", "csrc: PadStack: negative size: maxlen -2, longest -3, row 4", func() {
				csrc.PadStack(make([]byte, 8), []int64{0}, -2, -3, 4, make([]byte, 4))
			}},
			{"pad longest over maxlen", "csrc: PadStack: longest 3 is more than maxlen 2", func() {
				csrc.PadStack(make([]byte, 64), []int64{3}, 2, 3, 4, make([]byte, 4))
			}},
			{"pad empty pattern", "csrc: PadStack: pad of 0 bytes does not divide rows of 4", func() {
				csrc.PadStack(make([]byte, 8), []int64{1}, 2, 2, 4, nil)
			}},
			{"pad pattern does not divide row", "csrc: PadStack: pad of 4 bytes does not divide rows of 6", func() {
				csrc.PadStack(make([]byte, 24), []int64{1}, 2, 2, 6, make([]byte, 4))
			}},
			{"pad size overflows", "csrc: PadStack: 2 samples of 2305843009213693953 rows of 8 bytes do not fit a buffer of 16 bytes", func() {
				csrc.PadStack(make([]byte, 16), []int64{0, 2}, huge, 2, 8, make([]byte, 8))
			}},
			{"pad short buffer", "csrc: PadStack: 2 samples of 2 rows of 4 bytes do not fit a buffer of 15 bytes", func() {
				csrc.PadStack(make([]byte, 15), []int64{1, 2}, 2, 2, 4, make([]byte, 4))
			}},
			{"pad negative length", "csrc: PadStack: sample 1 has -1 rows, outside [0, 2]", func() {
				csrc.PadStack(make([]byte, 16), []int64{1, -1}, 2, 2, 4, make([]byte, 4))
			}},
			{"pad length over longest", "csrc: PadStack: sample 0 has 3 rows, outside [0, 2]", func() {
				csrc.PadStack(make([]byte, 24), []int64{3, 1}, 3, 2, 4, make([]byte, 4))
			}},
		} {
			assert.PanicsWithValue(t, tc.panics, tc.f, "%s on %s", tc.name, p)
		}
	}
}

func TestKernelsStopAtABadIndexOrLength(t *testing.T) {
	t.Parallel()
	for _, p := range paths() {
		src := []byte{0, 1, 2, 3, 4, 5, 6, 7}
		dst := bytes.Repeat([]byte{0xee}, 12)
		require.Panics(t, func() { csrc.Gather(p, dst, src, []int64{1, 0, 5}, 4, true) })
		assert.Equal(t, []byte{4, 5, 6, 7, 0, 1, 2, 3, 0xee, 0xee, 0xee, 0xee}, dst, "the rows before the bad index, on %s", p)

		buf := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9}
		require.Panics(t, func() { csrc.PadStack(buf, []int64{1, 2, 9}, 3, 2, 1, []byte{0}) })
		assert.Equal(t, []byte{1, 0, 4, 5, 5, 6, 7, 8, 9}, buf, "the samples before the bad length, on %s", p)
	}
}

func TestKernelsAcceptEmptyArguments(t *testing.T) {
	t.Parallel()
	for _, p := range paths() {
		assert.NotPanics(t, func() {
			csrc.Gather(p, nil, nil, nil, 4, false)
			csrc.Gather(p, nil, nil, []int64{5, -5}, 0, true) // rows of 0 bytes: nothing to copy
			csrc.U8HWCToF32CHW(p, nil, nil, 0, 3, nil, nil)
			csrc.U8HWCToF32CHW(p, nil, nil, 5, 0, nil, nil)
			csrc.F32ToF16(p, nil, nil)
			csrc.F16ToF32(p, nil, nil)
			csrc.F32ToBF16(p, nil, nil)
			csrc.BF16ToF32(p, nil, nil)
			csrc.PadStack(nil, nil, 0, 0, 4, make([]byte, 4))
			csrc.PadStack(nil, []int64{0, 0}, 0, 0, 4, make([]byte, 4))
			csrc.PhiloxFill(p, nil, 1, 2, 3, true)
		}, "on %s", p)
	}
}
