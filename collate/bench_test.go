package collate_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/tensorbatch/tensorbatch/collate"
)

// Sizes: one 224×224×3 image, and a 32-image batch.
var benchSizes = []struct {
	name string
	n    int
}{{"150k", 3 * 224 * 224}, {"4.8M", 32 * 3 * 224 * 224}}

// benchPaths runs f on every path, as sub-benchmarks.
func benchPaths(b *testing.B, f func(b *testing.B)) {
	for _, p := range collate.AvailableKernels() {
		b.Run(p.String(), func(b *testing.B) {
			defer useKernels(p)()
			f(b)
		})
	}
}

// BenchmarkMemcpy is the yardstick: copy() of the same bytes.
func BenchmarkMemcpy(b *testing.B) {
	for _, s := range benchSizes {
		b.Run(s.name, func(b *testing.B) {
			src, dst := make([]byte, 4*s.n), make([]byte, 4*s.n)
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				copy(dst, src)
			}
		})
	}
}

func BenchmarkGather(b *testing.B) {
	const rows = 1024
	for _, row := range []int{4 * 3 * 224 * 224 / 8, 4 * 3 * 224 * 224} { // 75 KB and 600 KB rows
		b.Run(fmt.Sprintf("row=%dKB", row>>10), func(b *testing.B) {
			src := make([]byte, rows*row)
			st, _ := collate.MakeTensor(collate.Uint8, []int{rows, row}, src)
			idx := make([]int64, 32)
			r := rand.New(rand.NewPCG(1, 1))
			for i := range idx {
				idx[i] = int64(r.IntN(rows))
			}
			dst := make([]byte, len(idx)*row)
			dt, _ := collate.MakeTensor(collate.Uint8, []int{len(idx), row}, dst)
			// The yardstick: one copy of as many bytes from the same large,
			// cold source, in the same run.
			b.Run("memcpy", func(b *testing.B) {
				b.SetBytes(int64(len(dst)))
				off := 0
				for b.Loop() {
					copy(dst, src[off:off+len(dst)])
					off = (off + len(dst)) % (len(src) - len(dst))
				}
			})
			benchPaths(b, func(b *testing.B) {
				b.SetBytes(int64(len(dst)))
				for b.Loop() {
					if err := collate.Gather(dt, st, idx); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

func BenchmarkU8HWCToCHW(b *testing.B) {
	src := make([]uint8, 224*224*3)
	dst := make([]float32, len(src))
	mean, std := []float32{0.485, 0.456, 0.406}, []float32{0.229, 0.224, 0.225}
	benchPaths(b, func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			collate.U8HWCToCHW(dst, src, 224, 224, 3, mean, std)
		}
	})
}

func BenchmarkF32ToF16(b *testing.B) {
	src := make([]float32, 3*224*224)
	for i := range src {
		src[i] = float32(i) * 0.001
	}
	dst := make([]collate.F16, len(src))
	benchPaths(b, func(b *testing.B) {
		b.SetBytes(int64(4 * len(src)))
		for b.Loop() {
			collate.F32ToF16(dst, src)
		}
	})
}

func BenchmarkF32ToBF16(b *testing.B) {
	src := make([]float32, 3*224*224)
	for i := range src {
		src[i] = float32(i) * 0.001
	}
	dst := make([]collate.BF16, len(src))
	benchPaths(b, func(b *testing.B) {
		b.SetBytes(int64(4 * len(src)))
		for b.Loop() {
			collate.F32ToBF16(dst, src)
		}
	})
}

func BenchmarkF16ToF32(b *testing.B) {
	src := make([]collate.F16, 3*224*224)
	for i := range src {
		src[i] = collate.F16(i)
	}
	dst := make([]float32, len(src))
	benchPaths(b, func(b *testing.B) {
		b.SetBytes(int64(2 * len(src)))
		for b.Loop() {
			collate.F16ToF32(dst, src)
		}
	})
}

// BenchmarkRandNormal reports ns per element for one randn(3,224,224),
// beside math/rand/v2's NormFloat64 in the same run.
func BenchmarkRandNormal(b *testing.B) {
	dst := make([]float32, 3*224*224)
	b.Run("NormFloat64", func(b *testing.B) {
		r := rand.New(rand.NewPCG(1, 2))
		for b.Loop() {
			for i := range dst {
				dst[i] = float32(r.NormFloat64())
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(dst)), "ns/elem")
	})
	benchPaths(b, func(b *testing.B) {
		for b.Loop() {
			collate.FillNormal(dst, 1, 2)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(dst)), "ns/elem")
	})
}
