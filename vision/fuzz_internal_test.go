package vision

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzDecode feeds corrupted, truncated and huge-header JPEGs and PNGs to
// both decoders (libjpeg-turbo and Go's), in both modes: each call returns
// an error or writes an image, never panics, hangs or overruns its output.
func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.*"))
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, true, uint8(16))
		f.Add(b[:len(b)*2/3], false, uint8(9))
	}
	f.Add([]byte("\xff\xd8\xff\xc0\x00\x11\x08\xff\xff\xff\xff\x03\x01\x22\x00\x02\x11\x01\x03\x11\x01\xff\xd9"), true, uint8(4))
	tr := []Transform{Train(16), Eval(16), {Train: true, Size: 16, Mode: Fast}, {Size: 16, Mode: Fast}}
	ds := make([]*Dataset, len(tr))
	for i := range ds {
		d, err := New(nil, nil, tr[i], MaxPixels(1<<22))
		if err != nil {
			f.Fatal(err)
		}
		defer d.Close()
		ds[i] = d
	}
	goDecoder, err := New(nil, nil, tr[0], MaxPixels(1<<22))
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
			rng := newRand(uint64(len(data)))
			_ = d.decode(sc, data, func(w, h int) Geometry { return d.t.Geometry(w, h, rng) }, dst[:n])
			sc.n.close()
			checkGuard(t, dst, n, "decode")
		}
	})
}
