package collate

import (
	"fmt"
	"math"

	"github.com/klauspost/cpuid/v2"

	"github.com/tensorbatch/tensorbatch/internal/csrc"
)

// Kernels is an implementation of the collation kernels (and of vision's
// image kernels): the plain Go reference, baseline C, or a SIMD one.
type Kernels int

// The implementations, slowest first.
const (
	KernelsGo     Kernels = iota // the Go reference
	KernelsScalar                // baseline C
	KernelsAVX2                  // AVX2 and F16C
	KernelsAVX512                // AVX-512 F, BW and VL
)

// The numbering is internal/csrc's, which the C kernels take.
var (
	_ [0]int = [KernelsGo - Kernels(csrc.KernelsGo)]int{}
	_ [0]int = [KernelsScalar - Kernels(csrc.KernelsScalar)]int{}
	_ [0]int = [KernelsAVX2 - Kernels(csrc.KernelsAVX2)]int{}
	_ [0]int = [KernelsAVX512 - Kernels(csrc.KernelsAVX512)]int{}
)

// String returns the name EnvKernels takes: go, scalar, avx2 or avx512.
func (k Kernels) String() string { return csrc.Kernels(k).String() }

// EnvKernels forces the kernels: go, scalar, avx2 or avx512. Kernels this
// CPU cannot run are refused with a logged warning, and the fastest run.
const EnvKernels = "TENSORBATCH_KERNELS"

// AvailableKernels returns the kernels this CPU runs, fastest last: go
// alone in a binary built without cgo, which has no C kernels.
func AvailableKernels() []Kernels {
	var ks []Kernels
	for _, k := range csrc.AvailableKernels() {
		ks = append(ks, Kernels(k))
	}
	return ks
}

// ActiveKernels returns the kernels that run: the fastest available, or
// those EnvKernels names.
func ActiveKernels() Kernels { return Kernels(csrc.ActiveKernels()) }

// llcBytes is the last-level cache size; copies larger than it stream.
var llcBytes = max(cpuid.CPU.Cache.L3, 8<<20)

// Gather copies rows idx of src (along its first dimension) into dst, in
// order. dst must have the dtype and row shape of src and room for
// len(idx) rows. An index out of range is an error naming its position.
// Destinations larger than the last-level cache are written with streaming
// (non-temporal) stores.
func Gather(dst, src Tensor, idx []int64) error { return gather(dst, src, idx, false) }

// GatherStreaming is Gather with streaming stores whatever the size: for
// write-combined destinations, which ordinary stores write slowly.
func GatherStreaming(dst, src Tensor, idx []int64) error { return gather(dst, src, idx, true) }

func gather(dst, src Tensor, idx []int64, streaming bool) error {
	if dst.dtype != src.dtype {
		return fmt.Errorf("collate: gather: dst is %s, src is %s", dst.dtype, src.dtype)
	}
	if src.Rank() == 0 || dst.Rank() == 0 {
		return fmt.Errorf("collate: gather: src %v and dst %v need a first dimension", src, dst)
	}
	row, err := rowBytes("src", src)
	if err != nil {
		return err
	}
	drow, err := rowBytes("dst", dst)
	if err != nil {
		return err
	}
	if dst.Rank() != src.Rank() || drow != row {
		return fmt.Errorf("collate: gather: dst %v rows differ from src %v rows", dst, src)
	}
	if len(idx) > dst.shape[0] {
		return fmt.Errorf("collate: gather: %d rows into dst %v", len(idx), dst)
	}
	for pos, i := range idx {
		if i < 0 || i >= int64(src.shape[0]) {
			return fmt.Errorf("collate: gather: index %d at position %d is out of range [0, %d)", i, pos, src.shape[0])
		}
	}
	d, s := dst.Bytes(), src.Bytes() // checks their leases
	p := csrc.ActiveKernels()
	if p == csrc.KernelsGo {
		gatherGo(d, s, idx, row)
		return nil
	}
	csrc.Gather(p, d, s, idx, row, streaming || len(idx)*row > llcBytes)
	return nil
}

