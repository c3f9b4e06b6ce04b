package collate_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/tensorbatch/tensorbatch/collate"
)

// eachPath returns f's output on every path, for comparison.
func eachPath[T any](f func() T) map[collate.Kernels]T {
	out := map[collate.Kernels]T{}
	for _, p := range collate.AvailableKernels() {
		restore := useKernels(p)
		out[p] = f()
		restore()
	}
	return out
}

func sameOnEveryPath[T comparable](t *testing.T, outs map[collate.Kernels][]T, what string) {
	t.Helper()
	ref := outs[collate.KernelsGo]
	for p, got := range outs {
		if len(got) != len(ref) {
			t.Fatalf("%s: %s gave %d values, go %d", what, p, len(got), len(ref))
		}
		for i := range ref {
			if got[i] != ref[i] {
				t.Fatalf("%s: %s differs from go at %d: %v vs %v", what, p, i, got[i], ref[i])
			}
		}
	}
}

func FuzzHalfConversions(f *testing.F) {
	f.Add([]byte{0, 0, 0xc0, 0x7f, 1, 0, 0, 0, 0, 0x10, 0x80, 0x47})
	f.Fuzz(func(t *testing.T, raw []byte) {
		src := make([]float32, len(raw)/4)
		for i := range src {
			src[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		sameOnEveryPath(t, eachPath(func() []collate.F16 {
			d := make([]collate.F16, len(src))
			collate.F32ToF16(d, src)
			return d
		}), "f32 to f16")
		sameOnEveryPath(t, eachPath(func() []collate.BF16 {
			d := make([]collate.BF16, len(src))
			collate.F32ToBF16(d, src)
			return d
		}), "f32 to bf16")
		halves := make([]collate.F16, len(raw)/2)
		for i := range halves {
			halves[i] = collate.F16(binary.LittleEndian.Uint16(raw[2*i:]))
		}
		sameOnEveryPath(t, eachPath(func() []uint32 {
			d := make([]float32, len(halves))
			collate.F16ToF32(d, halves)
			return bitsOf(d)
		}), "f16 to f32")
	})
}

func bitsOf(x []float32) []uint32 {
	out := make([]uint32, len(x))
	for i, v := range x {
		out[i] = math.Float32bits(v)
	}
	return out
}

func FuzzU8HWCToCHW(f *testing.F) {
	f.Add(uint8(7), uint8(5), uint8(3), uint64(1))
	f.Add(uint8(1), uint8(1), uint8(1), uint64(2))
	f.Fuzz(func(t *testing.T, h, w, c uint8, seed uint64) {
		H, W, C := int(h%40)+1, int(w%40)+1, int(c%5)+1
		src := make([]uint8, H*W*C)
		noise := make([]float32, len(src)+2*C)
		collate.FillUniform(noise, seed, 0)
		for i := range src {
			src[i] = uint8(noise[i] * 256)
		}
		mean, std := noise[len(src):len(src)+C], make([]float32, C)
		for i := range std {
			std[i] = 0.05 + noise[len(src)+C+i]
		}
		sameOnEveryPath(t, eachPath(func() []uint32 {
			d := make([]float32, len(src))
			if err := collate.U8HWCToCHW(d, src, H, W, C, mean, std); err != nil {
				t.Fatal(err)
			}
			return bitsOf(d)
		}), "u8 to chw")
	})
}

func FuzzPhilox(f *testing.F) {
	f.Add(uint64(0), uint64(0), uint16(33), true)
	f.Add(uint64(math.MaxUint64), uint64(12345), uint16(1), false)
	f.Fuzz(func(t *testing.T, key, stream uint64, n uint16, normal bool) {
		fill := collate.FillUniform
		if normal {
			fill = collate.FillNormal
		}
		sameOnEveryPath(t, eachPath(func() []uint32 {
			d := make([]float32, int(n)%2000)
			fill(d, key, stream)
			for _, v := range d {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					t.Fatalf("non-finite value %v", v)
				}
			}
			return bitsOf(d)
		}), "philox")
	})
}

// outcome is what a kernel call did: its output, its error or its panic.
type outcome struct {
	out, err, panic string
}

// try runs f, catching a panic: a string panic starting with prefix is an
// outcome, anything else (an index out of range, a nil dereference) fails t.
func try(t *testing.T, prefix string, f func() (out []byte, err error)) (o outcome) {
	defer func() {
		if v := recover(); v != nil {
			msg, ok := v.(string)
			if !ok || !strings.HasPrefix(msg, prefix) {
				t.Fatalf("panic %v, want one starting %q", v, prefix)
			}
			o.panic = msg
		}
	}()
	out, err := f()
	o.out = string(out)
	if err != nil {
		o.err = err.Error()
	}
	return o
}

func sameOutcomes(t *testing.T, outs map[collate.Kernels]outcome, what string) {
	t.Helper()
	for p, o := range outs {
		if o != outs[collate.KernelsGo] {
			t.Fatalf("%s: %s did %+v, go %+v", what, p, o, outs[collate.KernelsGo])
		}
	}
}

// Arguments in and out of range: every path returns the same error,
// panics with the same message or writes the same bytes.
func FuzzPadStack(f *testing.F) {
	f.Add(int64(4), int64(3), int64(8), int64(4), []byte{1, 3, 0, 2}, uint16(128))
	f.Add(int64(1<<61+1), int64(2), int64(8), int64(8), []byte{0, 2}, uint16(16)) // n*maxlen*row wraps to 16
	f.Add(int64(2), int64(1), int64(-4), int64(4), []byte{1}, uint16(8))
	f.Add(int64(2), int64(2), int64(4), int64(4), []byte{1, 0xff}, uint16(16))
	f.Fuzz(func(t *testing.T, maxlen, longest, row, elem int64, rawLens []byte, bufLen uint16) {
		lens := make([]int64, min(len(rawLens), 64))
		for i := range lens {
			lens[i] = int64(int8(rawLens[i]))
		}
		pad := make([]byte, max(0, min(elem, 64)))
		for i := range pad {
			pad[i] = 0xa0 + byte(i)
		}
		base := make([]byte, bufLen%8192)
		for i := range base {
			base[i] = byte(i * 7)
		}
		sameOutcomes(t, eachPath(func() outcome {
			return try(t, "collate: PadStack: ", func() ([]byte, error) {
				buf := bytes.Clone(base)
				collate.PadStack(buf, lens, int(maxlen), int(longest), int(row), pad)
				return buf, nil
			})
		}), "pad stack")
	})
}

func FuzzU8HWCToCHWShapes(f *testing.F) {
	f.Add(int64(2), int64(3), int64(3), uint16(18), uint16(18))
	f.Add(int64(1<<62+1), int64(1), int64(4), uint16(4), uint16(4)) // h*w*c wraps to 4
	f.Add(int64(1<<32), int64(1<<32), int64(1), uint16(0), uint16(0))
	f.Add(int64(-1), int64(-2), int64(3), uint16(6), uint16(6))
	f.Fuzz(func(t *testing.T, h, w, c int64, srcLen, dstLen uint16) {
		src := make([]uint8, srcLen%4096)
		for i := range src {
			src[i] = uint8(i * 13)
		}
		nc := 3
		if c > 0 && c <= 16 {
			nc = int(c)
		}
		mean, std := make([]float32, nc), make([]float32, nc)
		for i := range nc {
			mean[i], std[i] = float32(i)/10, 0.5+float32(i)
		}
		sameOutcomes(t, eachPath(func() outcome {
			return try(t, "", func() ([]byte, error) {
				dst := make([]float32, dstLen%4096)
				err := collate.U8HWCToCHW(dst, src, int(h), int(w), int(c), mean, std)
				return fmt.Append(nil, bitsOf(dst)), err
			})
		}), "u8 to chw")
	})
}

func FuzzGather(f *testing.F) {
	f.Add(uint8(3), uint8(5), uint8(4), []byte{2, 0, 1, 1})
	f.Add(uint8(2), uint8(1), uint8(2), []byte{0xff, 2})
	f.Add(uint8(1), uint8(64), uint8(0), []byte{0})
	f.Fuzz(func(t *testing.T, rows, cols, dstRows uint8, rawIdx []byte) {
		r, c := int(rows%16)+1, int(cols%80)+1
		src := make([]float32, r*c)
		for i := range src {
			src[i] = float32(i)
		}
		st, err := collate.FromSlice(src, r, c)
		if err != nil {
			t.Fatal(err)
		}
		idx := make([]int64, min(len(rawIdx), 32))
		for i := range idx {
			idx[i] = int64(int8(rawIdx[i]))
		}
		for _, streaming := range []bool{false, true} {
			gather := collate.Gather
			if streaming {
				gather = collate.GatherStreaming
			}
			sameOutcomes(t, eachPath(func() outcome {
				return try(t, "", func() ([]byte, error) {
					dst := make([]float32, (int(dstRows)%40+1)*c)
					dt, err := collate.FromSlice(dst, len(dst)/c, c)
					if err != nil {
						t.Fatal(err)
					}
					err = gather(dt, st, idx)
					return fmt.Append(nil, bitsOf(dst)), err
				})
			}), fmt.Sprintf("gather streaming=%v", streaming))
		}
	})
}
