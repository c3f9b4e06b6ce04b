package vision

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzDecode feeds corrupted, truncated and huge-header JPEGs and PNGs to
// both decoders (libjpeg-turbo and Go's), in both modes: each call returns
// an error or writes an image, never panics, hangs or overruns its output,
// and whether it fails does not depend on the crop (two generators give
// the same answer), but for damage inside a JPEG scan that libjpeg-turbo
// finds only where the crop reaches it (entropyResidue).
func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.*"))
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, true, uint8(16))
		for _, k := range []int{len(b) / 5, len(b) * 2 / 3, len(b) - 2, len(b) - 1} {
			f.Add(b[:k], k%2 == 0, uint8(9+k))
		}
	}
	f.Add([]byte("\xff\xd8\xff\xc0\x00\x11\x08\xff\xff\xff\xff\x03\x01\x22\x00\x02\x11\x01\x03\x11\x01\xff\xd9"), true, uint8(4))
	// a TIFF whose IFD points 4 GB past its end
	f.Add([]byte("II*\x00\x08\x00\x00\x00\x01\x00\x11\x01\x04\x00\x02\x00\x00\x00\x00\x00\x00\xf0\x00\x00\x00\x00"), false, uint8(5))
	tr := []Transform{Train(16), Eval(16), {Train: true, Size: 16, Mode: Fast}, {Size: 16, Mode: Fast}}
	ds := make([]*Pipeline, len(tr))
	for i := range ds {
		d, err := NewPipeline(tr[i], MaxPixels(1<<22))
		if err != nil {
			f.Fatal(err)
		}
		defer d.Close()
		ds[i] = d
	}
	goDecoder, err := NewPipeline(tr[0], MaxPixels(1<<22))
	if err != nil {
		f.Fatal(err)
	}
	defer goDecoder.Close()
	goDecoder.lib = nil // Go's decoders only
	f.Fuzz(func(t *testing.T, data []byte, train bool, size uint8) {
		for _, d := range append(ds[:len(ds):len(ds)], goDecoder) {
			d.t.Size = 1 + int(size%48)
			n := d.t.Size * d.t.Size * 3 * d.t.Output.elemBytes()
			dst := withGuard(n)
			sc := &scratch{}
			if hasNative {
				if err := sc.n.init(d.lib); err != nil {
					t.Fatal(err)
				}
			}
			var errs [2]error
			for k := range errs {
				rng := newRand(uint64(len(data) + k))
				errs[k] = d.decode(sc, data, func(w, h int) Geometry { return d.t.Geometry(w, h, rng) }, dst[:n])
				checkGuard(t, dst, n, "decode")
			}
			sc.n.close()
			if (errs[0] == nil) != (errs[1] == nil) && !(d.lib != nil && (entropyResidue(errs[0]) || entropyResidue(errs[1]))) {
				t.Fatalf("%v: fails for one crop and not another: %v; %v", d.t, errs[0], errs[1])
			}
		}
	})
}
