package collate_test

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/tensorbatch/tensorbatch/collate"
)

// eachPath returns f's output on every path, for comparison.
func eachPath[T any](f func() T) map[collate.Path]T {
	out := map[collate.Path]T{}
	for _, p := range collate.Paths() {
		restore := collate.SetPath(p)
		out[p] = f()
		restore()
	}
	return out
}

func sameOnEveryPath[T comparable](t *testing.T, outs map[collate.Path][]T, what string) {
	t.Helper()
	ref := outs[collate.PathGo]
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
