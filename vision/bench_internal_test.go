package vision

import (
	"fmt"
	"testing"

	"github.com/tensorbatch/tensorbatch/collate"
)

// A training crop (280x273 of a 500x375 image) and an evaluation window
// (Resize 256, CenterCrop 224), resampled from memory on every path.
func benchResample(b *testing.B, g Geometry, w, h int, out Output) {
	tr := Train(224)
	tr.Output = out
	var pl plan
	pl.build(g, &tr, 1, w, h)
	stride := (pl.x1 - pl.x0) * 4
	src := make([]byte, stride*(pl.y1-pl.y0))
	for i := range src {
		src[i] = byte(i * 7 >> 3)
	}
	dst := make([]byte, pl.dstBytes())
	for _, p := range collate.Paths() {
		b.Run(p.String(), func(b *testing.B) {
			var n native
			if hasNative {
				if err := n.init(nil); err != nil {
					b.Fatal(err)
				}
				defer n.close()
			}
			var gs goScratch
			b.ReportAllocs()
			for b.Loop() {
				if p == collate.PathGo || !hasNative {
					resampleGo(dst, src, stride, &pl, &gs)
				} else if err := n.resample(p, &pl, src, stride, dst); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e3, "us/image")
		})
	}
}

func BenchmarkResampleTrain(b *testing.B) {
	for _, out := range []Output{Float32CHW, Uint8HWC} {
		b.Run(fmt.Sprint(out), func(b *testing.B) {
			benchResample(b, Geometry{Box: Box{100, 50, 280, 273}, ResizeW: 224, ResizeH: 224, Size: 224}, 500, 375, out)
		})
	}
}

func BenchmarkResampleEval(b *testing.B) {
	benchResample(b, Eval(224).Geometry(500, 375, nil), 500, 375, Float32CHW)
}
