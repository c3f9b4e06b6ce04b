//go:build cgo

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

import (
	"fmt"
	"math"
	"unsafe"
)

// ptr returns the address of s's first element, or nil for an empty slice.
func ptr[T any](s []T) unsafe.Pointer {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Pointer(&s[0])
}

// Gather copies rows idx of src (row bytes each) into dst, in order. It
// panics unless len(dst) >= len(idx)*row and every index is in [0,
// len(src)/row); on an index out of range, the rows before it are copied.
// Package collate checks all of this first and returns errors.
func Gather(p Kernels, dst, src []byte, idx []int64, row int, streaming bool) {
	if row < 0 {
		panic(fmt.Sprintf("csrc: Gather: row of %d bytes", row))
	}
	if len(idx) == 0 || row == 0 {
		return
	}
	if len(idx) > len(dst)/row {
		panic(fmt.Sprintf("csrc: Gather: %d rows of %d bytes into dst of %d bytes", len(idx), row, len(dst)))
	}
	nt := C.int(0)
	if streaming {
		nt = 1
	}
	rows := len(src) / row
	// tb_gather checks each index against rows as it copies: a compare in
	// the copy loop, not a second pass over idx.
	done := int(C.tb_gather(C.int(p), (*C.uint8_t)(ptr(dst)), (*C.uint8_t)(ptr(src)), C.size_t(rows), (*C.int64_t)(ptr(idx)),
		C.size_t(len(idx)), C.size_t(row), nt))
	if done < len(idx) {
		panic(fmt.Sprintf("csrc: Gather: index %d at position %d is out of range [0, %d)", idx[done], done, rows))
	}
}

// U8HWCToF32CHW converts hw pixels of c uint8 channels (HWC) to float32 CHW:
// dst[ch*hw+p] = float32(src[p*c+ch])*scale[ch] + bias[ch]. It panics
// unless src and dst hold hw*c values and scale and bias c.
func U8HWCToF32CHW(p Kernels, dst []float32, src []byte, hw, c int, scale, bias []float32) {
	switch {
	case hw < 0 || c < 0:
		panic(fmt.Sprintf("csrc: U8HWCToF32CHW: %d pixels of %d channels", hw, c))
	case hw == 0 || c == 0:
		return
	case hw > math.MaxInt/c:
		panic(fmt.Sprintf("csrc: U8HWCToF32CHW: %d pixels of %d channels overflow int", hw, c))
	case len(src) < hw*c || len(dst) < hw*c || len(scale) < c || len(bias) < c:
		panic(fmt.Sprintf("csrc: U8HWCToF32CHW: %d pixels of %d channels; src has %d values, dst %d, scale %d, bias %d",
			hw, c, len(src), len(dst), len(scale), len(bias)))
	}
	C.tb_u8hwc_to_f32chw(C.int(p), (*C.float)(ptr(dst)), (*C.uint8_t)(ptr(src)), C.size_t(hw), C.size_t(c), (*C.float)(ptr(scale)), (*C.float)(ptr(bias)))
}

// checkConvert panics unless dst has room for src's nsrc values.
func checkConvert(op string, ndst, nsrc int) {
	if ndst < nsrc {
		panic(fmt.Sprintf("csrc: %s: dst holds %d values, src has %d", op, ndst, nsrc))
	}
}

// F32ToF16 converts len(src) values; it panics if len(dst) < len(src).
func F32ToF16(p Kernels, dst []uint16, src []float32) {
	checkConvert("F32ToF16", len(dst), len(src))
	C.tb_f32_to_f16(C.int(p), (*C.uint16_t)(ptr(dst)), (*C.float)(ptr(src)), C.size_t(len(src)))
}

// F16ToF32 converts len(src) values; it panics if len(dst) < len(src).
func F16ToF32(p Kernels, dst []float32, src []uint16) {
	checkConvert("F16ToF32", len(dst), len(src))
	C.tb_f16_to_f32(C.int(p), (*C.float)(ptr(dst)), (*C.uint16_t)(ptr(src)), C.size_t(len(src)))
}

// F32ToBF16 converts len(src) values; it panics if len(dst) < len(src).
func F32ToBF16(p Kernels, dst []uint16, src []float32) {
	checkConvert("F32ToBF16", len(dst), len(src))
	C.tb_f32_to_bf16(C.int(p), (*C.uint16_t)(ptr(dst)), (*C.float)(ptr(src)), C.size_t(len(src)))
}

// BF16ToF32 converts len(src) values; it panics if len(dst) < len(src).
func BF16ToF32(p Kernels, dst []float32, src []uint16) {
	checkConvert("BF16ToF32", len(dst), len(src))
	C.tb_bf16_to_f32(C.int(p), (*C.float)(ptr(dst)), (*C.uint16_t)(ptr(src)), C.size_t(len(src)))
}

// PadStack moves sample i's lens[i] rows from i*maxlen*row to
// i*longest*row in buf and fills the rest of its longest rows with pad.
// It panics unless 0 <= lens[i] <= longest <= maxlen, buf holds
// len(lens)*maxlen*row bytes and len(pad) divides row; on a bad lens[i],
// the samples before it are done.
func PadStack(buf []byte, lens []int64, maxlen, longest, row int, pad []byte) {
	switch {
	case maxlen < 0 || longest < 0 || row < 0:
		panic(fmt.Sprintf("csrc: PadStack: negative size: maxlen %d, longest %d, row %d", maxlen, longest, row))
	case longest > maxlen:
		panic(fmt.Sprintf("csrc: PadStack: longest %d is more than maxlen %d", longest, maxlen))
	case len(pad) == 0 || row%len(pad) != 0:
		panic(fmt.Sprintf("csrc: PadStack: pad of %d bytes does not divide rows of %d", len(pad), row))
	case row > 0 && maxlen > 0 && len(lens) > len(buf)/row/maxlen: // len(lens)*maxlen*row > len(buf), without overflow
		panic(fmt.Sprintf("csrc: PadStack: %d samples of %d rows of %d bytes do not fit a buffer of %d bytes", len(lens), maxlen, row, len(buf)))
	}
	if len(lens) == 0 || row == 0 {
		return
	}
	// tb_pad_stack checks each lens[i] against longest before moving
	// sample i: a compare in its loop, not a second pass over lens.
	done := int(C.tb_pad_stack((*C.uint8_t)(ptr(buf)), (*C.int64_t)(ptr(lens)), C.size_t(len(lens)), C.size_t(maxlen), C.size_t(longest),
		C.size_t(row), (*C.uint8_t)(ptr(pad)), C.size_t(len(pad))))
	if done < len(lens) {
		panic(fmt.Sprintf("csrc: PadStack: sample %d has %d rows, outside [0, %d]", done, lens[done], longest))
	}
}

// PhiloxFill writes len(dst) values of the Philox4x32-10 stream (key,
// stream) from block first: normal or uniform in [0, 1). Any dst is in
// bounds: it writes exactly len(dst) values.
func PhiloxFill(p Kernels, dst []float32, key, stream, first uint64, normal bool) {
	if len(dst) == 0 {
		return
	}
	n := C.int(0)
	if normal {
		n = 1
	}
	C.tb_philox_fill(C.int(p), (*C.float)(ptr(dst)), C.size_t(len(dst)), C.uint64_t(key), C.uint64_t(stream), C.uint64_t(first), n)
}
