package csrc

/*
#cgo LDFLAGS: -lm
#cgo noescape tb_gather
#cgo nocallback tb_gather
#cgo noescape tb_u8hwc_to_f32chw
#cgo nocallback tb_u8hwc_to_f32chw
#cgo noescape tb_f32_to_f16
#cgo nocallback tb_f32_to_f16
#cgo noescape tb_f16_to_f32
#cgo nocallback tb_f16_to_f32
#cgo noescape tb_f32_to_bf16
#cgo nocallback tb_f32_to_bf16
#cgo noescape tb_bf16_to_f32
#cgo nocallback tb_bf16_to_f32
#cgo noescape tb_pad_stack
#cgo nocallback tb_pad_stack
#cgo noescape tb_philox_fill
#cgo nocallback tb_philox_fill
#include "tb_kernels.h"
*/
import "C"

import "unsafe"

// Path is a kernel implementation: the baseline C code or a SIMD one.
type Path int

// The C paths. Callers check CPU support (package collate does).
const (
	Scalar Path = C.TB_PATH_SCALAR
	AVX2   Path = C.TB_PATH_AVX2
	AVX512 Path = C.TB_PATH_AVX512
)

func (p Path) String() string {
	switch p {
	case Scalar:
		return "scalar"
	case AVX2:
		return "avx2"
	case AVX512:
		return "avx512"
	}
	return "Path(?)"
}

// ptr returns the address of s's first element, or nil for an empty slice.
func ptr[T any](s []T) unsafe.Pointer {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Pointer(&s[0])
}

// Gather copies rows idx of src (row bytes each) into dst, in order. The
// caller checks bounds: len(dst) >= len(idx)*row and every index in range.
func Gather(p Path, dst, src []byte, idx []int64, row int, streaming bool) {
	if len(idx) == 0 || row == 0 {
		return
	}
	nt := C.int(0)
	if streaming {
		nt = 1
	}
	C.tb_gather(C.int(p), (*C.uint8_t)(ptr(dst)), (*C.uint8_t)(ptr(src)), (*C.int64_t)(ptr(idx)), C.size_t(len(idx)), C.size_t(row), nt)
}

// U8HWCToF32CHW converts hw pixels of c uint8 channels (HWC) to float32 CHW:
// dst[ch*hw+p] = float32(src[p*c+ch])*scale[ch] + bias[ch].
func U8HWCToF32CHW(p Path, dst []float32, src []byte, hw, c int, scale, bias []float32) {
	if hw*c == 0 {
		return
	}
	C.tb_u8hwc_to_f32chw(C.int(p), (*C.float)(ptr(dst)), (*C.uint8_t)(ptr(src)), C.size_t(hw), C.size_t(c), (*C.float)(ptr(scale)), (*C.float)(ptr(bias)))
}

// F32ToF16 converts len(src) values; len(dst) >= len(src).
func F32ToF16(p Path, dst []uint16, src []float32) {
	C.tb_f32_to_f16(C.int(p), (*C.uint16_t)(ptr(dst)), (*C.float)(ptr(src)), C.size_t(len(src)))
}

// F16ToF32 converts len(src) values; len(dst) >= len(src).
func F16ToF32(p Path, dst []float32, src []uint16) {
	C.tb_f16_to_f32(C.int(p), (*C.float)(ptr(dst)), (*C.uint16_t)(ptr(src)), C.size_t(len(src)))
}

// F32ToBF16 converts len(src) values; len(dst) >= len(src).
func F32ToBF16(p Path, dst []uint16, src []float32) {
	C.tb_f32_to_bf16(C.int(p), (*C.uint16_t)(ptr(dst)), (*C.float)(ptr(src)), C.size_t(len(src)))
}

// BF16ToF32 converts len(src) values; len(dst) >= len(src).
func BF16ToF32(p Path, dst []float32, src []uint16) {
	C.tb_bf16_to_f32(C.int(p), (*C.float)(ptr(dst)), (*C.uint16_t)(ptr(src)), C.size_t(len(src)))
}

// PadStack moves sample i's lens[i] rows from i*maxlen*row to
// i*longest*row in buf and fills the rest of its longest rows with pad.
func PadStack(buf []byte, lens []int64, maxlen, longest, row int, pad []byte) {
	if len(lens) == 0 || row == 0 {
		return
	}
	C.tb_pad_stack((*C.uint8_t)(ptr(buf)), (*C.int64_t)(ptr(lens)), C.size_t(len(lens)), C.size_t(maxlen), C.size_t(longest),
		C.size_t(row), (*C.uint8_t)(ptr(pad)), C.size_t(len(pad)))
}

// PhiloxFill writes len(dst) values of the Philox4x32-10 stream (key,
// stream) from block first: normal or uniform in [0, 1).
func PhiloxFill(p Path, dst []float32, key, stream, first uint64, normal bool) {
	if len(dst) == 0 {
		return
	}
	n := C.int(0)
	if normal {
		n = 1
	}
	C.tb_philox_fill(C.int(p), (*C.float)(ptr(dst)), C.size_t(len(dst)), C.uint64_t(key), C.uint64_t(stream), C.uint64_t(first), n)
}
