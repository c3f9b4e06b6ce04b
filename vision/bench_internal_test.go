package vision

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/tensorbatch/tensorbatch/collate"
)

// A training crop (280x273 of a 500x375 image) and an evaluation window
// (Resize 256, CenterCrop 224), resampled from memory on every path.
func benchResample(b *testing.B, g Geometry, w, h int, out Output) {
	tr := Train(224)
	tr.Output = out
	var pl plan
	buildPlan(&pl, g, &tr, 1, w, h)
	stride := (pl.X1 - pl.X0) * 4
	src := make([]byte, stride*(pl.Y1-pl.Y0))
	for i := range src {
		src[i] = byte(i * 7 >> 3)
	}
	dst := make([]byte, pl.DstBytes())
	for _, p := range collate.AvailableKernels() {
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
				if p == collate.KernelsGo || !hasNative {
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

// BenchmarkJPEGStages splits the libjpeg-turbo part of the train and eval
// transforms over $TB_BENCH_IMAGES (or the test images): "full" decodes
// the whole image (TurboJPEG's work), "region" only the plan's region
// (what the transform decodes, without resampling), "huffman" skips to
// the region's last row and decodes that one (about the entropy decoding
// the transform cannot avoid).
func BenchmarkJPEGStages(b *testing.B) {
	_, lib, _ := jpegDecoder()
	if lib == nil {
		b.Skip("libjpeg-turbo not loaded")
	}
	var paths []string
	if dir := os.Getenv("TB_BENCH_IMAGES"); dir != "" {
		paths, _ = filepath.Glob(filepath.Join(dir, "*", "*.JPEG"))
	} else {
		paths, _ = filepath.Glob(filepath.Join("testdata", "*.jpg"))
	}
	var files [][]byte
	var hds []jpegHeader
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		h, err := parseJPEG(data)
		if err != nil || (h.comps != 1 && h.comps != 3) {
			continue
		}
		files, hds = append(files, data), append(hds, h)
	}
	if len(files) == 0 {
		b.Skip("no images")
	}
	var n native
	if err := n.init(lib); err != nil {
		b.Fatal(err)
	}
	defer n.close()
	for _, tr := range []Transform{Train(224), Eval(224)} {
		name := map[bool]string{true: "train", false: "eval"}[tr.Train]
		for _, stage := range []string{"full", "region", "huffman"} {
			b.Run(name+"/"+stage, func(b *testing.B) {
				rng := newRand(1)
				var pl plan
				var buf []byte
				i := 0
				for b.Loop() {
					data, h := files[i%len(files)], hds[i%len(files)]
					i++
					buildPlan(&pl, tr.Geometry(h.w, h.h, rng), &tr, 1, h.w, h.h)
					switch stage {
					case "full":
						pl.X0, pl.Y0, pl.X1, pl.Y1 = 0, 0, h.w, h.h
					case "huffman":
						pl.Y0 = pl.Y1 - 1
					}
					stride := (pl.X1 - pl.X0) * 4
					buf = grow(buf, stride*(pl.Y1-pl.Y0))
					if err := n.jpegRegion(data, h, jpegOpts{denom: 1}, &pl, buf, stride); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e3, "us/image")
			})
		}
	}
}

// BenchmarkCheckJPEG is the cost of checking a whole JPEG before its crop
// is decoded (checkJPEG), beside the whole train-fast transform on the
// same bytes, which includes it: over the test images, the mate photos
// (scripts/install-deps.sh) and $TB_BENCH_IMAGES.
func BenchmarkCheckJPEG(b *testing.B) {
	sets := map[string]string{
		"testdata": filepath.Join("testdata", "*.jpg"),
		"photos":   "/usr/share/backgrounds/mate/nature/*.jpg",
	}
	if dir := os.Getenv("TB_BENCH_IMAGES"); dir != "" {
		sets["bench"] = filepath.Join(dir, "*", "*.JPEG")
	}
	for _, name := range []string{"testdata", "photos", "bench"} {
		paths, _ := filepath.Glob(sets[name])
		var files [][]byte
		size := 0
		for _, p := range paths {
			data, err := os.ReadFile(p)
			if err != nil {
				b.Fatal(err)
			}
			files = append(files, data)
			size += len(data)
		}
		if len(files) == 0 {
			continue
		}
		b.Run(name+"/check", func(b *testing.B) {
			b.SetBytes(int64(size / len(files)))
			i := 0
			for b.Loop() {
				if err := checkJPEG(files[i%len(files)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e3, "us/image")
		})
		b.Run(name+"/train-fast", func(b *testing.B) {
			d, err := NewPipeline(Transform{Train: true, Size: 224, Mode: Fast}, MaxPixels(0))
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			sc, err := d.get()
			if err != nil {
				b.Fatal(err)
			}
			defer d.put(sc)
			dst := make([]byte, d.schema[0].Bytes())
			rng := newRand(1)
			geom := func(w, h int) Geometry { return d.t.Geometry(w, h, rng) }
			b.SetBytes(int64(size / len(files)))
			i := 0
			for b.Loop() {
				if err := d.decode(sc, files[i%len(files)], geom, dst); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e3, "us/image")
		})
	}
}
