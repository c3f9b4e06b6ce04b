package vision

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The same decode gives the same bytes whatever the decoder decoded
// before, with either IDCT: no state leaks from image to image. (Not so
// with merged upsampling, libjpeg's do_fancy_upsampling off: after
// jpeg_skip_scanlines libjpeg-turbo 2.1.5 returns stale rows and, under
// valgrind, reads memory that jpeg_abort freed, which is why no mode uses
// it.)
func TestDecodeIndependentOfHistory(t *testing.T) {
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
	for _, fastDCT := range []bool{false, true} {
		for it := range 100 {
			data := imgs[it%len(imgs)]
			hd, _ := parseJPEG(data)
			tr := Transform{Train: true, Size: 8 + rng.IntN(40)}.withDefaults()
			g := tr.Geometry(hd.w, hd.h, rng)
			o := jpegOpts{denom: []int{1, 2, 4}[rng.IntN(3)], fastDCT: fastDCT, maxPixels: 1 << 30}
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
					n.jpegRegion(other, oh, jpegOpts{denom: 1, fastDCT: !fastDCT, maxPixels: 1 << 30}, &op, buf, (op.X1-op.X0)*4)
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
							t.Fatalf("fast DCT %v, image %d, %+v, denom %d: byte %d (row %d, col %d) differs: %d vs %d", fastDCT, it%len(imgs), pl, o.denom,
								i, i/stride, (i%stride)/4, ref[i], region[i])
						}
					}
				}
			}
		}
	}
}
