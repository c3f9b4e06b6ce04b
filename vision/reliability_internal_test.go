package vision

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// decodeBytes decodes data with d's transform and the crop drawn from a
// generator seeded with seed, on a fresh decoder.
func decodeBytes(t testing.TB, d *Pipeline, data []byte, seed uint64, dst []byte) error {
	sc := &scratch{}
	if hasNative {
		require.NoError(t, sc.n.init(d.lib))
	}
	defer sc.n.close()
	rng := newRand(seed)
	return d.decode(sc, data, func(w, h int) Geometry { return d.t.Geometry(w, h, rng) }, dst)
}

// entropyResidue says whether err is libjpeg-turbo's report of damage
// inside a scan's entropy-coded data that leaves the marker structure
// intact: found only where the crop's rows reach it (checkJPEG's known
// limit).
func entropyResidue(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "libjpeg: Corrupt JPEG data: bad Huffman code") ||
		strings.Contains(err.Error(), "libjpeg: Corrupt JPEG data: premature end of data segment"))
}

// Every test image cut at many lengths, decoded from bytes: the outcome
// (error or not, and which error) is the same for every crop, mode and
// decoder run, and a cut JPEG or PNG is ErrCorrupt. Go's decoders decode
// the whole file whatever the crop; the JPEG path checks the whole file
// first.
func TestCutFilesFailTheSameForEveryCrop(t *testing.T) {
	if testing.Short() {
		t.Skip("fault table over every cut, crop and decoder: slow; go test without -short runs it")
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "*.*"))
	require.NotEmpty(t, files)
	_, lib, _ := jpegDecoder()
	for _, useLib := range []bool{true, false} {
		for _, tr := range []Transform{Train(16), Eval(16), {Train: true, Size: 16, Mode: Fast}, {Size: 16, Mode: Fast},
			{Train: true, Size: 6, Scale: [2]float64{0.9, 1}, Mode: Fast}} {
			d, err := NewPipeline(tr)
			require.NoError(t, err)
			defer d.Close()
			if !useLib {
				d.lib = nil
			} else if lib == nil {
				continue
			}
			dst := make([]byte, 3*d.t.Size*d.t.Size*4)
			for _, f := range files {
				good, err := os.ReadFile(f)
				require.NoError(t, err)
				for k := 1; k < len(good); k += max(1, len(good)/23) {
					data := good[:k]
					first := decodeBytes(t, d, data, 0, dst)
					if s := sniff(good); (s == formatJPEG || s == formatPNG) && k >= 8 {
						assert.ErrorIs(t, first, ErrCorrupt, "%s cut to %d bytes, libjpeg %v, %+v", f, k, useLib, tr)
					}
					for seed := uint64(1); seed < 5; seed++ {
						err := decodeBytes(t, d, data, seed, dst)
						if !assert.Equal(t, errString(first), errString(err), "%s cut to %d bytes, libjpeg %v, %+v, seed %d", f, k, useLib, tr, seed) {
							return
						}
					}
				}
			}
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
