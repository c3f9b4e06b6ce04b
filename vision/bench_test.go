package vision_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tensorbatch/tensorbatch/vision"
)

// BenchmarkDecode is one image through each transform, from the file to
// the slot's bytes, on one goroutine, cycling through the test images (or
// the JPEG folder in $TB_BENCH_IMAGES, e.g. one made by
// scripts/make_imagenet_like.py). It reports allocs/op: 0 on the
// libjpeg-turbo path.
func BenchmarkDecode(b *testing.B) {
	var paths []string
	if dir := os.Getenv("TB_BENCH_IMAGES"); dir != "" {
		paths, _ = filepath.Glob(filepath.Join(dir, "*", "*.JPEG"))
	} else {
		paths, _ = filepath.Glob(filepath.Join(testdata, "*.jpg"))
	}
	if len(paths) == 0 {
		b.Skip("no images")
	}
	for _, tc := range []struct {
		name string
		t    vision.Transform
	}{
		{"train", vision.Train(224)},
		{"train-fast", vision.Transform{Train: true, Size: 224, Mode: vision.Fast}},
		{"eval", vision.Eval(224)},
		{"eval-fast", vision.Transform{Size: 224, Mode: vision.Fast}},
		{"train-uint8-fast", vision.Transform{Train: true, Size: 224, Output: vision.Uint8HWC, Mode: vision.Fast}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ds, err := vision.New(nil, nil, tc.t)
			if err != nil {
				b.Fatal(err)
			}
			defer ds.Close()
			dst := make([]byte, ds.Schema()[0].Bytes())
			rng := newRand(1)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if err := ds.Decode(paths[i%len(paths)], rng, dst); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "images/s")
		})
	}
}