// rowBytes returns the bytes of one row of t (its elements after the first
// dimension), after checking that t's memory holds exactly its shape. t
// has rank >= 1. Tensors made by MakeTensor and Layout pass; the check
// keeps the C kernels in bounds whatever a Tensor holds.
func rowBytes(what string, t Tensor) (int, error) {
	row := t.dtype.Size()
	if row == 0 {
		return 0, fmt.Errorf("collate: gather: %s %v has an invalid dtype", what, t)
	}
	for _, d := range t.shape {
		if d < 0 {
			return 0, fmt.Errorf("collate: gather: %s %v has a negative dimension", what, t)
		}
	}
	ok := true
	for _, d := range t.shape[1:] {
		row, ok = mulInt(row, d, ok)
	}
	size, ok := mulInt(t.shape[0], row, ok)
	if !ok {
		return 0, fmt.Errorf("collate: gather: %s %v is larger than the address space", what, t)
	}
	if size != len(t.data) {
		return 0, fmt.Errorf("collate: gather: %s %v holds %d bytes, its shape needs %d", what, t, len(t.data), size)
	}
	return row, nil
}

// mulInt returns a*b for a, b >= 0, and ok && the product fits an int,
// so that a chain of products reports any overflow at its end.
func mulInt(a, b int, ok bool) (int, bool) {
	if a < 0 || b < 0 || b > 0 && a > math.MaxInt/b {
		return 0, false
	}
	return a * b, ok
}

// U8HWCToCHW is ToTensor and Normalize fused: h×w pixels of c uint8
// channels (HWC) become float32 CHW, x/255 normalized by mean and std per
// channel, computed as float32(x)*scale + bias with scale = 1/(255·std)
// and bias = -mean/std. A dimension may be 0 (an empty image): then
// nothing is written, but the lengths are still checked.
func U8HWCToCHW(dst []float32, src []uint8, h, w, c int, mean, std []float32) error {
	hw, ok := mulInt(h, w, true)
	n, ok := mulInt(hw, c, ok)
	switch {
	case h < 0 || w < 0 || c < 0:
		return fmt.Errorf("collate: u8 to chw: shape %dx%dx%d", h, w, c)
	case !ok:
		return fmt.Errorf("collate: u8 to chw: shape %dx%dx%d overflows int", h, w, c)
	case len(src) != n || len(dst) != n:
		return fmt.Errorf("collate: u8 to chw: %dx%dx%d needs %d values, src has %d and dst %d", h, w, c, n, len(src), len(dst))
	case len(mean) != c || len(std) != c:
		return fmt.Errorf("collate: u8 to chw: %d channels, %d means and %d stds", c, len(mean), len(std))
	}
	scale, bias := make([]float32, c), make([]float32, c)
	for i := range c {
		if std[i] == 0 {
			return fmt.Errorf("collate: u8 to chw: std of channel %d is 0", i)
		}
		scale[i] = 1 / (255 * std[i])
		bias[i] = -mean[i] / std[i]
	}
	p := csrc.ActiveKernels()
	if p == csrc.KernelsGo {
		u8ToCHWGo(dst, src, hw, c, scale, bias)
		return nil
	}
	csrc.U8HWCToF32CHW(p, dst, src, hw, c, scale, bias)
	return nil
}

// convert runs a conversion kernel: ref element by element on KernelsGo,
// else the C kernel c.
func convert[D, S any](op string, dst []D, src []S, ref func(S) D, c func(p csrc.Kernels, dst []D, src []S)) {
	if len(dst) < len(src) {
		panic(fmt.Sprintf("collate: %s: dst holds %d values, src has %d", op, len(dst), len(src)))
	}
	p := csrc.ActiveKernels()
	if p == csrc.KernelsGo {
		for i, v := range src {
			dst[i] = ref(v)
		}
		return
	}
	c(p, dst, src)
}

