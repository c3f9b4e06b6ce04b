package vision

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/collate"
)

const guard = 64

// withGuard returns a buffer of n bytes followed by guard bytes of 0xab.
func withGuard(n int) []byte {
	b := make([]byte, n+guard)
	for i := n; i < len(b); i++ {
		b[i] = 0xab
	}
	return b
}

func checkGuard(t *testing.T, b []byte, n int, what string) {
	t.Helper()
	require.Equal(t, bytes.Repeat([]byte{0xab}, guard), b[n:], "%s wrote past its output", what)
}

// Every C path gives the Go reference's bits, for random images,
// geometries, outputs, flips and both modes.
func TestKernelsMatchGoReference(t *testing.T) {
	t.Parallel()
	if !hasNative {
		t.Skip("built without cgo: the Go reference is the only path")
	}
	var n native
	require.NoError(t, n.init(nil))
	defer n.close()
	rng := newRand(42)
	var gs goScratch
	for it := range 300 {
		w, h := 1+rng.IntN(200), 1+rng.IntN(200)
		tr := Transform{Train: rng.IntN(2) == 0, Size: 1 + rng.IntN(70), Output: Output(rng.IntN(5)), Mode: Mode(rng.IntN(2))}
		if !tr.Train {
			tr.ResizeSize = 1 + rng.IntN(90)
		}
		tr = tr.withDefaults()
		g := tr.Geometry(w, h, rng)
		var pl plan
		buildPlan(&pl, g, &tr, 1, w, h)
		stride := (pl.X1-pl.X0)*4 + 4*rng.IntN(3)
		src := make([]byte, stride*(pl.Y1-pl.Y0))
		for i := range src {
			src[i] = byte(rng.Uint32())
		}
		want := withGuard(pl.DstBytes())
		resampleGo(want, src, stride, &pl, &gs)
		checkGuard(t, want, pl.DstBytes(), "the Go reference")
		for _, p := range collate.AvailableKernels()[1:] {
			got := withGuard(pl.DstBytes())
			require.NoError(t, n.resample(p, &pl, src, stride, got))
			checkGuard(t, got, pl.DstBytes(), p.String())
			require.Equal(t, want[:pl.DstBytes()], got[:pl.DstBytes()], "case %d on %s: %dx%d %+v %+v", it, p, w, h, tr, g)
		}
	}
}

// The fused JPEG path (decode into the band or the fast mode's ring,
// resample, write) equals the region decode followed by the Go reference,
// for every DCT scaling and both modes.
func TestJPEGFusedMatchesRegionAndReference(t *testing.T) {
	t.Parallel()
	_, lib, _ := jpegDecoder()
	if lib == nil {
		t.Skip("libjpeg-turbo not loaded")
	}
	var n native
	require.NoError(t, n.init(lib))
	defer n.close()
	files, _ := filepath.Glob(filepath.Join("testdata", "*.jpg"))
	require.NotEmpty(t, files)
	rng := newRand(7)
	var gs goScratch
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		hd, err := parseJPEG(data)
		require.NoError(t, err)
		for it := range 12 {
			tr := Transform{Train: it%3 != 0, Size: 8 + rng.IntN(40), Output: Output(rng.IntN(5)), Mode: Mode(it % 2)}.withDefaults()
			g := tr.Geometry(hd.w, hd.h, rng)
			o := jpegOpts{denom: []int{1, 1, 2, 4, 8}[rng.IntN(5)], maxPixels: 1 << 30}
			o.fastDCT, o.box = tr.Mode == Fast, tr.Mode == Fast
			sw, sh := ceilDiv(hd.w, o.denom), ceilDiv(hd.h, o.denom)
			var pl plan
			buildPlan(&pl, g, &tr, o.denom, sw, sh)
			stride := (pl.X1 - pl.X0) * 4
			region := make([]byte, stride*(pl.Y1-pl.Y0))
			require.NoError(t, n.jpegRegion(data, hd, o, &pl, region, stride))
			want := withGuard(pl.DstBytes())
			resampleGo(want, region, stride, &pl, &gs)
			for _, p := range collate.AvailableKernels()[1:] {
				got := withGuard(pl.DstBytes())
				require.NoError(t, n.jpeg(p, data, hd, o, &pl, got))
				checkGuard(t, got, pl.DstBytes(), p.String())
				require.Equal(t, want[:pl.DstBytes()], got[:pl.DstBytes()], fmt.Sprintf("%s case %d on %s: %+v %+v", f, it, p, o, g))
			}
		}
	}
}
