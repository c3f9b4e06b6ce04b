package vision

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The same decode gives the same bytes whatever the decoder decoded
// before, with either IDCT and either upsampling: no state leaks from
// image to image. (With libjpeg's merged upsampler, Fast's, it did until
// jpeg_run cleared cinfo->cconvert: jpeg_skip_scanlines of libjpeg-turbo
// 2.1.5 wrote through the freed color deconverter of an earlier image.)
func TestDecodeIndependentOfHistory(t *testing.T) {
	t.Parallel()
	_, lib, _ := jpegDecoder()
	if lib == nil {
		t.Skip("libjpeg-turbo not loaded")
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "*.jpg"))
	var imgs [][]byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		imgs = append(imgs, b)
	}
	rng := newRand(3)
	for _, fast := range []bool{false, true} { // Fast's decode (the fast IDCT, box upsampling) or Exact's
		for it := range 100 {
			data := imgs[it%len(imgs)]
			hd, _ := parseJPEG(data)
			tr := Transform{Train: true, Size: 8 + rng.IntN(40)}.withDefaults()
			g := tr.Geometry(hd.w, hd.h, rng)
			o := jpegOpts{denom: []int{1, 2, 4}[rng.IntN(3)], fastDCT: fast, box: fast, maxPixels: 1 << 30}
			var pl plan
			buildPlan(&pl, g, &tr, o.denom, ceilDiv(hd.w, o.denom), ceilDiv(hd.h, o.denom))
			stride := (pl.X1 - pl.X0) * 4
			var ref []byte
			for k := range 3 {
				var n native
				if err := n.init(lib); err != nil {
					t.Fatal(err)
				}
				// a different history each time
				for j := 0; j < k*3; j++ {
					other := imgs[(it+j+1)%len(imgs)]
					oh, _ := parseJPEG(other)
					var op plan
					buildPlan(&op, tr.Geometry(oh.w, oh.h, rng), &tr, 1, oh.w, oh.h)
					buf := make([]byte, (op.X1-op.X0)*4*(op.Y1-op.Y0))
					n.jpegRegion(other, oh, jpegOpts{denom: 1, fastDCT: !fast, box: !fast, maxPixels: 1 << 30}, &op, buf, (op.X1-op.X0)*4)
				}
				region := make([]byte, stride*(pl.Y1-pl.Y0))
				for i := range region {
					region[i] = byte(k * 77)
				}
				if err := n.jpegRegion(data, hd, o, &pl, region, stride); err != nil {
					t.Fatal(err)
				}
				n.close()
				for i := 3; i < len(region); i += 4 {
					region[i] = 0
				}
				if k == 0 {
					ref = region
				} else if !bytes.Equal(ref, region) {
					for i := range ref {
						if ref[i] != region[i] {
							t.Fatalf("Fast decode %v, image %d, %+v, denom %d: byte %d (row %d, col %d) differs: %d vs %d", fast, it%len(imgs), pl, o.denom,
								i, i/stride, (i%stride)/4, ref[i], region[i])
						}
					}
				}
			}
		}
	}
}

// A region decoded with jpeg_skip_scanlines and jpeg_crop_scanline is the
// same region of the whole image decoded, for either upsampling (libjpeg's
// merged upsampler included) and DCT scaling, whatever was decoded before.
func TestJPEGRegionMatchesWholeDecode(t *testing.T) {
	t.Parallel()
	_, lib, _ := jpegDecoder()
	if lib == nil {
		t.Skip("libjpeg-turbo not loaded")
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "*.jpg"))
	var n native
	if err := n.init(lib); err != nil {
		t.Fatal(err)
	}
	defer n.close()
	rng := newRand(5)
	for it := range 600 {
		data, err := os.ReadFile(files[rng.IntN(len(files))])
		if err != nil {
			t.Fatal(err)
		}
		hd, _ := parseJPEG(data)
		fast := rng.IntN(4) != 0
		o := jpegOpts{denom: []int{1, 1, 2}[rng.IntN(3)], fastDCT: fast, box: fast, maxPixels: 1 << 30}
		sw, sh := ceilDiv(hd.w, o.denom), ceilDiv(hd.h, o.denom)
		whole := make([]byte, sw*4*sh)
		if err := n.jpegRegion(data, hd, o, &plan{X0: 0, Y0: 0, X1: sw, Y1: sh}, whole, sw*4); err != nil {
			t.Fatal(err)
		}
		x0, y0 := rng.IntN(sw), rng.IntN(sh)
		x1, y1 := x0+1+rng.IntN(sw-x0), y0+1+rng.IntN(sh-y0)
		if rng.IntN(3) == 0 {
			y1 = sh
		}
		stride := (x1 - x0) * 4
		region := make([]byte, stride*(y1-y0))
		if err := n.jpegRegion(data, hd, o, &plan{X0: x0, Y0: y0, X1: x1, Y1: y1}, region, stride); err != nil {
			t.Fatal(err)
		}
		for y := y0; y < y1; y++ {
			got, want := region[(y-y0)*stride:(y-y0+1)*stride], whole[y*sw*4+x0*4:y*sw*4+x1*4]
			if !bytes.Equal(got, want) {
				t.Fatalf("case %d, %+v, %dx%d, region [%d,%d)x[%d,%d): row %d differs from the whole decode", it, o, sw, sh, x0, x1, y0, y1, y)
			}
		}
	}
}

// A worker keeps the plans of the last few image sizes: decoding images of
// more sizes than it keeps, in turn and then again, writes what a fresh
// worker writes for each.
func TestPlanCacheSameBits(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob(filepath.Join("testdata", "*.*"))
	var imgs [][]byte
	sizes := map[[2]int]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if w, h, err := imageSize(b); err == nil && w*h < 1<<20 {
			imgs = append(imgs, b)
			sizes[[2]int{w, h}] = true
		}
	}
	if len(sizes) <= planCacheSize {
		t.Fatalf("test images of %d sizes, want more than %d", len(sizes), planCacheSize)
	}
	for _, tr := range []Transform{{Size: 32, Mode: Fast}, {Size: 32}, {Train: true, Size: 32, Mode: Fast}} {
		p, err := NewPipeline(tr)
		if err != nil {
			t.Fatal(err)
		}
		sc, err := p.get()
		if err != nil {
			t.Fatal(err)
		}
		got, want := make([]byte, p.schema[0].Bytes()), make([]byte, p.schema[0].Bytes())
		for it := range 3 * len(imgs) {
			data := imgs[(it*3)%len(imgs)]
			geom := func(w, h int) Geometry { return p.t.Geometry(w, h, newRand(uint64(it))) }
			if err := p.decode(sc, data, geom, got); err != nil {
				t.Fatal(err)
			}
			fresh := &scratch{}
			if hasNative {
				if err := fresh.n.init(p.lib); err != nil {
					t.Fatal(err)
				}
			}
			if err := p.decode(fresh, data, geom, want); err != nil {
				t.Fatal(err)
			}
			fresh.n.close()
			if !bytes.Equal(got, want) {
				t.Fatalf("%+v, decode %d (image %d): a reused worker's bytes differ from a fresh one's", tr, it, (it*3)%len(imgs))
			}
		}
		p.put(sc)
		p.Close()
	}
}