// F32ToF16 converts src to half precision, rounding to nearest even.
func F32ToF16(dst []F16, src []float32) {
	convert("F32ToF16", dst, src, f32ToF16, func(p csrc.Kernels, d []F16, s []float32) { csrc.F32ToF16(p, u16(d), s) })
}

// F16ToF32 converts half-precision src to float32 (exactly).
func F16ToF32(dst []float32, src []F16) {
	convert("F16ToF32", dst, src, f16ToF32, func(p csrc.Kernels, d []float32, s []F16) { csrc.F16ToF32(p, d, u16(s)) })
}

// F32ToBF16 converts src to bfloat16, rounding to nearest even.
func F32ToBF16(dst []BF16, src []float32) {
	convert("F32ToBF16", dst, src, f32ToBF16, func(p csrc.Kernels, d []BF16, s []float32) { csrc.F32ToBF16(p, u16(d), s) })
}

// BF16ToF32 converts bfloat16 src to float32 (exactly).
func BF16ToF32(dst []float32, src []BF16) {
	convert("BF16ToF32", dst, src, bf16ToF32, func(p csrc.Kernels, d []float32, s []BF16) { csrc.BF16ToF32(p, d, u16(s)) })
}

// FillNormal fills dst with standard normal values from the Philox4x32-10
// stream keyed by key and stream (Box-Muller; see
// internal/csrc/tb_kernels.h for the exact algorithm). The same arguments
// give the same bits on every path and machine. A sample's Slot.Seed gives
// (key, stream); add a field number to stream to draw independent values
// for several fields.
func FillNormal(dst []float32, key, stream uint64) { philox(dst, key, stream, true) }

// FillUniform fills dst with values uniform in [0, 1) from the same stream
// as FillNormal.
func FillUniform(dst []float32, key, stream uint64) { philox(dst, key, stream, false) }

func philox(dst []float32, key, stream uint64, normal bool) {
	p := csrc.ActiveKernels()
	if p == csrc.KernelsGo {
		philoxGo(dst, key, stream, 0, normal)
		return
	}
	csrc.PhiloxFill(p, dst, key, stream, 0, normal)
}

// PadStack pads the n = len(lens) samples of a batch field in place: sample
// i's lens[i] rows of row bytes move from i*maxlen*row to i*longest*row, and
// the rows up to longest are filled with the element pattern pad. It
// panics, as copy would, unless 0 <= lens[i] <= longest <= maxlen, buf
// holds n*maxlen*row bytes and len(pad) divides row.
func PadStack(buf []byte, lens []int64, maxlen, longest, row int, pad []byte) {
	need, ok := mulInt(len(lens), maxlen, true)
	need, ok = mulInt(need, row, ok)
	switch {
	case maxlen < 0 || longest < 0 || row < 0:
		panic(fmt.Sprintf("collate: PadStack: negative size: maxlen %d, longest %d, row %d", maxlen, longest, row))
	case longest > maxlen:
		panic(fmt.Sprintf("collate: PadStack: longest %d is more than maxlen %d", longest, maxlen))
	case len(pad) == 0 || row%len(pad) != 0:
		panic(fmt.Sprintf("collate: PadStack: pad of %d bytes does not divide rows of %d", len(pad), row))
	case !ok:
		panic(fmt.Sprintf("collate: PadStack: %d samples of %d rows of %d bytes overflow int", len(lens), maxlen, row))
	case len(buf) < need:
		panic(fmt.Sprintf("collate: PadStack: buffer of %d bytes, need %d", len(buf), need))
	}
	for i, n := range lens {
		if n < 0 || n > int64(longest) {
			panic(fmt.Sprintf("collate: PadStack: sample %d has %d rows; longest %d, max %d", i, n, longest, maxlen))
		}
	}
	if csrc.ActiveKernels() == csrc.KernelsGo {
		padStackGo(buf, lens, maxlen, longest, row, pad)
		return
	}
	csrc.PadStack(buf, lens, maxlen, longest, row, pad)
}
